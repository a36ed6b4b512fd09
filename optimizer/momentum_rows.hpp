#pragma once
// Momentum rows under Dion2/NorDion2's accumulation and error feedback alone (spec §2.1, §2.2,
// §2.5): M += G every step, ranking keys from M, M *= ef for the rows a step applies. Newton-Schulz
// and the weights never feed back into M, so this is all that decides which rows a scope selects
// over many steps. Shared by the deferral study (optimizer/deferral.hpp) and the selection-quality
// study (optimizer/selection_quality.hpp), which evolve the same gradient streams
// (optimizer/deferral_stream.hpp) the same way.
//
// Two representations of N matrices of S x C:
//   exact   — full rows in the momentum dtype, the CPU reference step's arithmetic (accumulate,
//             row_l1, masked_post): bit-identical keys;
//   reduced — one number per row, E = |M_i|_2^2, advanced exactly in distribution for Gaussian
//             rows G_i = s_i N(0, I_C); ranks by sqrt(E) (the L2 norm) where the optimizer ranks by
//             L1 — the one approximation. O(1) per row and step instead of O(C).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/resources.hpp"
#include "optimizer/capped.hpp"
#include "optimizer/deferral_stream.hpp"
#include "optimizer/plan.hpp"

namespace dionsim::opt {

// Static partition of [0, n) over `threads` workers; fn(begin, end, worker). Deterministic: the
// partition does not influence results (every caller merges integer counts or writes disjoint data).
template <class Fn>
void parallel_chunks(std::int64_t n, int threads, Fn&& fn) {
  const std::int64_t t = std::max<std::int64_t>(1, std::min<std::int64_t>(threads, n));
  if (t == 1) {
    fn(std::int64_t{0}, n, 0);
    return;
  }
  // run_threads: an exception in a worker (bad_alloc) reaches the caller instead of terminating.
  run_threads(static_cast<int>(t), [&](int i) { fn(n * i / t, n * (i + 1) / t, i); });
}

// Fills one matrix's full gradient [S * C] (row-major, global rows) for a step.
using GradientFill = std::function<void(std::int64_t step, std::int64_t matrix, std::span<float> rows)>;

class MomentumRows {
 public:
  virtual ~MomentumRows() = default;
  // Adds step `step`'s gradients to every row and writes the keys [N][S] that local and
  // global_capped rank on: the row L1 norms in the momentum dtype (§2.2; reduced: L2).
  virtual void accumulate(std::int64_t step, std::span<float> keys, int threads) = 0;
  // The keys [N][S] that global ranks on, of the current momentum (§2.2): L1 of the row's bf16
  // copy, rounded to bf16 (global_row_key). Reduced: bf16 of the L1 a Gaussian row of that L2
  // norm has, sqrt(2C/pi) * L2 (the bf16 rounding of the copy's elements is not modelled).
  virtual void global_keys(std::span<float> keys, int threads) const = 0;
  // EF decay of a row the step applies; false when the row is all zero (then the reference's
  // masked post sees a zero update and does not count it as applied: §2.5).
  virtual bool decay(std::int64_t m, std::int64_t row) = 0;
};

[[nodiscard]] std::unique_ptr<MomentumRows> exact_rows(std::int64_t N, std::int64_t S, std::int64_t C, double ef,
                                                       Dtype dtype, GradientFill grad);
// keys[m]: the stream key of matrix m; scales[m * S + i]: row i's gradient scale s_i.
[[nodiscard]] std::unique_ptr<MomentumRows> reduced_rows(std::int64_t N, std::int64_t S, std::int64_t C, double ef,
                                                         Dtype dtype, std::vector<std::uint64_t> keys,
                                                         std::vector<float> scales);

// The gradient stream of `matrices` (indices in shape group `group` of S x C matrices, sharded over
// `world` ranks) for one trial: the counter-based keys and row scales that `deferral` uses, so a
// subset of a group's matrices sees exactly the gradients the whole group would.
struct StreamRows {
  std::vector<std::uint64_t> keys;  // [n]
  std::vector<float> scales;        // [n][S]
};
[[nodiscard]] StreamRows stream_rows(const NormStream& stream, std::uint64_t seed, std::int64_t trial,
                                     std::int64_t group, std::span<const std::int64_t> matrices, std::int64_t S,
                                     std::int64_t C, std::int64_t world);
// Gaussian rows s_i * N(0, I_C) of the stream (matrix index m = position in `rows.keys`).
[[nodiscard]] GradientFill stream_gradients(const StreamRows& rows, std::int64_t S, std::int64_t C);
// exact_rows(stream_gradients(...)) or reduced_rows(...) of the stream's rows.
[[nodiscard]] std::unique_ptr<MomentumRows> stream_momentum(StreamRows rows, std::int64_t S, std::int64_t C, double ef,
                                                            Dtype dtype, bool exact);

// global_capped's winners of N matrices from their keys [N][S] (global rows): the all-gather
// layout [w][N][pl] (pad_norms' -1 for short shards), then select_capped_winners, matrix ranges
// on separate threads (the result does not depend on the split).
[[nodiscard]] CappedWinners select_winners(const std::vector<float>& keys, std::int64_t w, std::int64_t N,
                                           std::int64_t S, std::int64_t pl, std::int64_t k_tot, int threads);

struct StepCounts {
  std::int64_t winner_rows = 0;
  std::int64_t deferred_rows = 0;
};
// Every rank's pooled pack (pack_capped_into) of N matrices whose winners are `winners`: kept
// [N][S] (global rows) = 1 for winners sent this step; counts[r] = rank r's CAPPED_STATS (ranks
// with no rows keep {0, 0}). N is the number of matrices held, pr the group's per-owner count:
// destination d pools matrices [d*pr, (d+1)*pr) of the ones held.
void pack_all_ranks(const std::vector<float>& keys, const CappedWinners& winners, std::int64_t S, std::int64_t pr,
                    std::int64_t B, std::span<std::uint8_t> kept, std::span<StepCounts> counts, int threads);

}  // namespace dionsim::opt
