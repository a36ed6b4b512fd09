#pragma once
// Plain CPU references for every kernel in kernels/ops.hpp, with the same contracts and the same
// rounding points (the GPU tests compare against these). Straightforward loops, no tricks.
#include <cstdint>
#include <vector>

#include "optimizer/bf16.hpp"
#include "kernels/ops.hpp"

namespace dionsim::kernels::ref {

// Momentum as fp32 values; for bf16 momentum every element is kept bf16-representable.
void accumulate_row_l1(const std::vector<float>& G, std::vector<float>& M, MomentumDtype dtype, std::int64_t rows,
                       std::int64_t cols, std::vector<float>& keys);
std::vector<float> row_l1_bf16(const std::vector<bf16_bits>& X, std::int64_t rows, std::int64_t cols);
// Stable descending sort of positions, first min(count, len) selected; kth = key of the last one.
void stable_topk_mask(const std::vector<float>& keys, int segments, std::int64_t len, std::int64_t count,
                      std::vector<std::uint8_t>& mask, std::vector<float>& kth);

struct CappedPackResult {
  std::vector<bf16_bits> send;       // [w][1+B][C]
  std::vector<std::int32_t> slot_src;  // [w][B]
  long long winners = 0, deferred = 0;
};
CappedPackResult capped_pack(const CappedShape& sh, const std::vector<float>& M, MomentumDtype dtype,
                             const std::vector<float>& norms, const std::vector<std::uint8_t>& winners,
                             const std::vector<float>& thresh);
// Owner side from the received chunks [w][1+B][C]: NS buffer [pr][kw][C] and route [w][B].
void capped_assemble(const CappedShape& sh, const std::vector<bf16_bits>& recv, std::vector<bf16_bits>& buf,
                     std::vector<std::int32_t>& route);

void masked_post(std::vector<float>& W, std::vector<float>& M, MomentumDtype dtype, const std::vector<bf16_bits>& U,
                 const std::vector<float>* row_scale, int N, std::int64_t L, std::int64_t u_rows, std::int64_t cols,
                 const PostParams& p);
void nordion2_row_scale(const std::vector<bf16_bits>& U, int N, std::int64_t L, std::int64_t u_rows,
                        std::int64_t cols, std::vector<float>& V, float muon_beta2, std::vector<float>& row_scale);

// Newton-Schulz with the same rounding sequence; GEMMs accumulate in double then round to bf16.
void newton_schulz(std::vector<bf16_bits>& X, int batch, std::int64_t rows, std::int64_t cols, NsKind kind,
                   float eps = 1e-8F);

}  // namespace dionsim::kernels::ref
