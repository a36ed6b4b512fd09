#pragma once
// bfloat16 as bit patterns with round-to-nearest-even (the rounding of torch's float -> bf16 cast).
// Values "in bf16" are kept as floats that are exactly representable in bf16.
#include <bit>
#include <cstdint>

namespace dionsim::opt {

[[nodiscard]] inline std::uint16_t bf16_bits(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0) {
    return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // quiet NaN, keep the sign
  }
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
[[nodiscard]] inline float bf16_value(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }
[[nodiscard]] inline float round_bf16(float f) { return bf16_value(bf16_bits(f)); }

}  // namespace dionsim::opt
