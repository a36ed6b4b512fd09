#pragma once
// Host-side bfloat16 (bit pattern in a uint16_t), round-to-nearest-even as CUDA's __float2bfloat16
// and PyTorch do. Used by the CPU references and the tests.
#include <cstdint>
#include <cstring>

namespace dionsim::kernels {

using bf16_bits = std::uint16_t;

[[nodiscard]] inline bf16_bits to_bf16(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);  // (C++17: CUDA translation units include this header too)
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_bits>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<bf16_bits>(u >> 16);
}
[[nodiscard]] inline float from_bf16(bf16_bits b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
[[nodiscard]] inline float round_bf16(float f) { return from_bf16(to_bf16(f)); }

}  // namespace dionsim::kernels
