#pragma once
// `dionsim recommend`: per cluster size, the scope and capacity_factor with the shortest predicted
// training step among those whose deferral stays under a target — the question dionsim exists to
// answer. A what-if sweep (sim/whatif.hpp) whose scope × capacity axes are the candidates and whose
// other axes (fabric, nodes / GPUs, shard group, compute, tokens) are the clusters.
//
// Per candidate: the step (run_whatif), the routing and resolved c, and global_capped's deferral by
// the deferral engine (DeferralEstimate: analytic for every candidate; simulated — seconds per
// candidate — only in step order until the pick and the runner-up are known). local and global
// defer nothing. The pick = the fastest candidate within the target; ties go to the candidate that
// is what it says (not degenerate), then to the scope order local, global, global_capped, then to
// the smaller c. The runner-up = the fastest feasible candidate of another *effective* scope (a
// global_capped whose groups are all routed to exact global is global: recommending one over the
// other says nothing), so the margin is what the choice of scope is worth. A local whose selection
// degenerates (k·w >= rows) is listed but never picked (RecommendCandidate::eligible).
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "optimizer/inventory.hpp"
#include "sim/kernel_model.hpp"
#include "sim/whatif.hpp"
#include "sim/whatif_calibration.hpp"

namespace dionsim::sim {

struct RecommendStudy {
  WhatifStudy study;            // base.deferral: the estimator; one fraction
  double target_deferral = 1e-4;  // in (0, 1): fraction of winner rows deferred per step
  // A step calibration whose fabric-scoped values apply on its own fabric only
  // (apply_fabric_calibration); null = none.
  const StepCalibration* fabric_calibration = nullptr;
  // The stress test of the pick: every collective call's time at these factors per size regime
  // (ModelOptions::time_factor_by_size_regime) — the published record's measured / modelled ends,
  // which sim does not read (analysis/calibration/published_intervals.hpp: kCollectiveRecordLow /
  // kCollectiveRecordHigh); nullopt = no stress test.
  std::optional<std::array<double, 3>> collective_stress_low, collective_stress_high;
};
// UsageError naming the flag: a target outside (0, 1), more than one fraction (scopes are compared
// at one fraction), then whatever expand() refuses.
void validate(const RecommendStudy& study);

// A 90 % interval of one metric of one candidate, by the caller's model (CandidateIntervals below;
// analysis/calibration/intervals.hpp, which sim does not depend on).
struct MetricInterval {
  double lo = 0.0, hi = 0.0;
};

struct RecommendCandidate {
  WhatifResult result;
  std::optional<double> deferral_fraction;  // nullopt: not estimated (slower than the runner-up)
  std::string deferral_estimator;           // of deferral_fraction
  std::optional<bool> feasible;             // deferral <= target; nullopt when not estimated
  std::string degeneracy;                   // degeneracy_note(), "" when the scope is what it says
  // 90 % intervals of the pick's and the runner-up's metrics (step_wall_ms, opt_wall_ms) by the
  // caller's CandidateIntervals; empty for the other candidates or without a model.
  std::map<std::string, MetricInterval> intervals;
  [[nodiscard]] std::string label() const;  // "global", "global_capped@auto", "global_capped@1.1"
  [[nodiscard]] opt::Scope effective_scope() const;  // global_capped with nothing packed = global
  // May be picked: not a local that selects k·w >= rows in some group (it applies more rows than
  // the fraction asked — another algorithm, not a faster way to run this one).
  [[nodiscard]] bool eligible() const;
};

// The runner-up's step minus the pick's as a 90 % interval, and the probability that the pick is
// really the faster. Computed by the caller's model (analysis/calibration/intervals.hpp: both
// configurations perturbed together on one node set), which sim does not depend on.
struct MarginInterval {
  double lo_ms = 0.0, hi_ms = 0.0;
  double p_pick_wins = 0.0;
};
using MarginModel = std::function<std::optional<MarginInterval>(const WhatifConfig& pick, const WhatifConfig& runner_up)>;
using CandidateIntervals = std::function<std::map<std::string, MetricInterval>(const WhatifConfig& candidate)>;

struct ClusterRecommendation {
  WhatifConfig cluster;                     // the pick's configuration (scope and c of the pick)
  std::vector<RecommendCandidate> candidates;  // in the sweep's order (scope, capacity)
  std::optional<std::size_t> pick, runner_up;  // indices into candidates; their result.quality is measured
  std::optional<MarginInterval> margin_interval;  // when a MarginModel was given
  // The margin (runner-up step − pick step) with every collective call at the study's stress ends,
  // low then high; nullopt without a stress test or a runner-up.
  std::optional<std::pair<double, double>> stress_margin_ms;
  // The pick stays ahead of the runner-up at both stress ends.
  [[nodiscard]] std::optional<bool> pick_holds_under_stress() const;
  [[nodiscard]] std::optional<double> margin_ms() const;  // runner-up step - pick step
};

// One cluster at a time, in the sweep's order; `done` hears each (for a progress bar / streaming).
[[nodiscard]] std::vector<ClusterRecommendation> recommend(
    const RecommendStudy& study, const opt::Inventory& inventory, const KernelModel& kernels,
    const std::function<void(const ClusterRecommendation&)>& done = {}, const MarginModel& margin_model = {},
    const CandidateIntervals& candidate_intervals = {});

// The cluster's configuration without the candidate axes (what the DB hashes per cluster).
[[nodiscard]] nlohmann::json cluster_json(const ClusterRecommendation& r);
// Everything --json prints for one cluster: the cluster, target, estimator, pick, runner-up, margin,
// every candidate (step, deferral or null, feasible, routing, resolved c, degeneracy).
[[nodiscard]] nlohmann::json to_json(const ClusterRecommendation& r, const RecommendStudy& study);

[[nodiscard]] std::string recommend_table_header();
[[nodiscard]] std::string recommend_table_row(const ClusterRecommendation& r);

}  // namespace dionsim::sim
