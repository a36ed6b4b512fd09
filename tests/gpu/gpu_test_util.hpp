#pragma once
// Shared helpers for the GPU tests: seeded random data, bf16 conversions, norms of differences.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "optimizer/bf16.hpp"
#include "kernels/device.hpp"
#include "kernels/ops.hpp"

namespace dionsim::kernels::testing {

inline std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float scale = 1.0F) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0F, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
inline std::vector<bf16_bits> to_bf16(const std::vector<float>& v) {
  std::vector<bf16_bits> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = kernels::to_bf16(v[i]);
  return out;
}
inline std::vector<float> from_bf16(const std::vector<bf16_bits>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = kernels::from_bf16(v[i]);
  return out;
}
// ||a - b||_F / ||b||_F in double.
inline double rel_frobenius(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

// Momentum buffer on the device in its dtype, from fp32 values.
struct DeviceMomentum {
  MomentumDtype dtype;
  DeviceArray<float> f32;
  DeviceArray<bf16_bits> b16;
  DeviceMomentum(const std::vector<float>& v, MomentumDtype d) : dtype(d) {
    if (d == MomentumDtype::fp32) f32 = DeviceArray<float>(v);
    else b16 = DeviceArray<bf16_bits>(testing::to_bf16(v));
  }
  void* data() { return dtype == MomentumDtype::fp32 ? static_cast<void*>(f32.data()) : static_cast<void*>(b16.data()); }
  std::vector<float> download() const { return dtype == MomentumDtype::fp32 ? f32.download() : testing::from_bf16(b16.download()); }
};

}  // namespace dionsim::kernels::testing
