#pragma once
// `dionsim validate-collectives --intervals`: how far the collective model's 90 % intervals can be
// trusted on clusters they were not drawn from. Every published cluster (one repository's rows of
// one GPU label, cluster_of) is held out in turn; the priors whatif's intervals use
// (intervals.hpp) are re-derived from the other clusters' rows by the same rules — the
// inter-node link and the all-to-all's share of it, NCCL's NVLink rate and the one-domain
// all-to-all's share, the cost of a network step, the fabric spread — and each held-out row is
// predicted at both ends of every prior that moves it. The ends combine as whatif's do: each
// source's |Δ| on the side it moves, the sides in quadrature, [v − √Σ Δ₋², v + √Σ Δ₊²]. A row is
// covered when its measured time falls inside.
//
// A time factor (the link, NVLink, an all-to-all's share) is applied as whatif applies it: the
// link and NVLink on the rates the model runs at (the NIC efficiency, NCCL's NVLink scale, each
// clamped to its valid range), an all-to-all's share on the all-to-all's predicted time.
//
// Beside it, the model-form interval: per size regime, the other clusters' rows' measured /
// modelled times, and their distribution-free 90 % range [r(k), r(n+1−k)], k = ⌊0.05 (n+1)⌋ (as the
// priors' ranges): the held-out row's prediction times that range. It asks nothing of the model's
// structure: it is the error the model has made on clusters like it.
#include <array>
#include <nlohmann/json.hpp>
#include <map>
#include <string>
#include <vector>

#include "analysis/calibration/published_collectives.hpp"
#include "analysis/measured/nccl_published.hpp"
#include "optimizer/inventory.hpp"
#include "sim/kernel_model.hpp"
#include "sim/whatif.hpp"

namespace dionsim::analysis {

struct RowInterval {
  const RowPrediction* prediction = nullptr;  // into PublishedIntervals::predictions
  std::string cluster;
  double lo_us = 0, hi_us = 0;  // the priors' interval
  bool covered = false;
  double model_form_lo_us = 0, model_form_hi_us = 0;  // the other clusters' error range
  bool model_form_covered = false;
};

struct IntervalCoverage {
  SizeRegime regime = SizeRegime::latency;
  int rows = 0, covered = 0;
  double mean_half_width_pct = 0;  // mean of (hi − lo) / 2 / predicted, in %
  int model_form_covered = 0;
  double model_form_mean_half_width_pct = 0;
};

// The model-form range over predicted rows (skipped and 0-time ones left out): measured / modelled
// per size regime (latency, middle, bandwidth), distribution-free 90 % [r(k), r(n+1−k)].
struct CollectiveRecordRange {
  std::array<double, 3> low{1.0, 1.0, 1.0}, high{1.0, 1.0, 1.0};
  std::array<int, 3> rows{0, 0, 0};
};

// The priors one fold drew from the other clusters (time factors; µs per network step).
struct FoldPriors {
  std::string cluster;  // held out
  double link_low = 1, link_high = 1, alltoall_inter_low = 1, alltoall_inter_high = 1;
  double nvlink_low = 1, nvlink_high = 1, alltoall_intra_low = 1, alltoall_intra_high = 1;
  double net_step_low_us = 0, net_step_high_us = 0;
  double fabric_spread = 0;
  CollectiveRecordRange record;  // the other clusters' rows: the model-form range per regime
};

struct PublishedIntervals {
  std::vector<RowPrediction> predictions;  // nominal, every row (skipped ones too)
  std::vector<RowInterval> rows;           // the predicted rows, in file order
  std::vector<FoldPriors> folds;           // one per cluster, in name order
  std::vector<IntervalCoverage> summary;   // per regime (a regime without rows is left out)
  std::map<std::string, std::vector<IntervalCoverage>> summary_by_preset;  // the same per fabric preset
};

// Throws as predict_published does. `rows` must outlive the result.
[[nodiscard]] PublishedIntervals published_intervals(const std::vector<PublishedRow>& rows);
// The same for rows outside the record (a user's own nccl-tests logs): one fold, its priors and
// range drawn from the whole `record` (the published rows), every row of `rows` predicted with them.
[[nodiscard]] PublishedIntervals intervals_against_record(const std::vector<PublishedRow>& rows,
                                                          const std::vector<PublishedRow>& record);

// CollectiveRecordRange (above) of these predictions.
[[nodiscard]] CollectiveRecordRange collective_record_range(const std::vector<RowPrediction>& predictions);
// collective_record_range of the committed CSV's nominal predictions, rounded to 3 decimals (a test
// checks them): what `recommend` stresses the pick with (every call at one end).
inline constexpr std::array<double, 3> kCollectiveRecordLow{0.922, 0.880, 0.898};
inline constexpr std::array<double, 3> kCollectiveRecordHigh{2.894, 4.800, 2.358};

// whatif's stress bounds of one configuration: the step and the optimizer wall re-simulated with
// every collective call at the record's low and at its high ends (all calls together, as in
// recommend's stress test): step_wall_ms_collectives_at_record_low / _high and the same for
// opt_wall_ms. Not an interval: what the step is if the cluster is as far off the model as the
// record's 5th / 95th percentile row.
[[nodiscard]] nlohmann::json collective_record_stress_json(const sim::WhatifConfig& config,
                                                           const opt::Inventory& inventory,
                                                           const sim::KernelModel& kernels);

}  // namespace dionsim::analysis
