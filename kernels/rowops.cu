// Row-wise kernels: momentum accumulate + L1 keys, bf16 keys, gathers/scatters, padding, EF on rows.
// One block per row for the reductions (rows are >= 1k columns in every inventory we run).
#include <algorithm>
#include <stdexcept>

#include "kernels/check.cuh"
#include "kernels/common.cuh"
#include "kernels/ops.hpp"

namespace dionsim::kernels {
namespace {

using detail::bf16_to_float;
using detail::float_to_bf16;
constexpr int kRowThreads = 256;
using detail::convert_row;
using detail::copy_row;
using detail::zero_row;



__global__ void accumulate_row_l1_kernel(const float* __restrict__ G, void* M, bool bf16, long long cols,
                                         float* __restrict__ keys, std::uint16_t* copy, long long L, long long pl) {
  const long long row = blockIdx.x;
  const long long base = row * cols;
  // Optional bf16 copy of the accumulated row into a [N][pl][C] padded layout (global path's payload).
  std::uint16_t* out = copy != nullptr ? copy + ((row / L) * pl + row % L) * cols : nullptr;
  float acc = 0.0F;
  if (!bf16 && cols % 4 == 0) {
    const float4* g4 = reinterpret_cast<const float4*>(G + base);
    float4* m4 = reinterpret_cast<float4*>(static_cast<float*>(M) + base);
    for (long long q = threadIdx.x; q < cols / 4; q += blockDim.x) {
      const float4 g = g4[q];
      float4 m = m4[q];
      m.x += g.x; m.y += g.y; m.z += g.z; m.w += g.w;
      m4[q] = m;
      acc += fabsf(m.x) + fabsf(m.y) + fabsf(m.z) + fabsf(m.w);
      if (out != nullptr) {
        const unsigned lo = static_cast<unsigned>(float_to_bf16(m.x)) | (static_cast<unsigned>(float_to_bf16(m.y)) << 16);
        const unsigned hi = static_cast<unsigned>(float_to_bf16(m.z)) | (static_cast<unsigned>(float_to_bf16(m.w)) << 16);
        reinterpret_cast<uint2*>(out)[q] = make_uint2(lo, hi);
      }
    }
  } else {
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
      float m = detail::load_m(M, bf16, base + j) + (bf16 ? detail::round_to_bf16(G[base + j]) : G[base + j]);
      detail::store_m(M, bf16, base + j, m);
      if (bf16) m = detail::round_to_bf16(m);
      acc += fabsf(m);
      if (out != nullptr) out[j] = float_to_bf16(m);
    }
  }
  acc = detail::block_sum(acc);
  if (threadIdx.x == 0) keys[row] = bf16 ? detail::round_to_bf16(acc) : acc;
}

__global__ void row_l1_bf16_kernel(const std::uint16_t* __restrict__ X, long long cols, float* __restrict__ keys) {
  const long long base = static_cast<long long>(blockIdx.x) * cols;
  float acc = 0.0F;
  if (cols % 8 == 0 && detail::aligned16(X)) {
    const uint4* x8 = reinterpret_cast<const uint4*>(X + base);
    for (long long q = threadIdx.x; q < cols / 8; q += blockDim.x) {
      float f[8];
      detail::unpack8(x8[q], f);
#pragma unroll
      for (int k = 0; k < 8; ++k) acc += fabsf(f[k]);
    }
  } else {
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) acc += fabsf(bf16_to_float(X[base + j]));
  }
  acc = detail::block_sum(acc);
  if (threadIdx.x == 0) keys[blockIdx.x] = detail::round_to_bf16(acc);
}

// grid (slots, segments)
template <bool kSrcBf16>
__global__ void gather_rows_kernel(const void* src, bool m_bf16, const std::int32_t* index, const std::int32_t* count,
                                   long long rows_per_seg, long long slots, long long cols, std::uint16_t* out,
                                   float ef) {
  const long long seg = blockIdx.y, t = blockIdx.x;
  std::uint16_t* o = out + (seg * slots + t) * cols;
  if (t >= count[seg]) {
    zero_row(o, cols);
    return;
  }
  const long long r = seg * rows_per_seg + index[seg * rows_per_seg + t];
  if constexpr (kSrcBf16) {
    copy_row(o, static_cast<const std::uint16_t*>(src) + r * cols, cols);
  } else {
    convert_row(o, src, m_bf16, r * cols, cols);
    if (ef != 1.0F) {  // EF decay of the row just copied (pre-decay) to the payload
      __syncthreads();  // every thread's copy read happens before any write of the decayed value
      void* M = const_cast<void*>(src);
      for (long long j = threadIdx.x; j < cols; j += blockDim.x)
        detail::store_m(M, m_bf16, r * cols + j, detail::load_m(M, m_bf16, r * cols + j) * ef);
    }
  }
}

// Post row maps (ops.hpp): u_row is filled with -1 first (memset 0xff).
__global__ void row_map_index_kernel(const std::int32_t* index, const std::int32_t* count, long long L, long long k,
                                     std::int32_t* u_row) {
  const long long m = blockIdx.y;
  const long long n = count[m] < k ? count[m] : k;
  for (long long t = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<long long>(gridDim.x) * blockDim.x)
    u_row[m * L + index[m * L + t]] = static_cast<std::int32_t>(m * k + t);
}
__global__ void row_map_slots_kernel(const std::int32_t* slot_src, long long slots, std::int32_t* u_row) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < slots;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    if (slot_src[i] >= 0) u_row[slot_src[i]] = static_cast<std::int32_t>(i);
}

__global__ void zero_rows_kernel(std::uint16_t* dst, long long cols) {
  zero_row(dst + static_cast<long long>(blockIdx.x) * cols, cols);
}
__global__ void scatter_rows_kernel(const std::uint16_t* src, const std::int32_t* index, const std::int32_t* count,
                                    long long slots, long long rows_per_seg, long long cols, std::uint16_t* dst) {
  const long long seg = blockIdx.y, t = blockIdx.x;
  if (t >= count[seg]) return;
  copy_row(dst + (seg * rows_per_seg + index[seg * rows_per_seg + t]) * cols, src + (seg * slots + t) * cols, cols);
}

// Owner-side rows addressed in the received blocked layout [w][pr][pl][C]: assembled row p of
// matrix j lives at ((p / pl) * pr + j) * pl + p % pl. grid (slots, pr).
__device__ inline long long blocked_row(long long p, long long j, int pr, long long pl) {
  return ((p / pl) * pr + j) * pl + p % pl;
}
__global__ void gather_blocked_kernel(const std::uint16_t* recv, const std::int32_t* index, const std::int32_t* count,
                                      int pr, long long pl, long long Sp, long long slots, long long cols,
                                      std::uint16_t* out) {
  const long long j = blockIdx.y, t = blockIdx.x;
  std::uint16_t* o = out + (j * slots + t) * cols;
  if (t >= count[j]) {
    zero_row(o, cols);
    return;
  }
  copy_row(o, recv + blocked_row(index[j * Sp + t], j, pr, pl) * cols, cols);
}
__global__ void scatter_blocked_kernel(const std::uint16_t* src, const std::int32_t* index, const std::int32_t* count,
                                       int pr, long long pl, long long Sp, long long slots, long long cols,
                                       std::uint16_t* send) {
  const long long j = blockIdx.y, t = blockIdx.x;
  if (t >= count[j]) return;
  std::uint16_t* o = send + blocked_row(index[j * Sp + t], j, pr, pl) * cols;
  if (src == nullptr) zero_row(o, cols);
  else copy_row(o, src + (j * slots + t) * cols, cols);
}

__global__ void scale_rows_kernel(void* M, bool bf16, const std::int32_t* index, const std::int32_t* count,
                                  long long rows_per_seg, long long cols, float ef) {
  const long long seg = blockIdx.y, t = blockIdx.x;
  if (t >= count[seg]) return;
  const long long base = (seg * rows_per_seg + index[seg * rows_per_seg + t]) * cols;
  for (long long j = threadIdx.x; j < cols; j += blockDim.x)
    detail::store_m(M, bf16, base + j, detail::load_m(M, bf16, base + j) * ef);
}

// grid (pl, Np)
__global__ void pad_shards_kernel(const void* M, bool bf16, int N, long long L, long long pl, long long cols,
                                  std::uint16_t* out) {
  const long long m = blockIdx.y, r = blockIdx.x;
  std::uint16_t* o = out + (m * pl + r) * cols;
  if (m < N && r < L) convert_row(o, M, bf16, (m * L + r) * cols, cols);
  else zero_row(o, cols);
}

// grid (rows, pr, w): 16-byte copies when cols is a multiple of 8.
template <bool kInterleave>
__global__ void interleave_kernel(const std::uint16_t* in, int w, int pr, long long rows, long long cols,
                                  std::uint16_t* out) {
  const long long t = blockIdx.x, j = blockIdx.y, s = blockIdx.z;
  const long long blocked = ((s * pr + j) * rows + t) * cols;             // [w][pr][rows]
  const long long owner = ((j * w + s) * rows + t) * cols;                // [pr][w*rows]
  const std::uint16_t* i = in + (kInterleave ? blocked : owner);
  std::uint16_t* o = out + (kInterleave ? owner : blocked);
  if (cols % 8 == 0) {
    const uint4* i4 = reinterpret_cast<const uint4*>(i);
    uint4* o4 = reinterpret_cast<uint4*>(o);
    for (long long q = threadIdx.x; q < cols / 8; q += blockDim.x) o4[q] = i4[q];
  } else {
    for (long long q = threadIdx.x; q < cols; q += blockDim.x) o[q] = i[q];
  }
}

__global__ void pad_norms_kernel(const float* norms, long long L, long long pl, float* out) {
  const long long m = blockIdx.y;
  for (long long r = blockIdx.x * blockDim.x + threadIdx.x; r < pl; r += gridDim.x * blockDim.x)
    out[m * pl + r] = r < L ? norms[m * L + r] : -1.0F;
}
__global__ void gather_to_matrix_major_kernel(const float* g, int w, int N, long long pl, float* keys) {
  const long long total = static_cast<long long>(w) * N * pl;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long s = i / (N * pl), m = (i / pl) % N, r = i % pl;
    keys[m * (w * pl) + s * pl + r] = g[i];
  }
}

__device__ inline unsigned long long mix64(unsigned long long x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
__global__ void fill_random_kernel(float* out, long long n, unsigned long long seed, float scale) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const unsigned long long h = mix64(seed ^ mix64(static_cast<unsigned long long>(i)));
    const float u1 = (static_cast<float>(h >> 40) + 1.0F) * (1.0F / 16777217.0F);  // (0, 1]
    const float u2 = static_cast<float>((h >> 16) & 0xffffffULL) * (1.0F / 16777216.0F);
    out[i] = scale * sqrtf(-2.0F * logf(u1)) * cospif(2.0F * u2);
  }
}

void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(std::string("kernels: precondition failed: ") + what);
}
unsigned grid_dim(long long n, const char* what) {
  require(n >= 0 && n < (1LL << 31), what);
  return static_cast<unsigned>(n);
}

}  // namespace

void accumulate_row_l1(const float* G, void* M, MomentumDtype dtype, std::int64_t rows, std::int64_t cols,
                       float* keys, StreamHandle s) {
  require(rows >= 0 && cols > 0, "accumulate_row_l1: rows >= 0, cols > 0");
  if (rows == 0) return;
  accumulate_row_l1_kernel<<<grid_dim(rows, "rows"), kRowThreads, 0, detail::stream(s)>>>(
      G, M, dtype == MomentumDtype::bf16, cols, keys, nullptr, 1, 1);
  DIONSIM_LAUNCH_CHECK("accumulate_row_l1");
}

void accumulate_row_l1_copy(const float* G, void* M, MomentumDtype dtype, int N, std::int64_t L, std::int64_t pl,
                            std::int64_t cols, float* keys, bf16_bits* copy, StreamHandle s) {
  require(N >= 0 && L >= 0 && L <= pl && cols > 0, "accumulate_row_l1_copy: 0 <= L <= pl, cols > 0");
  if (N == 0 || L == 0) return;
  accumulate_row_l1_kernel<<<grid_dim(N * L, "rows"), kRowThreads, 0, detail::stream(s)>>>(
      G, M, dtype == MomentumDtype::bf16, cols, keys, copy, L, pl);
  DIONSIM_LAUNCH_CHECK("accumulate_row_l1_copy");
}

void row_l1_bf16(const bf16_bits* X, std::int64_t rows, std::int64_t cols, float* keys, StreamHandle s) {
  require(rows >= 0 && cols > 0, "row_l1_bf16: rows >= 0, cols > 0");
  if (rows == 0) return;
  row_l1_bf16_kernel<<<grid_dim(rows, "rows"), kRowThreads, 0, detail::stream(s)>>>(X, cols, keys);
  DIONSIM_LAUNCH_CHECK("row_l1_bf16");
}

void gather_rows_bf16(const void* src, MomentumDtype dtype, const std::int32_t* index, const std::int32_t* count,
                      int segments, std::int64_t rows_per_seg, std::int64_t slots, std::int64_t cols, bf16_bits* out,
                      StreamHandle s, float ef) {
  require(segments >= 0 && slots >= 0 && cols > 0 && segments < 65536, "gather_rows_bf16: shape");
  if (segments == 0 || slots == 0) return;
  gather_rows_kernel<false><<<dim3(grid_dim(slots, "slots"), static_cast<unsigned>(segments)), kRowThreads, 0,
                              detail::stream(s)>>>(const_cast<void*>(src), dtype == MomentumDtype::bf16, index, count,
                                                   rows_per_seg, slots, cols, out, ef);
  DIONSIM_LAUNCH_CHECK("gather_rows_bf16");
}

void gather_rows_from_bf16(const bf16_bits* src, const std::int32_t* index, const std::int32_t* count, int segments,
                           std::int64_t rows_per_seg, std::int64_t slots, std::int64_t cols, bf16_bits* out,
                           StreamHandle s) {
  require(segments >= 0 && slots >= 0 && cols > 0 && segments < 65536, "gather_rows_from_bf16: shape");
  if (segments == 0 || slots == 0) return;
  gather_rows_kernel<true><<<dim3(grid_dim(slots, "slots"), static_cast<unsigned>(segments)), kRowThreads, 0,
                             detail::stream(s)>>>(src, true, index, count, rows_per_seg, slots, cols, out, 1.0F);
  DIONSIM_LAUNCH_CHECK("gather_rows_from_bf16");
}

void scatter_rows_bf16(const bf16_bits* src, const std::int32_t* index, const std::int32_t* count, int segments,
                       std::int64_t slots, std::int64_t rows_per_seg, std::int64_t cols, bf16_bits* dst,
                       StreamHandle s) {
  require(segments >= 0 && slots >= 0 && cols > 0 && segments < 65536, "scatter_rows_bf16: shape");
  if (segments == 0 || rows_per_seg == 0) return;
  zero_rows_kernel<<<grid_dim(segments * rows_per_seg, "rows"), kRowThreads, 0, detail::stream(s)>>>(dst, cols);
  DIONSIM_LAUNCH_CHECK("scatter_rows_bf16 (zero)");
  if (slots == 0) return;
  scatter_rows_kernel<<<dim3(grid_dim(slots, "slots"), static_cast<unsigned>(segments)), kRowThreads, 0,
                        detail::stream(s)>>>(src, index, count, slots, rows_per_seg, cols, dst);
  DIONSIM_LAUNCH_CHECK("scatter_rows_bf16");
}

void row_map_from_index(const std::int32_t* index, const std::int32_t* count, int N, std::int64_t L, std::int64_t k,
                        std::int32_t* u_row, StreamHandle s) {
  require(N >= 0 && N < 65536 && L >= 0 && k >= 0 && N * k < (1LL << 31), "row_map_from_index: shape");
  if (N == 0 || L == 0) return;
  memset_device(u_row, 0xff, static_cast<std::size_t>(N * L) * sizeof(std::int32_t), s);
  if (k == 0) return;
  row_map_index_kernel<<<dim3(std::min<unsigned>(detail::blocks_for(k, 256), 1024u), static_cast<unsigned>(N)), 256, 0,
                         detail::stream(s)>>>(index, count, L, k, u_row);
  DIONSIM_LAUNCH_CHECK("row_map_from_index");
}

void row_map_from_slots(const std::int32_t* slot_src, std::int64_t slots, std::int64_t rows, std::int32_t* u_row,
                        StreamHandle s) {
  require(slots >= 0 && slots < (1LL << 31) && rows >= 0, "row_map_from_slots: shape");
  if (rows == 0) return;
  memset_device(u_row, 0xff, static_cast<std::size_t>(rows) * sizeof(std::int32_t), s);
  if (slots == 0) return;
  row_map_slots_kernel<<<std::min<unsigned>(detail::blocks_for(slots, 256), 1024u), 256, 0, detail::stream(s)>>>(
      slot_src, slots, u_row);
  DIONSIM_LAUNCH_CHECK("row_map_from_slots");
}

void gather_rows_blocked(const bf16_bits* recv, const std::int32_t* index, const std::int32_t* count, int w, int pr,
                         std::int64_t pl, std::int64_t slots, std::int64_t cols, bf16_bits* out, StreamHandle s) {
  require(w > 0 && pr >= 0 && pr < 65536 && pl > 0 && slots >= 0 && cols > 0, "gather_rows_blocked: shape");
  if (pr == 0 || slots == 0) return;
  gather_blocked_kernel<<<dim3(grid_dim(slots, "slots"), static_cast<unsigned>(pr)), kRowThreads, 0, detail::stream(s)>>>(
      recv, index, count, pr, pl, w * pl, slots, cols, out);
  DIONSIM_LAUNCH_CHECK("gather_rows_blocked");
}

void scatter_rows_blocked(const bf16_bits* src, const std::int32_t* index, const std::int32_t* count, int w, int pr,
                          std::int64_t pl, std::int64_t slots, std::int64_t cols, bf16_bits* send, StreamHandle s,
                          bool zero_first) {
  require(w > 0 && pr >= 0 && pr < 65536 && pl > 0 && slots >= 0 && cols > 0, "scatter_rows_blocked: shape");
  if (zero_first) memset_device(send, 0, static_cast<std::size_t>(w) * pr * pl * cols * 2, s);
  if (pr == 0 || slots == 0) return;
  scatter_blocked_kernel<<<dim3(grid_dim(slots, "slots"), static_cast<unsigned>(pr)), kRowThreads, 0, detail::stream(s)>>>(
      src, index, count, pr, pl, w * pl, slots, cols, send);
  DIONSIM_LAUNCH_CHECK("scatter_rows_blocked");
}

void scale_rows(void* M, MomentumDtype dtype, const std::int32_t* index, const std::int32_t* count, int segments,
                std::int64_t rows_per_seg, std::int64_t cols, float ef, StreamHandle s) {
  require(segments >= 0 && cols > 0 && segments < 65536, "scale_rows: shape");
  if (segments == 0 || rows_per_seg == 0) return;
  scale_rows_kernel<<<dim3(grid_dim(rows_per_seg, "rows"), static_cast<unsigned>(segments)), kRowThreads, 0,
                      detail::stream(s)>>>(M, dtype == MomentumDtype::bf16, index, count, rows_per_seg, cols, ef);
  DIONSIM_LAUNCH_CHECK("scale_rows");
}

void pad_shards_bf16(const void* M, MomentumDtype dtype, int N, int Np, std::int64_t L, std::int64_t pl,
                     std::int64_t cols, bf16_bits* out, StreamHandle s) {
  require(N >= 0 && Np >= N && L >= 0 && L <= pl && cols > 0 && Np < 65536, "pad_shards_bf16: 0<=N<=Np, 0<=L<=pl");
  if (Np == 0 || pl == 0) return;
  pad_shards_kernel<<<dim3(grid_dim(pl, "pl"), static_cast<unsigned>(Np)), kRowThreads, 0, detail::stream(s)>>>(
      M, dtype == MomentumDtype::bf16, N, L, pl, cols, out);
  DIONSIM_LAUNCH_CHECK("pad_shards_bf16");
}

void interleave_blocks(const bf16_bits* in, int w, int pr, std::int64_t rows, std::int64_t cols, bf16_bits* out,
                       StreamHandle s) {
  require(w > 0 && pr >= 0 && rows >= 0 && cols > 0 && w < 65536 && pr < 65536, "interleave_blocks: shape");
  if (pr == 0 || rows == 0) return;
  interleave_kernel<true><<<dim3(grid_dim(rows, "rows"), static_cast<unsigned>(pr), static_cast<unsigned>(w)), 128, 0,
                            detail::stream(s)>>>(in, w, pr, rows, cols, out);
  DIONSIM_LAUNCH_CHECK("interleave_blocks");
}
void deinterleave_blocks(const bf16_bits* in, int w, int pr, std::int64_t rows, std::int64_t cols, bf16_bits* out,
                         StreamHandle s) {
  require(w > 0 && pr >= 0 && rows >= 0 && cols > 0 && w < 65536 && pr < 65536, "deinterleave_blocks: shape");
  if (pr == 0 || rows == 0) return;
  interleave_kernel<false><<<dim3(grid_dim(rows, "rows"), static_cast<unsigned>(pr), static_cast<unsigned>(w)), 128,
                             0, detail::stream(s)>>>(in, w, pr, rows, cols, out);
  DIONSIM_LAUNCH_CHECK("deinterleave_blocks");
}

void pad_norms(const float* norms, int N, std::int64_t L, std::int64_t pl, float* out, StreamHandle s) {
  require(N >= 0 && L >= 0 && L <= pl && N < 65536, "pad_norms: L <= pl (FSDP2 contiguous chunks, spec §4.3)");
  if (N == 0 || pl == 0) return;
  pad_norms_kernel<<<dim3(detail::blocks_for(pl, 256), static_cast<unsigned>(N)), 256, 0, detail::stream(s)>>>(
      norms, L, pl, out);
  DIONSIM_LAUNCH_CHECK("pad_norms");
}
void gather_to_matrix_major(const float* gathered, int w, int N, std::int64_t pl, float* keys, StreamHandle s) {
  require(w > 0 && N >= 0 && pl >= 0, "gather_to_matrix_major: shape");
  const long long total = static_cast<long long>(w) * N * pl;
  if (total == 0) return;
  gather_to_matrix_major_kernel<<<std::min<unsigned>(detail::blocks_for(total, 256), 4096), 256, 0,
                                  detail::stream(s)>>>(gathered, w, N, pl, keys);
  DIONSIM_LAUNCH_CHECK("gather_to_matrix_major");
}

void fill_random(float* out, std::int64_t n, std::uint64_t seed, float scale, StreamHandle s) {
  require(n >= 0, "fill_random: n >= 0");
  if (n == 0) return;
  fill_random_kernel<<<std::min(detail::blocks_for(n, 256), 8192u), 256, 0, detail::stream(s)>>>(out, n, seed, scale);
  DIONSIM_LAUNCH_CHECK("fill_random");
}

}  // namespace dionsim::kernels
