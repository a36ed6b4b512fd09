#pragma once
// Selection quality (issue 19 item 6): what a selection scope buys. For each shape group of a plan,
// the share of every matrix's exact top-k_tot rows — ranked by the fp32 L1 norm of the accumulated
// momentum, ties to the lower global row — that the step applies, per step and over N steps of
// Dion2/NorDion2 momentum + error-feedback dynamics, and the fraction of rows applied.
//
// The applied rows come from the optimizer's own selection code at the plan's world size, per the
// group's path (spec §1.6, §2.2–2.5):
//   local          top_k_rows of each rank's shard, k_r = min(k, L_r), keys in the momentum dtype
//                  (can apply more than k_tot rows: sum_r min(k, L_r));
//   global         top_k_rows(k_tot) of the bf16 keys (global_row_key): ties at the boundary go to
//                  the lower row, so global may score below 1 — measured here, not assumed;
//                  also global_capped groups that §4.1 routes to global;
//   capped_packed  select_capped_winners + the pooled pack (pack_capped_into): winners are the
//                  exact top-k_tot, deferred winners are not applied this step;
//   single / ddp   top_k_rows(k) of the whole matrix (row selection only).
// "Applied" = selected (kept) and nonzero, the reference's masked post; only those rows decay
// (M *= ef), so each scope evolves its own momentum and the truth is recomputed from it every step.
//
// Momentum rows (optimizer/momentum_rows.hpp) are those of the deferral study, with its gradient
// streams (`--norms`: iid, lognormal, skew, replay): exact = full rows (bit-identical to the CPU
// reference step's keys), reduced = one number per row (ranks by L2; global's bf16 key from the
// L1 of a Gaussian row of that L2 norm). Matrices are independent (global_capped: pools of the pr
// matrices of one destination), so a sample of whole pools per group measures the group exactly
// (in the chosen representation); the result says how many were sampled.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "optimizer/deferral_stream.hpp"
#include "optimizer/inventory.hpp"
#include "optimizer/momentum_rows.hpp"
#include "optimizer/plan.hpp"

namespace dionsim::opt {

enum class RowsMode { exact, reduced, automatic };
[[nodiscard]] RowsMode parse_rows_mode(std::string_view text, std::string_view flag);  // exact|reduced|auto
[[nodiscard]] std::string_view to_string(RowsMode m);

struct SelectionQualityConfig {
  PlanConfig plan;            // world, scope, fraction, capacity_factor (nullopt = auto), optimizer, sharded
  Inventory inventory;
  NormStream stream;          // as `deferral --norms` (replay: the caller loads stream.replay)
  std::string stream_flag = "--norms";  // the option that gave `stream`, for messages
  double ef = 0.95;           // Dion2 ef_decay / NorDion2 mu, in [0, 1]
  std::int64_t steps = 20;    // >= 1
  std::uint64_t seed = 0;     // gradient streams = deferral's trial 0 of this seed
  RowsMode mode = RowsMode::automatic;
  // Per group, whole pools (of pr matrices) are sampled, evenly spread over the group, until the
  // sample holds at least this many rows (at least one pool; all when the group is smaller).
  std::int64_t max_sampled_rows = std::int64_t{1} << 15;
  // automatic: exact when every group's sample holds at most this many momentum elements.
  std::int64_t exact_max_elements = std::int64_t{1} << 20;
  int threads = 1;            // results do not depend on it
};
// Throws UsageError naming the flag (plan flags, --steps, --ef, --norms); bf16 momentum is refused
// (the truth is the fp32 L1 norm; bf16 momentum is not modelled here).
void validate(const SelectionQualityConfig& config);

// One sampled matrix over the steps.
struct MatrixQuality {
  std::int64_t index = 0;        // in the group
  double overlap_mean = 0.0, overlap_min = 0.0, overlap_final = 0.0;
  double effective_fraction = 0.0;
};

struct GroupQuality {
  std::int64_t rows = 0, cols = 0, N = 0;
  Path path = Path::single;
  bool routed = false;       // global_capped routed to global (§4.1)
  double c = 0.0;            // capacity factor used (capped only)
  std::int64_t k_tot = 0;    // truth rows per matrix and step
  std::int64_t k = 0;        // per-rank slots (local) / selected rows (single, ddp)
  bool measured = true;      // false: column selection (unsharded Dion2 with R > C), no row truth
  std::vector<std::int64_t> sampled;  // indices of the sampled matrices in the group
  // Over sampled matrices and steps; share = applied truth rows / k_tot of one (matrix, step).
  double overlap_first = 0.0;   // step 1 (fresh momentum), mean over matrices
  double overlap_mean = 0.0;    // mean over (matrix, step)
  double overlap_min = 0.0;     // min over (matrix, step)
  double overlap_final = 0.0;   // step N, mean over matrices (after N steps of EF dynamics)
  std::vector<double> overlap_per_step;  // [step], mean over matrices
  double precision = 0.0;       // applied truth rows / applied rows (local applies extra rows)
  double effective_fraction = 0.0;  // applied rows / rows per (matrix, step)
  double nominal_fraction = 0.0;    // k_tot / rows
  std::int64_t truth_rows = 0, applied_rows = 0, hit_rows = 0;  // sums over sampled matrices and steps
  std::vector<MatrixQuality> matrices;  // per sampled matrix
};

struct SelectionQuality {
  Scope scope = Scope::global;
  std::optional<double> capacity_factor;  // as configured (nullopt = auto)
  std::int64_t world = 1;
  double fraction = 0.25;
  std::string norms;          // stream spelling
  std::int64_t steps = 0;
  RowsMode mode = RowsMode::exact;  // the one used
  std::vector<GroupQuality> groups;
  // Aggregates over the measured groups, each sampled matrix standing for N / sampled of its group:
  // overlap shares weighted by truth rows, fractions by rows; min = the smallest (matrix, step).
  double overlap_first = 0.0, overlap_mean = 0.0, overlap_min = 0.0, overlap_final = 0.0;
  std::vector<double> overlap_per_step;
  double precision = 0.0, effective_fraction = 0.0, nominal_fraction = 0.0;
  std::int64_t sampled_matrices = 0, matrices = 0;  // over measured groups
  bool sampled = false;       // some group was sampled (sampled_matrices < matrices)
  double wall_ms = 0.0;
};

// One shape group (g = plan_group(...) at `world`) with explicit gradients, every matrix, exact
// rows, fp32 momentum: the unit the tests check against a brute-force count.
[[nodiscard]] GroupQuality measure_group(const GroupPlan& g, std::int64_t world, const GradientFill& grad,
                                         std::int64_t steps, double ef, int threads = 1);

// Validates, plans (make_plan), then simulates every group's sample for config.steps steps.
[[nodiscard]] SelectionQuality measure_selection_quality(const SelectionQualityConfig& config);

// The scopes a user chooses between: local, global, then global_capped at each capacity factor
// (nullopt = auto), all with the rest of `config`.
[[nodiscard]] std::vector<SelectionQuality> measure_scopes(const SelectionQualityConfig& config,
                                                           const std::vector<std::optional<double>>& capacity_factors);

// Selection quality depends on the plan configuration, the stream, steps and seed only, so a sweep
// over fabrics, node sets or fwd/bwd asks for the same ones again: measured once per plan config.
class SelectionQualityCache {
 public:
  explicit SelectionQualityCache(SelectionQualityConfig base) : base_(std::move(base)) {}
  // base with `plan` (validated and measured on first use).
  [[nodiscard]] const SelectionQuality& get(const PlanConfig& plan);

 private:
  SelectionQualityConfig base_;
  std::map<std::string, SelectionQuality> done_;
};

// {"scope", "capacity_factor", "world", "fraction", "norms", "steps", "mode", "overlap_first",
//  "overlap_mean", "overlap_min", "overlap_final", "overlap_per_step", "precision",
//  "effective_fraction", "nominal_fraction", "sampled", "sampled_matrices", "matrices", "wall_ms",
//  "groups": [{"rows", "cols", "N", "path", "routed", "c", "k", "k_tot", "measured",
//  "sampled_matrices", "overlap_*", "precision", "effective_fraction", "nominal_fraction",
//  "matrices": [{"index", "overlap_mean", "overlap_min", "overlap_final", "effective_fraction"}]}]}
[[nodiscard]] nlohmann::json to_json(const SelectionQuality& q);

}  // namespace dionsim::opt
