// Masked post (§2.5, §2.7) and NorDion2's per-row normalization (§2.8). One block per row: the
// applied test ("U row has a nonzero") is a row reduction that must finish before the row's W and
// M are written. With a row map the U rows are read where they were received (row -1 = none).
#include <cmath>
#include <stdexcept>

#include "kernels/check.cuh"
#include "kernels/common.cuh"
#include "kernels/ops.hpp"

namespace dionsim::kernels {
namespace {

constexpr int kThreads = 256;

__device__ inline void post_one(float& w, float& m, bool applied, float uj, float scale, bool has_scale, float decay,
                                float neg_adj_lr, float ef, bool round_update, bool param_bf16) {
  w = __fmul_rn(w, decay);  // no FMA contraction: the reference rounds twice
  if (param_bf16) w = detail::round_to_bf16(w);
  if (!applied) return;
  float upd;
  if (has_scale) upd = __fmul_rn(neg_adj_lr, __fmul_rn(uj, scale));
  else upd = round_update ? detail::round_to_bf16(uj * neg_adj_lr) : uj * neg_adj_lr;
  if (param_bf16) upd = detail::round_to_bf16(upd);
  w = __fadd_rn(w, upd);
  if (param_bf16) w = detail::round_to_bf16(w);
  m = m * ef;
}

// Row (m, r)'s update row: U[m][r] ([N][u_rows][C]), or U row u_row[m*L + r] (nullptr for -1).
__device__ inline const std::uint16_t* update_row(const std::uint16_t* U, const std::int32_t* u_row, long long m,
                                                  long long r, long long L, long long u_rows, long long cols) {
  if (u_row == nullptr) return U + (m * u_rows + r) * cols;
  const std::int32_t i = u_row[m * L + r];
  return i < 0 ? nullptr : U + static_cast<long long>(i) * cols;
}

__global__ void masked_post_kernel(float* W, void* M, bool m_bf16, const std::uint16_t* U, const std::int32_t* u_row,
                                   const float* row_scale, long long L, long long u_rows, long long cols, float decay,
                                   float neg_adj_lr, float ef, bool round_update, bool param_bf16) {
  const long long m = blockIdx.y, r = blockIdx.x;
  const long long wrow = (m * L + r) * cols;
  const std::uint16_t* u = update_row(U, u_row, m, r, L, u_rows, cols);
  const bool vec = cols % 4 == 0;  // rows then start 8-byte aligned for U and 16-byte for W (cudaMalloc bases)
  int nonzero = 0;  // stays 0 without an update row: not applied
  if (u != nullptr && vec) {
    const uint2* u4 = reinterpret_cast<const uint2*>(u);
    for (long long q = threadIdx.x; q < cols / 4; q += blockDim.x) {
      const uint2 v = u4[q];
      nonzero |= ((v.x & 0x7fff7fffu) | (v.y & 0x7fff7fffu)) != 0;  // +-0 are zero
    }
  } else if (u != nullptr) {
    for (long long j = threadIdx.x; j < cols; j += blockDim.x) nonzero |= (u[j] & 0x7fffu) != 0;
  }
  const bool applied = __syncthreads_or(nonzero) != 0;
  const float scale = row_scale != nullptr ? row_scale[m * L + r] : 1.0F;
  const bool has_scale = row_scale != nullptr;
  if (vec) {
    float4* w4 = reinterpret_cast<float4*>(W + wrow);
    const uint2* u4 = reinterpret_cast<const uint2*>(u);
    for (long long q = threadIdx.x; q < cols / 4; q += blockDim.x) {
      float4 w = w4[q];
      float uj[4] = {0, 0, 0, 0}, mm[4] = {0, 0, 0, 0};
      if (applied) {
        const uint2 v = u4[q];
        uj[0] = __uint_as_float(v.x << 16);
        uj[1] = __uint_as_float(v.x & 0xffff0000u);
        uj[2] = __uint_as_float(v.y << 16);
        uj[3] = __uint_as_float(v.y & 0xffff0000u);
        if (ef != 1.0F)  // ef = 1 (the indexed posts: EF was applied before NS) leaves M as it is
          for (int k = 0; k < 4; ++k) mm[k] = detail::load_m(M, m_bf16, wrow + 4 * q + k);
      }
      float ww[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int k = 0; k < 4; ++k)
        post_one(ww[k], mm[k], applied, uj[k], scale, has_scale, decay, neg_adj_lr, ef, round_update, param_bf16);
      w4[q] = make_float4(ww[0], ww[1], ww[2], ww[3]);
      if (applied && ef != 1.0F)
        for (int k = 0; k < 4; ++k) detail::store_m(M, m_bf16, wrow + 4 * q + k, mm[k]);
    }
    return;
  }
  for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
    float w = W[wrow + j], mm = applied && ef != 1.0F ? detail::load_m(M, m_bf16, wrow + j) : 0.0F;
    const float uj = applied ? detail::bf16_to_float(u[j]) : 0.0F;
    post_one(w, mm, applied, uj, scale, has_scale, decay, neg_adj_lr, ef, round_update, param_bf16);
    W[wrow + j] = w;
    if (applied && ef != 1.0F) detail::store_m(M, m_bf16, wrow + j, mm);
  }
}

// row_scale[i] = sum_j U_ij^2 for applied rows, -1 for rows that are all zero.
__global__ void row_sumsq_kernel(const std::uint16_t* U, const std::int32_t* u_row, long long L, long long u_rows,
                                 long long cols, float* row_scale) {
  const long long m = blockIdx.y, r = blockIdx.x;
  const std::uint16_t* u = update_row(U, u_row, m, r, L, u_rows, cols);
  if (u == nullptr) {
    if (threadIdx.x == 0) row_scale[m * L + r] = -1.0F;
    return;
  }
  float acc = 0.0F;
  int nonzero = 0;
  for (long long j = threadIdx.x; j < cols; j += blockDim.x) {
    const float x = detail::bf16_to_float(u[j]);
    acc += x * x;
    nonzero |= (u[j] & 0x7fffu) != 0;
  }
  acc = detail::block_sum(acc);
  const bool applied = __syncthreads_or(nonzero) != 0;
  if (threadIdx.x == 0) row_scale[m * L + r] = applied ? acc : -1.0F;
}

// One block per matrix: F0, V lerp on applied rows, per-row scale (§2.8).
__global__ void nordion2_scale_kernel(long long L, long long cols, float* V, float one_minus_beta2, float* row_scale,
                                      bool v_bf16) {
  const long long m = blockIdx.x;
  float* rs = row_scale + m * L;
  float* v = V + m * L;
  float f0sq = 0.0F, ohatsq = 0.0F;
  for (long long r = threadIdx.x; r < L; r += blockDim.x) {
    const float ss = rs[r];
    if (ss < 0.0F) continue;
    const float nu = ss / static_cast<float>(cols);
    const float vn = __fadd_rn(v[r], __fmul_rn(one_minus_beta2, nu - v[r]));  // torch.lerp
    v[r] = v_bf16 ? detail::round_to_bf16(vn) : vn;
    const float inv = 1.0F / (sqrtf(vn) + 1e-8F);
    f0sq += ss;
    ohatsq += ss * inv * inv;
  }
  f0sq = detail::block_sum(f0sq);
  ohatsq = detail::block_sum(ohatsq);
  const float g = sqrtf(f0sq) / fmaxf(sqrtf(ohatsq), 1e-8F);
  for (long long r = threadIdx.x; r < L; r += blockDim.x) {
    const float ss = rs[r];
    // fp32 V: v[r] is the lerp result itself. bf16 V: the reference divides by the unrounded value;
    // using the stored (rounded) one differs by <= 2^-9 relative in that row's scale.
    rs[r] = ss < 0.0F ? 0.0F : g / (sqrtf(v[r]) + 1e-8F);
  }
}

float momentum_ef(float ef, bool bf16) { return bf16 ? round_bf16(ef) : ef; }

}  // namespace

void masked_post(float* W, void* M, MomentumDtype dtype, const bf16_bits* U, const float* row_scale, int N,
                 std::int64_t L, std::int64_t u_rows, std::int64_t cols, const PostParams& p, StreamHandle s,
                 const std::int32_t* u_row) {
  if (N < 0 || N >= 65536 || L < 0 || u_rows < L || cols <= 0)
    throw std::invalid_argument("masked_post: need 0 <= N < 65536, 0 <= L <= u_rows, cols > 0");
  if (N == 0 || L == 0) return;
  const bool bf16 = dtype == MomentumDtype::bf16;
  const float decay = 1.0F - p.lr * p.weight_decay;  // fp32, as the CPU reference step forms it
  masked_post_kernel<<<dim3(static_cast<unsigned>(L), static_cast<unsigned>(N)), kThreads, 0, detail::stream(s)>>>(
      W, M, bf16, U, u_row, row_scale, L, u_rows, cols, decay, -p.adjusted_lr, momentum_ef(p.ef, bf16),
      p.round_update_bf16, p.param_bf16);
  DIONSIM_LAUNCH_CHECK("masked_post");
}

void nordion2_row_scale(const bf16_bits* U, int N, std::int64_t L, std::int64_t u_rows, std::int64_t cols, float* V,
                        float muon_beta2, float* row_scale, StreamHandle s, bool v_bf16, const std::int32_t* u_row) {
  if (N < 0 || N >= 65536 || L < 0 || u_rows < L || cols <= 0)
    throw std::invalid_argument("nordion2_row_scale: need 0 <= N < 65536, 0 <= L <= u_rows, cols > 0");
  if (N == 0 || L == 0) return;
  row_sumsq_kernel<<<dim3(static_cast<unsigned>(L), static_cast<unsigned>(N)), kThreads, 0, detail::stream(s)>>>(
      U, u_row, L, u_rows, cols, row_scale);
  DIONSIM_LAUNCH_CHECK("nordion2_row_scale (row sums)");
  nordion2_scale_kernel<<<static_cast<unsigned>(N), 1024, 0, detail::stream(s)>>>(L, cols, V, 1.0F - muon_beta2,
                                                                                   row_scale, v_bf16);
  DIONSIM_LAUNCH_CHECK("nordion2_row_scale");
}

}  // namespace dionsim::kernels
