#pragma once
// The project's one host-side definition of its 16-bit float formats, as bit patterns in a
// uint16_t with round-to-nearest-even (the rounding of torch's float -> bf16 / fp16 casts, CUDA's
// __float2bfloat16 and __float2half_rn). Values "in bf16" (or fp16) are kept as floats that are
// exactly representable. Used by the CPU reference (optimizer/), the kernels' CPU references and
// launch interfaces (kernels/), and the tests. Plain C++17 (CUDA translation units include it) and
// no CUDA header: the device-side conversions are in kernels/common.cuh.
#include <cstdint>
#include <cstring>

namespace dionsim {

using bf16_bits = std::uint16_t;  // a bf16 value's bit pattern
using fp16_bits = std::uint16_t;  // an IEEE binary16 value's bit pattern

[[nodiscard]] inline bf16_bits to_bf16(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);  // (std::bit_cast is C++20; CUDA translation units are C++17)
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_bits>((u >> 16) | 0x40u);  // quiet NaN, sign kept
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

// IEEE binary16 (the Gram Newton-Schulz working type, spec §2.6.3): round to nearest even,
// overflow to infinity, subnormals kept, NaN quieted.
[[nodiscard]] inline fp16_bits to_fp16(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<fp16_bits>(sign | 0x7e00u);   // NaN
  if (a >= 0x477ff000u) return static_cast<fp16_bits>(sign | 0x7c00u);  // rounds to >= 65520: infinity
  if (a >= 0x38800000u) {  // normal in fp16 (>= 2^-14)
    const std::uint32_t m = a + 0x0fffu + ((a >> 13) & 1u) - (112u << 23);  // rebias 127 -> 15, round
    return static_cast<fp16_bits>(sign | (m >> 13));
  }
  if (a < 0x33000000u) return static_cast<fp16_bits>(sign);  // below half the smallest subnormal: zero
  // Subnormal: value = mant * 2^-24 with the implicit bit, rounded to nearest even.
  const std::uint32_t e = a >> 23, mant = (a & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126u - e;  // value = mant * 2^(e - 150) = (mant >> shift) * 2^-24
  const std::uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  const std::uint32_t r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
  return static_cast<fp16_bits>(sign | r);
}
[[nodiscard]] inline float from_fp16(fp16_bits h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  std::uint32_t u = 0;
  if (e == 0x1fu) {
    u = sign | 0x7f800000u | (m << 13);
  } else if (e != 0) {
    u = sign | ((e + 112u) << 23) | (m << 13);
  } else if (m != 0) {  // subnormal: m * 2^-24
    float f = static_cast<float>(m) * 5.9604644775390625e-8F;
    std::memcpy(&u, &f, sizeof u);
    u |= sign;
  } else {
    u = sign;
  }
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
[[nodiscard]] inline float round_fp16(float f) { return from_fp16(to_fp16(f)); }

// The same names in the two libraries' namespaces (declarations, not second definitions), so code
// that says `using namespace dionsim::opt` or `dionsim::kernels` finds them.
namespace opt {
using dionsim::bf16_bits;
using dionsim::fp16_bits;
using dionsim::from_bf16;
using dionsim::from_fp16;
using dionsim::round_bf16;
using dionsim::round_fp16;
using dionsim::to_bf16;
using dionsim::to_fp16;
}  // namespace opt
namespace kernels {
using dionsim::bf16_bits;
using dionsim::fp16_bits;
using dionsim::from_bf16;
using dionsim::from_fp16;
using dionsim::round_bf16;
using dionsim::round_fp16;
using dionsim::to_bf16;
using dionsim::to_fp16;
}  // namespace kernels

}  // namespace dionsim
