// Column selection (Dion2 on the unsharded paths when R > C, spec §1.4 / §3.4): momentum
// accumulate with per-column L1 keys, the transposed gather of the selected columns with their EF
// decay, and the column post. The selected columns are gathered as the rows of a wide [k][R]
// matrix: Newton-Schulz of the tall [R][k] submatrix is computed on its transpose anyway (§2.6.1),
// so the NS runs on the wide form directly and the post reads it transposed back.
#include <algorithm>
#include <stdexcept>

#include "kernels/check.cuh"
#include "kernels/common.cuh"
#include "kernels/ops.hpp"

namespace dionsim::kernels {
namespace {

using detail::bf16_to_float;
using detail::float_to_bf16;

void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(std::string(what) + ": bad shape");
}

constexpr int kColThreads = 256;
constexpr int kRowsPerChunk = 256;  // partial sums per column per chunk of rows (then summed in chunk order)

// M += G over [N][R][C]; partial[m][chunk][c] = sum over the chunk's rows of |M|, in row order.
// A thread per (matrix, chunk, column): warps read 32 consecutive columns of one row (coalesced).
__global__ void accumulate_col_partial_kernel(const float* __restrict__ G, void* M, bool bf16, long long R,
                                              long long C, int chunks, float* __restrict__ partial) {
  const long long c = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const int chunk = static_cast<int>(blockIdx.y);
  const long long m = blockIdx.z;
  if (c >= C) return;
  const long long r0 = static_cast<long long>(chunk) * kRowsPerChunk, r1 = min(R, r0 + kRowsPerChunk);
  float acc = 0.0F;
  const long long base = m * R * C;
  constexpr int kUnroll = 8;  // loads issued together (latency-bound otherwise)
  long long r = r0;
  for (; r + kUnroll <= r1; r += kUnroll) {
    float g[kUnroll], v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const long long i = base + (r + u) * C + c;
      g[u] = G[i];
      v[u] = detail::load_m(M, bf16, i);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const long long i = base + (r + u) * C + c;
      // bf16 momentum: M = bf16(M + bf16(G)) (§2.10.1), as the row kernel does.
      const float nv = bf16 ? detail::round_to_bf16(v[u] + detail::round_to_bf16(g[u])) : v[u] + g[u];
      detail::store_m(M, bf16, i, nv);
      acc += fabsf(nv);
    }
  }
  for (; r < r1; ++r) {
    const long long i = base + r * C + c;
    const float g = G[i];
    const float v = detail::load_m(M, bf16, i);
    const float nv = bf16 ? detail::round_to_bf16(v + detail::round_to_bf16(g)) : v + g;
    detail::store_m(M, bf16, i, nv);
    acc += fabsf(nv);
  }
  partial[(m * chunks + chunk) * C + c] = acc;
}

__global__ void col_keys_finalize_kernel(const float* __restrict__ partial, int N, int chunks, long long C, bool bf16,
                                         float* __restrict__ keys) {
  const long long q = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (q >= N * C) return;
  const long long m = q / C, c = q % C;
  float acc = 0.0F;
  for (int k = 0; k < chunks; ++k) acc += partial[(m * chunks + k) * C + c];
  keys[q] = bf16 ? detail::round_to_bf16(acc) : acc;
}

// Tiles of 32 selected columns x 64 rows, 32 x 8 threads (8 rows each, loads issued together).
// out[m][t][r] = bf16(M[m][r][index[m][t]]) (pre-decay), then M *= ef there; slots t >= count[m]
// are zero rows of out. (32 x 32 tiles, 4 rows per thread: 3.69 ms for the gpt-5120x8 world-1 gathers.)
constexpr int kT = 32, kTy = 8, kTr = 64;
__global__ void gather_cols_kernel(void* M, bool bf16, const std::int32_t* __restrict__ index,
                                   const std::int32_t* __restrict__ count, long long R, long long C, long long k,
                                   float ef, std::uint16_t* __restrict__ out) {
  __shared__ std::uint16_t tile[kTr][kT + 2];  // [row][slot]
  const long long m = blockIdx.z;
  const long long t0 = static_cast<long long>(blockIdx.x) * kT, r0 = static_cast<long long>(blockIdx.y) * kTr;
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const long long cnt = count[m];
  const long long t = t0 + tx;
  const long long col = t < cnt ? index[m * C + t] : -1;
  constexpr int kPer = kTr / kTy;
  float v[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const long long r = r0 + ty + j * kTy;
    v[j] = r < R && col >= 0 ? detail::load_m(M, bf16, (m * R + r) * C + col) : 0.0F;
  }
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int rl = ty + j * kTy;
    const long long r = r0 + rl;
    tile[rl][tx] = float_to_bf16(v[j]);
    if (ef != 1.0F && r < R && col >= 0)  // fp32 product, one rounding (§2.10.5)
      detail::store_m(M, bf16, (m * R + r) * C + col, v[j] * ef);
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kT / kTy; ++j) {
    const int tl = ty + j * kTy;
    const long long tt = t0 + tl;
    if (tt >= k) continue;
#pragma unroll
    for (int h = 0; h < kTr / 32; ++h) {
      const long long r = r0 + tx + 32 * h;
      if (r < R) out[(m * k + tt) * R + r] = tile[tx + 32 * h][tl];
    }
  }
}

// Tiles of 64 rows x 32 columns (8 rows per thread, loads issued together): W *= decay everywhere; a selected column c (u_col[m*C + c] = j >= 0)
// also gets W[r][c] += -adjusted_lr * U[j][r] (U [N*k][R], the wide NS output), rounded as the
// reference's indexed post (§2.7; bf16 parameters: every write rounded).
__global__ void post_cols_kernel(float* __restrict__ W, const std::uint16_t* __restrict__ U,
                                 const std::int32_t* __restrict__ u_col, long long R, long long C, float decay,
                                 float neg_adj_lr, bool param_bf16) {
  __shared__ float upd[kT][kTr + 1];  // [column][row]
  __shared__ std::int32_t js[kT];
  const long long m = blockIdx.z;
  const long long c0 = static_cast<long long>(blockIdx.x) * kT, r0 = static_cast<long long>(blockIdx.y) * kTr;
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  if (ty == 0) js[tx] = c0 + tx < C ? u_col[m * C + c0 + tx] : -1;
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kT / kTy; ++j) {  // U rows are read along r (coalesced)
    const int cl = ty + j * kTy;
    const std::int32_t ju = js[cl];
#pragma unroll
    for (int h = 0; h < kTr / 32; ++h) {
      const long long r = r0 + tx + 32 * h;
      upd[cl][tx + 32 * h] = ju >= 0 && r < R ? bf16_to_float(U[static_cast<long long>(ju) * R + r]) : 0.0F;
    }
  }
  const long long c = c0 + tx;
  constexpr int kPer = kTr / kTy;
  float wv[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const long long r = r0 + ty + j * kTy;
    wv[j] = c < C && r < R ? W[(m * R + r) * C + c] : 0.0F;
  }
  __syncthreads();
  if (c >= C) return;
  const bool applied = js[tx] >= 0;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int rl = ty + j * kTy;
    const long long r = r0 + rl;
    if (r >= R) continue;
    float x = __fmul_rn(wv[j], decay);  // no FMA contraction: the reference rounds twice
    if (param_bf16) x = detail::round_to_bf16(x);
    if (applied) {
      float u = __fmul_rn(neg_adj_lr, upd[tx][rl]);
      if (param_bf16) u = detail::round_to_bf16(u);
      x = __fadd_rn(x, u);
      if (param_bf16) x = detail::round_to_bf16(x);
    }
    W[(m * R + r) * C + c] = x;
  }
}

}  // namespace

ColKeysScratch::ColKeysScratch(int N, std::int64_t rows, std::int64_t cols)
    : chunks_(static_cast<int>(std::max<std::int64_t>(1, (rows + kRowsPerChunk - 1) / kRowsPerChunk))),
      partial_(static_cast<std::size_t>(N) * static_cast<std::size_t>(chunks_) * static_cast<std::size_t>(cols),
               "column key partials") {}

void accumulate_col_l1(const float* G, void* M, MomentumDtype dtype, int N, std::int64_t rows, std::int64_t cols,
                       float* keys, ColKeysScratch& scratch, StreamHandle s) {
  require(N >= 0 && N < 65536 && rows >= 0 && cols >= 0, "accumulate_col_l1");
  if (N == 0 || rows == 0 || cols == 0) return;
  const int chunks = static_cast<int>((rows + kRowsPerChunk - 1) / kRowsPerChunk);
  if (chunks > scratch.chunks() || scratch.size() < static_cast<std::size_t>(N) * chunks * cols)
    throw std::invalid_argument("accumulate_col_l1: scratch sized for another shape");
  const bool bf16 = dtype == MomentumDtype::bf16;
  const dim3 grid(static_cast<unsigned>((cols + kColThreads - 1) / kColThreads), static_cast<unsigned>(chunks),
                  static_cast<unsigned>(N));
  accumulate_col_partial_kernel<<<grid, kColThreads, 0, detail::stream(s)>>>(G, M, bf16, rows, cols, chunks,
                                                                            scratch.data());
  DIONSIM_LAUNCH_CHECK("accumulate_col_l1 (partials)");
  col_keys_finalize_kernel<<<detail::blocks_for(N * cols, 256), 256, 0, detail::stream(s)>>>(scratch.data(), N, chunks,
                                                                                            cols, bf16, keys);
  DIONSIM_LAUNCH_CHECK("accumulate_col_l1 (keys)");
}

void gather_cols_bf16(void* M, MomentumDtype dtype, const std::int32_t* index, const std::int32_t* count, int N,
                      std::int64_t rows, std::int64_t cols, std::int64_t k, bf16_bits* out, StreamHandle s, float ef) {
  require(N >= 0 && N < 65536 && rows >= 0 && cols >= 0 && k >= 0 && k <= cols && rows < (1LL << 31) / kT,
          "gather_cols_bf16");
  if (N == 0 || rows == 0 || k == 0) return;
  const dim3 grid(static_cast<unsigned>((k + kT - 1) / kT), static_cast<unsigned>((rows + kTr - 1) / kTr),
                  static_cast<unsigned>(N));
  gather_cols_kernel<<<grid, dim3(kT, kTy), 0, detail::stream(s)>>>(M, dtype == MomentumDtype::bf16, index, count, rows,
                                                                    cols, k, ef, out);
  DIONSIM_LAUNCH_CHECK("gather_cols_bf16");
}

void post_cols(float* W, const bf16_bits* U, const std::int32_t* u_col, int N, std::int64_t rows, std::int64_t cols,
               const PostParams& p, StreamHandle s) {
  require(N >= 0 && N < 65536 && rows >= 0 && cols >= 0 && rows < (1LL << 31) / kT, "post_cols");
  if (N == 0 || rows == 0 || cols == 0) return;
  const float decay = 1.0F - p.lr * p.weight_decay;  // fp32, as the reference's 0-dim tensors
  const dim3 grid(static_cast<unsigned>((cols + kT - 1) / kT), static_cast<unsigned>((rows + kTr - 1) / kTr),
                  static_cast<unsigned>(N));
  post_cols_kernel<<<grid, dim3(kT, kTy), 0, detail::stream(s)>>>(W, U, u_col, rows, cols, decay, -p.adjusted_lr,
                                                                  p.param_bf16);
  DIONSIM_LAUNCH_CHECK("post_cols");
}

}  // namespace dionsim::kernels
