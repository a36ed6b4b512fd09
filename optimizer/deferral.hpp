#pragma once
// The deferral study (issue 7): how often global_capped defers winners, for a model, world size,
// fraction and capacity_factor, over many steps of Dion2/NorDion2 momentum + error-feedback
// dynamics. It runs the optimizer's own capped code (select_capped_winners, pack_capped_into from
// optimizer/capped.hpp — the functions the CPU reference step calls) on every packed shape group;
// only Newton-Schulz and the weights are left out, because neither influences which rows win:
//   M += G (every row, every step); keys = row L1 norms; winners, pooled pack, deferral;
//   kept winners (nonzero rows) are decayed M *= ef; deferred winners and non-winners are not.
// In the momentum dtype (= parameter dtype, §1.2): bf16 momentum rounds M after every update and
// the keys to bf16 (§2.2) — 8 significant bits, so many rows tie, and ties go to the lower flat
// position, i.e. to the lower ranks' chunks: deferral far above the fp32 figure at the same c.
// Two ways to hold the momentum rows:
//   exact   — full row vectors of C columns, the arithmetic of the CPU reference step in either
//             dtype (bit-identical keys, hence identical winners and counters);
//   reduced — one number per row: the squared L2 norm E = |M_i|^2, advanced exactly in
//             distribution for Gaussian gradient rows (E' = (sqrt(E) + s z)^2 + s^2 chi2_{C-1}),
//             ranked by sqrt(E) instead of the L1 norm (rounded to bf16 for bf16 momentum, which
//             keeps the ties' share but not which rows tie). O(1) per row and step instead of O(C).
//             Its agreement with exact is tested (tests/deferral) and stated in docs/deferral.md.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "optimizer/deferral_stream.hpp"
#include "optimizer/inventory.hpp"
#include "optimizer/momentum_rows.hpp"
#include "optimizer/plan.hpp"

namespace dionsim::opt {

enum class DeferralMode { exact, reduced, automatic };
[[nodiscard]] DeferralMode parse_deferral_mode(std::string_view text, std::string_view flag);
[[nodiscard]] std::string_view to_string(DeferralMode m);

struct DeferralConfig {
  Inventory inventory;
  // The capped plan's inputs: optimizer, world (>= 2: a world of 1 has no capped path), fraction,
  // capacity factor (nullopt = auto); scope is global_capped. The plan's dtype bytes are not read
  // (the study's momentum is momentum_dtype below).
  PlanConfig plan = capped_plan_defaults();
  double ef = 0.95;                        // Dion2 ef_decay / NorDion2 mu, in [0, 1]
  Dtype momentum_dtype = Dtype::float32;   // = parameter dtype (§1.2)
  NormStream stream;
  std::int64_t steps = 20;                 // >= 1
  std::int64_t trials = 1;                 // >= 1
  std::uint64_t seed = 0;
  DeferralMode mode = DeferralMode::automatic;
  // automatic: exact when the packed groups hold at most this many momentum elements (N*S*C).
  std::int64_t exact_max_elements = std::int64_t{1} << 27;
  int threads = 2;                         // results do not depend on it
  [[nodiscard]] static PlanConfig capped_plan_defaults();
};
// Throws UsageError naming the flag (--world, --fraction, --capacity-factor, --steps, --trials, --ef);
// std::invalid_argument for a plan scope other than global_capped (no flag sets it).
void validate(const DeferralConfig& config);

// Histogram of how many consecutive steps a deferred winner waited before it was applied;
// bin i = waited i steps (bin 0 unused), the last bin collects >= kMaxWait.
inline constexpr std::int64_t kMaxWait = 64;
struct WaitStats {
  std::vector<std::int64_t> hist = std::vector<std::int64_t>(kMaxWait + 1, 0);
  std::int64_t censored = 0;   // still waiting after the last step
  std::int64_t abandoned = 0;  // deferred, then no longer a winner before being applied
  void merge(const WaitStats& other);
};

// One shape group's run: the CAPPED_STATS counters of every rank and step.
struct GroupRun {
  std::vector<std::vector<StepCounts>> per_step_rank;  // [step][rank]
  WaitStats waits;
  std::int64_t applied_rows = 0;  // over all steps
};

// (GradientFill, StepCounts: optimizer/momentum_rows.hpp.)
// Exact simulation of one packed group (g.path must be capped_packed) with supplied gradients.
[[nodiscard]] GroupRun simulate_group_exact(const GroupPlan& g, double ef, Dtype momentum_dtype, std::int64_t steps,
                                            const GradientFill& grad, int threads);
// The same group under a stream (exact or reduced), with the counter-based random numbers of
// (seed, trial, group index).
[[nodiscard]] GroupRun simulate_group(const GroupPlan& g, std::int64_t group_index, const DeferralConfig& config,
                                      std::int64_t trial, DeferralMode mode, int threads);

// §4.12 normal approximation of the expected deferral fraction of one packed group: per chunk
// (sender r, destination d), W = winners of d's real matrices on r, mean n_d*k_tot*L_r/S,
// hypergeometric variance; deferred = E[max(0, W - min(B, pr*L_r))].
[[nodiscard]] double analytic_deferred_rows(const GroupPlan& g, std::int64_t world);

// The §4.12 estimate of a whole plan: expected deferred rows over its packed groups, divided by
// their winners (N * k_tot per group). The one analytic deferral figure: `deferral` reports it as
// analytic_deferred_fraction, `whatif` and `recommend` as deferral_fraction (estimate analytic).
// fraction = 0 when nothing is packed (every group routed to exact global, or not global_capped).
struct PlanDeferral {
  double deferred_rows = 0.0;     // expected, per step
  std::int64_t winner_rows = 0;   // per step, packed groups only
  std::int64_t packed_groups = 0;
  [[nodiscard]] double fraction() const {
    return winner_rows > 0 ? deferred_rows / static_cast<double>(winner_rows) : 0.0;
  }
};
[[nodiscard]] PlanDeferral analytic_deferral(const Plan& plan);

struct DeferralSummary {
  DeferralMode mode = DeferralMode::exact;  // the mode actually used
  std::int64_t packed_groups = 0, routed_groups = 0;
  std::int64_t winner_rows = 0, deferred_rows = 0, applied_rows = 0;  // over steps and trials
  std::int64_t packed_rows = 0;        // sum over packed groups of N * S (rows per step)
  double deferred_fraction = 0.0;      // deferred_rows / winner_rows
  double step_p50 = 0.0, step_p99 = 0.0, step_max = 0.0;  // over (trial, step) deferral fractions
  double steps_with_deferral = 0.0;    // share of (trial, step) with any deferred row
  std::vector<double> per_step_mean;   // deferral fraction per step, mean over trials
  std::vector<std::vector<std::vector<StepCounts>>> counters;  // [trial][step][rank], summed over groups
  WaitStats waits;
  double nominal_fraction = 0.0;       // winners / packed rows per step (k_tot / S)
  double effective_fraction = 0.0;     // applied / packed rows per step
  double analytic_deferred_fraction = 0.0;  // §4.12, first-step iid prediction
  std::vector<double> group_c;         // c of each packed group
  std::int64_t a2a_payload_bytes = 0, a2a_payload_bytes_c1 = 0;  // plan, per rank per step
  std::int64_t extra_bytes = 0;        // a2a_payload_bytes - a2a_payload_bytes_c1
  double wall_ms = 0.0;
};
// Runs every packed group for every trial (threads over (trial, group); inside a group when there
// are fewer tasks than threads). Validates the config first.
[[nodiscard]] DeferralSummary run_deferral(const DeferralConfig& config);

struct Recommendation {
  std::int64_t world = 0;
  std::optional<double> capacity_factor;  // nullopt: none <= c_max reaches the target
  double deferred_fraction = 0.0;         // at that c
  std::int64_t extra_bytes = 0;           // a2a bytes over c = 1, per rank per step
  std::int64_t evaluations = 0;
};
// Smallest c in [1, c_max] (to `resolution`) whose simulated deferral <= target, by bisection
// (deferral is non-increasing in c: B = ceil(c * pr * k) only grows; same seed = same gradients).
// `before_each` hears the c of every simulation before it runs (a progress bar).
inline constexpr double kRecommendMaxC = 4.0, kRecommendResolution = 0.005;
using EvaluationHook = std::function<void(double capacity_factor)>;
[[nodiscard]] Recommendation recommend_capacity(const DeferralConfig& config, double target,
                                                double c_max = kRecommendMaxC,
                                                double resolution = kRecommendResolution,
                                                const EvaluationHook& before_each = {});
// The most simulations recommend_capacity runs: c_max, c = 1, then the bisection's steps.
[[nodiscard]] std::int64_t recommend_max_evaluations(double c_max = kRecommendMaxC,
                                                     double resolution = kRecommendResolution);

}  // namespace dionsim::opt
