// Exact-count stable selection (radix select on order-preserving key bits, then a tie pass in
// position order) and mask compaction. One block per segment: segments are matrices (<= a few
// hundred) of <= ~100k keys, so one SM per matrix finishes in microseconds and the result is
// deterministic (no cross-block races, no atomics on the output).
#include <stdexcept>

#include "kernels/check.cuh"
#include "kernels/common.cuh"
#include "kernels/ops.hpp"

namespace dionsim::kernels {
namespace {

constexpr int kThreads = 1024;

// Monotone map float -> uint32 (larger float -> larger uint); -0 is folded onto +0 so that equal
// floats are equal keys.
__device__ inline unsigned ordered_bits(float f) {
  if (f == 0.0F) f = 0.0F;
  const unsigned u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ inline float from_ordered_bits(unsigned t) {
  return __uint_as_float((t & 0x80000000u) ? (t & 0x7fffffffu) : ~t);
}

__global__ void __launch_bounds__(kThreads) stable_topk_kernel(const float* __restrict__ keys, long long len,
                                                              long long count, std::uint8_t* __restrict__ mask,
                                                              float* __restrict__ kth_key) {
  const long long seg = blockIdx.x;
  const float* key = keys + seg * len;
  std::uint8_t* out = mask + seg * len;
  const long long k = count < len ? count : len;
  __shared__ unsigned hist[256];
  __shared__ unsigned prefix, prefix_mask;
  __shared__ long long remaining;
  if (k <= 0) {
    for (long long i = threadIdx.x; i < len; i += blockDim.x) out[i] = 0;
    if (kth_key != nullptr && threadIdx.x == 0) kth_key[seg] = 0.0F;
    return;
  }
  if (threadIdx.x == 0) { prefix = 0; prefix_mask = 0; remaining = k; }
  // Radix select of the k-th largest key, 8 bits per pass from the top.
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int d = threadIdx.x; d < 256; d += blockDim.x) hist[d] = 0;
    __syncthreads();
    const unsigned p = prefix, pm = prefix_mask;
    for (long long i = threadIdx.x; i < len; i += blockDim.x) {
      const unsigned u = ordered_bits(key[i]);
      if ((u & pm) == p) atomicAdd(&hist[(u >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      long long cum = 0;
      for (int d = 255; d >= 0; --d) {
        if (cum + hist[d] >= remaining) {
          remaining -= cum;
          prefix |= static_cast<unsigned>(d) << shift;
          prefix_mask |= 255u << shift;
          break;
        }
        cum += hist[d];
      }
    }
    __syncthreads();
  }
  // `remaining` keys equal to the threshold are selected, the lowest positions first.
  const unsigned thresh = prefix;
  const long long need = remaining;
  long long ties_before = 0;
  for (long long base = 0; base < len; base += blockDim.x) {
    const long long i = base + threadIdx.x;
    const unsigned u = i < len ? ordered_bits(key[i]) : 0u;
    const int tie = (i < len && u == thresh) ? 1 : 0;
    int total = 0;
    const int before = detail::block_exclusive_scan(tie, &total);
    if (i < len) out[i] = (u > thresh || (tie && ties_before + before < need)) ? 1 : 0;
    ties_before += total;
  }
  if (kth_key != nullptr && threadIdx.x == 0) kth_key[seg] = from_ordered_bits(thresh);
}

__global__ void __launch_bounds__(kThreads) compact_kernel(const std::uint8_t* __restrict__ mask, long long len,
                                                          std::int32_t* __restrict__ index,
                                                          std::int32_t* __restrict__ count) {
  const long long seg = blockIdx.x;
  long long written = 0;
  for (long long base = 0; base < len; base += blockDim.x) {
    const long long i = base + threadIdx.x;
    const int set = (i < len && mask[seg * len + i]) ? 1 : 0;
    int total = 0;
    const int before = detail::block_exclusive_scan(set, &total);
    if (set) index[seg * len + written + before] = static_cast<std::int32_t>(i);
    written += total;
  }
  if (threadIdx.x == 0) count[seg] = static_cast<std::int32_t>(written);
}

}  // namespace

void stable_topk_mask(const float* keys, int segments, std::int64_t len, std::int64_t count, std::uint8_t* mask,
                      float* kth_key, StreamHandle s) {
  if (segments < 0 || len < 0 || count < 0 || len >= (1LL << 31))
    throw std::invalid_argument("stable_topk_mask: segments, len, count must be >= 0 and len < 2^31");
  if (segments == 0) return;
  stable_topk_kernel<<<static_cast<unsigned>(segments), kThreads, 0, detail::stream(s)>>>(keys, len, count, mask,
                                                                                          kth_key);
  DIONSIM_LAUNCH_CHECK("stable_topk_mask");
}

void compact_mask(const std::uint8_t* mask, int segments, std::int64_t len, std::int32_t* index, std::int32_t* count,
                  StreamHandle s) {
  if (segments < 0 || len < 0 || len >= (1LL << 31))
    throw std::invalid_argument("compact_mask: segments, len must be >= 0 and len < 2^31");
  if (segments == 0) return;
  compact_kernel<<<static_cast<unsigned>(segments), kThreads, 0, detail::stream(s)>>>(mask, len, index, count);
  DIONSIM_LAUNCH_CHECK("compact_mask");
}

}  // namespace dionsim::kernels
