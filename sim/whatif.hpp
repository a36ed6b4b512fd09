#pragma once
// What-if studies: a training step predicted for one configuration (model, optimizer, scope,
// fraction, capacity factor, nodes × GPUs, fabric, GPU, fwd/bwd), and the sweep over their
// cross product. One configuration = forward/backward with FSDP2 (training_model.hpp), then the
// optimizer step of the plan on two streams per rank (step_program.hpp); all ranks of a uniform
// plan behave alike, so one rank's timeline is simulated and stands for every rank.
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "optimizer/deferral_stream.hpp"
#include "optimizer/inventory.hpp"
#include "optimizer/plan.hpp"
#include "optimizer/selection_quality.hpp"
#include "sim/kernel_model.hpp"
#include "sim/step_collectives.hpp"
#include "sim/step_program.hpp"
#include "sim/training_model.hpp"
#include "topologies/topology.hpp"

namespace dionsim::sim {

// How global_capped's deferral is estimated (whatif, recommend): always by the deferral engine
// (optimizer/deferral.hpp), in one unit, the fraction of winner rows deferred per step.
//   analytic  — §4.12's normal approximation per (sender, destination) chunk, first step, iid
//               gradients (opt::analytic_deferral): what `deferral` reports as analytic_deferred_fraction.
//   simulated — opt::run_deferral: `steps` steps of momentum + error feedback with the optimizer's
//               own capped selection and pack, gradients from `stream` (--norms), mode auto (exact
//               rows when they fit, else the reduced energy model): `deferral`'s deferred_fraction.
enum class DeferralEstimator { analytic, simulated };
[[nodiscard]] DeferralEstimator parse_deferral_estimator(std::string_view text, std::string_view flag);
[[nodiscard]] std::string_view to_string(DeferralEstimator e);
struct DeferralEstimate {
  DeferralEstimator estimator = DeferralEstimator::analytic;
  std::int64_t steps = 20;   // simulated: optimizer steps (the deferral engine's default)
  opt::NormStream stream;    // simulated: gradient statistics (replay: loaded by the caller)
  std::uint64_t seed = 0;    // simulated: the engine's counter-based random numbers
  int threads = 2;           // simulated: results do not depend on it
};

// One configuration.
struct WhatifConfig {
  std::string model;
  // The optimizer plan's inputs: optimizer (default NorDion2), NS variant (default Gram), scope,
  // fraction, capacity factor (global_capped only; nullopt = auto), FSDP row shards, fp32. Its
  // world is the shard world, which plan_config() fills in: plan.world itself is not read.
  opt::PlanConfig plan = default_plan();
  topo::FabricSpec fabric;
  int nodes = 1;
  int gpus_per_node = 8;
  std::optional<double> alltoall_algbw_GBps;  // pin all-to-alls to a measured nccl-tests algbw
  // Calibrated all-to-all (dionsim calibrate --measured): the fabric's time divided by an
  // efficiency in (0, 1] (one for all-to-alls within a node, one for those across nodes) plus a
  // fixed cost per all-to-all. Not applied to pinned all-to-alls. Defaults = the fabric as is.
  double alltoall_intra_efficiency = 1.0;
  double alltoall_inter_efficiency = 1.0;
  double alltoall_latency_us = 0.0;
  // The collective model's parameters for every collective of the step (the optimizer's, FSDP's,
  // HSDP's replica all-reduce): a `calibrate --nccl-tests` fit of the user's cluster
  // (analysis/calibration/collective_fit.hpp), the same ones `collective --calibration` applies.
  // Defaults = the uncalibrated model.
  ModelOptions collective_options;
  // Spread (standard deviation, ms) of the ranks' arrival times at the optimizer step: ranks leave
  // forward/backward at slightly different times (host jitter), and the first collective of the
  // step — the first all-to-all for local and global, the norms all-gather for global_capped —
  // holds every rank until the last one arrives. A collective kernel's measured time on a rank
  // includes that wait (the shared 2 × H200 traces: 0.2 ms on the late rank, 14–18 ms on the early
  // one). nullopt = all ranks arrive together. See expected_rank_wait_ns.
  std::optional<double> rank_skew_ms;
  // A collective within one node (NVLink) runs this many times slower while a memory-bound kernel
  // runs beside it (StepProgramOptions::collective_hbm_slowdown); collectives that cross nodes are
  // bound by the NIC and unaffected. nullopt = no such contention.
  std::optional<double> collective_hbm_slowdown;
  std::string hardware;                       // GPU preset or calibration name (for output)
  std::string calibration;                    // calibration file ("" = none), for the record
  std::optional<double> fwd_bwd_ms;
  std::optional<double> mfu;
  std::int64_t tokens_per_gpu = 16384;
  // HSDP: the optimizer's plan and collectives and the FSDP all-gathers / reduce-scatters run in
  // shard groups of this many consecutive ranks; gradients are then all-reduced across the
  // world / shard_group replicas. 0 = FSDP over the world.
  std::int64_t shard_group = 0;
  std::string reduce_dtype = "fp32";  // FSDP gradient reduction: fp32 | bf16
  // FSDP units of the training step; 0 = the inventory's layers (none given: the whole-step
  // bound of training_model.hpp).
  std::int64_t layers = 0;
  double host_launch_us = 0.0;
  // The host issues the optimizer step while the GPU is still busy (steady-state training): the
  // launches cost host time (reported as opt_cpu_span_ms) but do not hold up the GPU. A
  // calibration's fitted host_launch_us applies this way; --host-launch-us alone blocks.
  bool host_ahead = false;
  DeferralEstimate deferral;  // global_capped only
  [[nodiscard]] std::int64_t world() const { return static_cast<std::int64_t>(nodes) * gpus_per_node; }
  // The optimizer's world: the shard group under HSDP, else the world.
  [[nodiscard]] std::int64_t shard_world() const { return shard_group > 0 ? shard_group : world(); }
  // `plan` with its world = shard_world(): what the optimizer plan of this what-if is made from.
  [[nodiscard]] opt::PlanConfig plan_config() const;
  [[nodiscard]] static opt::PlanConfig default_plan();
};

// The canonical JSON of a configuration: what the DB hashes and --json echoes.
[[nodiscard]] nlohmann::json to_json(const WhatifConfig& config);

// The sweep: every list is one axis of the cross product.
struct WhatifStudy {
  WhatifConfig base;  // model, optimizer, ns, hardware, fwd/bwd, …
  std::vector<opt::Scope> scopes;
  std::vector<double> fractions;
  std::vector<std::optional<double>> capacity_factors;  // apply to global_capped only
  std::vector<std::int64_t> nodes;
  std::vector<std::int64_t> gpus;  // world sizes instead of nodes (each whole hosts of its fabric)
  std::vector<topo::FabricSpec> fabrics;
  // GPUs per host for every fabric; nullopt = each fabric's own (8 on HGX, 4 on NVL72 trays).
  std::optional<int> gpus_per_node;
  // Further axes; empty = base's single value.
  std::vector<std::int64_t> shard_groups;         // 0 = FSDP
  std::vector<double> mfus, fwd_bwd_mss;          // at most one of them non-empty
  std::vector<std::int64_t> tokens_per_gpus;
  std::vector<std::int64_t> global_batch_tokens;  // instead of tokens_per_gpus: divided over the world
  // Measured all-to-all algbw by world size (a calibration): pins the all-to-alls of those
  // configurations unless base.alltoall_algbw_GBps pins all of them.
  std::map<std::int64_t, double> alltoall_algbw_GBps_by_world;
};
// Validates every axis and value before anything runs (UsageError naming the flag: an empty
// axis, a fraction outside (0, 1], a capacity factor < 1, GPUs per node that do not divide the
// fabric's leaf radix in the per-node layout, an invalid fabric …)
// a world that is not whole NVLink domains (nor within one), a shard group that does not divide
// the world or split hosts evenly, a global batch the world does not divide …)
// and returns the configurations in table order (fabric, scope, fraction, capacity, shard group,
// compute, tokens, nodes / gpus).
// Scopes other than global_capped take no capacity factor, so they appear once per fraction.
[[nodiscard]] std::vector<WhatifConfig> expand(const WhatifStudy& study);

// One distinct optimizer collective of the step (name, kind, size) with what the collective
// model chose for it and its time; `count` = how often the step issues it.
struct OptimizerCollective {
  std::string name;
  std::string kind;  // all_to_all | all_gather
  std::int64_t bytes_sent = 0;
  std::int64_t count = 0;
  DurationNs time_ns = 0;
  CollectiveChoice choice;
};

// How a plan routes its shape groups (spec §1.6, §4.1): packed = global_capped's pooled pack;
// exact_global = the full-shard all-to-all of global, and capped groups §4.1 routes there
// (B + 1 >= pr·pl or 2·pr > cols); local = per-shard top-k; unsharded = DDP / single (world 1 or
// unsharded parameters). capacity_factor_min/max: the c global_capped's groups use (what `auto`
// resolved to, per group: 1 + 2·sqrt((1 − 1/w)/(pr·k))), nullopt for other scopes.
struct Routing {
  std::int64_t packed = 0, exact_global = 0, local = 0, unsharded = 0;
  std::optional<double> capacity_factor_min, capacity_factor_max;
  // Groups whose local selection takes at least every real row: k·w >= rows (local at 8192 ranks
  // selects 8192 of a matrix's 5120 rows; the fraction asked is not what is applied).
  std::int64_t local_all_rows = 0;
  std::int64_t local_example_kw = 0, local_example_rows = 0;  // one such group, for the message
};
[[nodiscard]] Routing routing_of(const opt::Plan& plan);
// "packed/global/local" counts, e.g. "0/5/0"; "c" text: "1.0029", "1.02-1.10" or "-".
[[nodiscard]] std::string routing_text(const Routing& r);
[[nodiscard]] std::string resolved_capacity_text(const Routing& r);
[[nodiscard]] nlohmann::json routing_json(const Routing& r);
// Why a configuration is not what its scope promises, in one line for people (empty when it is
// what it says): global_capped with every group routed to exact global (it is global, and nothing
// can be deferred), local selecting k·w >= rows. `what` names the configuration.
[[nodiscard]] std::string degeneracy_note(const WhatifConfig& config, const Routing& routing);
// The distinct notes of a sweep's configurations, in order (each printed once): plans only, cheap.
[[nodiscard]] std::vector<std::string> degeneracy_notes(const std::vector<WhatifConfig>& configs,
                                                        const opt::Inventory& inventory);

// global_capped's deferral of one configuration by the deferral engine (DeferralEstimate).
struct DeferralResult {
  double fraction = 0.0;   // deferred winner rows / winner rows
  std::string estimator;   // "analytic" | "simulated"
  std::string mode;        // simulated: the engine's mode (exact | reduced); analytic: ""
};
[[nodiscard]] DeferralResult estimate_deferral(const WhatifConfig& config, const opt::Inventory& inventory,
                                               const opt::Plan& plan, DeferralEstimator estimator);

// The selection quality of a configuration's plan at its optimizer world (shard world), with its
// DeferralEstimate's gradient stream, steps and seed.
[[nodiscard]] opt::SelectionQuality measure_quality(const WhatifConfig& config, const opt::Inventory& inventory);

struct WhatifResult {
  WhatifConfig config;
  std::int64_t layers = 0;  // FSDP units the step was simulated with (0 = whole-step bound)
  std::vector<OptimizerCollective> collectives;
  // The entry of a collective event (by name and bytes sent), nullptr if none.
  [[nodiscard]] const OptimizerCollective* find_collective(const std::string& name, std::int64_t bytes_sent) const;
  opt::Plan plan;
  OptimizerStepResult opt;
  FwdBwdResult fwd_bwd;
  DurationNs step_wall_ns = 0;
  DurationNs exposed_comm_ns = 0;  // FSDP beyond the compute + optimizer collectives the GPU waits on
  double mfu_pct = 0.0;
  // Fraction of winner rows deferred per step (DeferralEstimate), global_capped only; printed as %.
  std::optional<double> deferral_fraction;
  std::string deferral_estimator;  // "analytic" | "simulated" (with deferral_fraction)
  std::string deferral_mode;       // simulated: exact | reduced
  Routing routing;
  std::optional<opt::SelectionQuality> quality;  // measured by recommend for its pick and runner-up
  std::int64_t params = 0;
  // The measured rank's expected wait in the step's first collective (config.rank_skew_ms), and
  // that collective's kind. `opt` is the slowest rank's step (the critical path, which sets the
  // step wall); a measured rank sees its first collective, and its optimizer window, longer by
  // the wait. The *_seen_* helpers give those measured-rank figures.
  DurationNs rank_wait_ns = 0;
  std::optional<StepCollective> first_collective;
  [[nodiscard]] DurationNs opt_wall_seen_ns() const { return opt.wall_ns + rank_wait_ns; }
  [[nodiscard]] DurationNs a2a_seen_ns() const;
  [[nodiscard]] DurationNs allgather_seen_ns() const;
  // The measured rank's collective stream: first collective start to last collective end (the
  // first collective holds the rank wait); 0 when the step has no collective. The seed thread's
  // 2-node "opt-stream window" is this span (docs/calibration.md says why).
  [[nodiscard]] DurationNs comm_window_seen_ns() const;
  [[nodiscard]] double gpu_idle_comm_window_pct() const { return opt.gpu_idle_pct(comm_window_seen_ns()); }
  [[nodiscard]] double gpu_idle_seen_pct() const { return opt.gpu_idle_pct(opt_wall_seen_ns()); }
};

// The optimizer collectives as a JSON array: name, kind, bytes, count, algorithm, protocol, time_ms.
[[nodiscard]] nlohmann::json collectives_json(const WhatifResult& result);

// The metrics of a result as flat JSON (the --json keys, also stored in the DB).
[[nodiscard]] nlohmann::json metrics_json(const WhatifResult& result);

// `--fabric` value: a preset name (topologies/) or a TOML topology file; a file that names its
// gpus_per_node must agree with `gpus_per_node`. Throws UsageError/InputError.
[[nodiscard]] topo::FabricSpec resolve_fabric(const std::string& preset_or_file, int gpus_per_node);

// The fabric axis of a sweep: `fabrics` (comma list of presets / TOML files) × `nic_GBps` (comma
// list, "" = keep each fabric's NIC), then the overrides (when set) applied to every fabric.
// Overridden fabrics are named "<fabric>@<nic GBps>" so table rows stay distinguishable.
struct FabricOverrides {
  std::optional<double> nvlink_GBps, oversubscription, latency_us;
};
// gpus_per_node: nullopt = each fabric's own host size.
[[nodiscard]] std::vector<topo::FabricSpec> resolve_fabrics(const std::string& fabrics, const std::string& nic_GBps,
                                                            const FabricOverrides& overrides,
                                                            std::optional<int> gpus_per_node);

// The command line of `dionsim whatif` as given (lists as comma text), and the study it means.
// make_study parses and validates every value (UsageError naming the flag) and resolves fabrics;
// expand() then checks the cross product.
struct WhatifOptions {
  std::string model, optimizer = "nordion2", ns = "gram", scopes = "local,global,global_capped";
  std::string fractions = "0.25", capacities = "auto", nodes, gpus, fabrics = "h100-ndr400", nic_GBps;
  FabricOverrides overrides;
  std::optional<int> gpus_per_node;  // nullopt = each fabric's host size
  std::string fwd_bwd_ms, mfu;       // lists; "" = not given
  std::optional<double> alltoall_algbw_GBps;
  std::string tokens_per_gpu = "16384", global_batch_tokens, shard_group, reduce_dtype = "fp32";
  std::optional<std::int64_t> layers;  // overrides the inventory's
  double host_launch_us = 0.0;
  bool host_ahead = false;
  std::optional<double> rank_skew_ms, collective_hbm_slowdown;
  std::string deferral_estimate = "analytic", norms = "iid";  // DeferralEstimate
  std::int64_t deferral_steps = 20;
};
[[nodiscard]] WhatifStudy make_study(const WhatifOptions& options);

// The human table: a header line and one fixed-width row per result. With `half_widths` (metric
// -> half the width of its 90 % interval, analysis/calibration/intervals.hpp) the step, optimizer,
// all-to-all and MFU columns print as "value ± half" (a header made with intervals = true).
[[nodiscard]] std::string table_header(bool intervals = false);
[[nodiscard]] std::string table_row(const WhatifResult& result, const std::map<std::string, double>* half_widths = nullptr);

// Runs one configuration. The inventory must be the config's model.
[[nodiscard]] WhatifResult run_whatif(const WhatifConfig& config, const opt::Inventory& inventory,
                                      const KernelModel& kernels);

// Expected maximum of n independent standard normal variables (0 for n = 1): E[max] =
// ∫ x·n·φ(x)·Φ(x)^(n−1) dx, integrated numerically (1e-9 absolute). 2 → 1/√π, 4 → 1.0294, 8 → 1.4236.
// Throws InputError for n < 1.
[[nodiscard]] double expected_max_standard_normal(std::int64_t n);
// Expected wait of one rank in a collective that every rank enters with an arrival time drawn
// independently from N(0, σ²): E[max over the world] − E[own arrival] = σ·E[max of `world` standard
// normals]. 0 for world 1 or σ = 0.
[[nodiscard]] DurationNs expected_rank_wait_ns(double sigma_ms, std::int64_t world);

}  // namespace dionsim::sim
