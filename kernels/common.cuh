#pragma once
// Internal device helpers shared by the kernel files.
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/ops.hpp"

namespace dionsim::kernels::detail {

__device__ inline float bf16_to_float(std::uint16_t b) { return __uint_as_float(static_cast<unsigned>(b) << 16); }
__device__ inline std::uint16_t float_to_bf16(float f) {
  __nv_bfloat16 h = __float2bfloat16_rn(f);
  return *reinterpret_cast<std::uint16_t*>(&h);
}
__device__ inline float round_to_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

// Load/store one momentum element as fp32 (single rounding on store for bf16).
__device__ inline float load_m(const void* M, bool bf16, long long i) {
  return bf16 ? bf16_to_float(static_cast<const std::uint16_t*>(M)[i]) : static_cast<const float*>(M)[i];
}
__device__ inline void store_m(void* M, bool bf16, long long i, float v) {
  if (bf16) static_cast<std::uint16_t*>(M)[i] = float_to_bf16(v);
  else static_cast<float*>(M)[i] = v;
}

// 8 bf16 values in one 16-byte access (memory-bound kernels need 16-byte loads to reach HBM
// bandwidth; 2-byte scalar accesses reach about half).
__device__ inline void unpack8(const uint4& v, float f[8]) {
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
__device__ inline uint4 pack8(const float f[8]) {
  unsigned w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    w[i] = static_cast<unsigned>(float_to_bf16(f[2 * i])) | (static_cast<unsigned>(float_to_bf16(f[2 * i + 1])) << 16);
  return make_uint4(w[0], w[1], w[2], w[3]);
}
__device__ inline bool aligned16(const void* p) { return (reinterpret_cast<unsigned long long>(p) & 15u) == 0; }

// Row copy / fill with 16-byte accesses when the row allows it (cols % 8 == 0, aligned bases).
__device__ inline void copy_row(std::uint16_t* o, const std::uint16_t* i, long long cols) {
  if (cols % 8 == 0 && aligned16(o) && aligned16(i)) {
    for (long long q = threadIdx.x; q < cols / 8; q += blockDim.x)
      reinterpret_cast<uint4*>(o)[q] = reinterpret_cast<const uint4*>(i)[q];
    return;
  }
  for (long long j = threadIdx.x; j < cols; j += blockDim.x) o[j] = i[j];
}
__device__ inline void zero_row(std::uint16_t* o, long long cols) {
  if (cols % 8 == 0 && aligned16(o)) {
    for (long long q = threadIdx.x; q < cols / 8; q += blockDim.x) reinterpret_cast<uint4*>(o)[q] = make_uint4(0, 0, 0, 0);
    return;
  }
  for (long long j = threadIdx.x; j < cols; j += blockDim.x) o[j] = 0;
}
// fp32 or bf16 momentum row -> bf16 row
__device__ inline void convert_row(std::uint16_t* o, const void* M, bool bf16, long long src, long long cols) {
  if (bf16) { copy_row(o, static_cast<const std::uint16_t*>(M) + src, cols); return; }
  const float* f = static_cast<const float*>(M) + src;
  if (cols % 8 == 0 && aligned16(o) && aligned16(f)) {
    for (long long q = threadIdx.x; q < cols / 8; q += blockDim.x) {
      const float4 a = reinterpret_cast<const float4*>(f)[2 * q], b = reinterpret_cast<const float4*>(f)[2 * q + 1];
      const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
      reinterpret_cast<uint4*>(o)[q] = pack8(v);
    }
    return;
  }
  for (long long j = threadIdx.x; j < cols; j += blockDim.x) o[j] = float_to_bf16(f[j]);
}

// Deterministic block-wide sum (fixed tree order for a given blockDim). blockDim.x must be a
// multiple of 32 and <= 1024; every thread gets the result.
__device__ inline float block_sum(float v) {
  __shared__ float warp_sums[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  const int nwarps = blockDim.x >> 5;
  float t = lane < nwarps ? warp_sums[lane] : 0.0F;
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  return t;
}

// Block-wide exclusive scan of ints; returns this thread's exclusive prefix, *total gets the sum.
__device__ inline int block_exclusive_scan(int v, int* total) {
  __shared__ int warp_tot[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int x = v;
  for (int o = 1; o < 32; o <<= 1) {
    int y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  __syncthreads();
  if (lane == 31) warp_tot[warp] = x;
  __syncthreads();
  if (warp == 0) {
    const int nwarps = blockDim.x >> 5;
    int t = lane < nwarps ? warp_tot[lane] : 0;
    for (int o = 1; o < 32; o <<= 1) {
      int y = __shfl_up_sync(0xffffffffu, t, o);
      if (lane >= o) t += y;
    }
    warp_tot[lane] = t;  // inclusive prefix over warps
  }
  __syncthreads();
  const int before = warp > 0 ? warp_tot[warp - 1] : 0;
  *total = warp_tot[(blockDim.x >> 5) - 1];
  return before + x - v;
}

}  // namespace dionsim::kernels::detail
