#pragma once
// Gradient row statistics (what `dionsim step --db` records, `dionsim deferral --norms replay:DB`
// replays) and the replay model built from them.
//
// Recorded, per step, per shape group (matrices of equal shape) and per rank's FSDP2 row shard
// (rank r holds global rows [r*ceil(R/W), min(R, (r+1)*ceil(R/W))) of every matrix): the number of
// rows, their mean L1 norm, and quantiles of (row L1 norm / that mean) at probabilities i/32.
// Together: the within-shard spread of row scales (heterogeneity, heavy tails) and, from the
// ratios of the shards' means, the skew between shards.
//
// Replayed: a row's scale is s_i = f(shard of i) * Q_shard(u_i), u_i uniform drawn once per row
// and trial (so a row is persistently hot or cold, as recorded rows largely are through momentum),
// f = the shard's mean relative to the group's, Q = the shard's quantile function averaged over
// the recorded steps, with the spread that Gaussian rows of C columns add by themselves taken out
// (second-moment matching), so that s_i * N(0, I_C) rows show the recorded L1 statistics again.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "optimizer/reference_step.hpp"

namespace dionsim::opt {

inline constexpr int kRowQuantiles = 33;  // probabilities i / 32, i = 0..32

struct RowNormStats {
  std::int64_t step = 0;
  std::int64_t rows = 0, cols = 0;  // the shape group
  std::int64_t world = 1;           // shards the rows were cut into
  std::int64_t rank = 0;
  std::int64_t row_count = 0;     // rows of this shard over the group's matrices (>= 1)
  double mean_l1 = 0.0;           // their mean L1 norm
  std::vector<double> quantiles;  // of (row L1 / mean_l1), at probabilities i/(n-1)
};

// Statistics of `grads` ([step][param], full row-major matrices of params' shapes) cut into
// `world` FSDP2 row shards; ranks whose shard is empty get no entry. Groups in first-occurrence order.
[[nodiscard]] std::vector<RowNormStats> gradient_row_stats(std::span<const ParamSpec> params,
                                                           const std::vector<std::vector<std::vector<float>>>& grads,
                                                           std::int64_t world);

// Linear interpolation of a quantile vector (probabilities i/(n-1)) at u in [0, 1].
[[nodiscard]] double quantile_at(std::span<const double> quantiles, double u);

// One recorded shape group, pooled over steps.
struct ReplayGroup {
  std::int64_t rows = 0, cols = 0, world = 1;
  std::vector<double> shard_factor;                  // [rank] shard mean / group mean (1 where empty)
  std::vector<std::vector<double>> shard_quantiles;  // [rank] row scale quantiles (mean ~1), empty where empty
};

struct ReplayStats {
  std::string source;               // e.g. "results.db run 3", for messages
  std::vector<ReplayGroup> groups;  // recorded shape groups
  // Row scale of global row `row` of an S x C matrix: the recorded group of that shape, else the
  // recorded group with the most rows (row positions mapped proportionally onto its shards).
  [[nodiscard]] double row_scale(std::int64_t row, std::int64_t S, std::int64_t C, double u) const;
};

// Pools the recorded steps into the replay model (see the top of this file). Throws InputError
// naming `where` when the statistics are empty or inconsistent.
[[nodiscard]] ReplayStats make_replay(std::span<const RowNormStats> stats, const std::string& where);

}  // namespace dionsim::opt
