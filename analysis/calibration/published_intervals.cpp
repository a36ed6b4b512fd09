#include "analysis/calibration/published_intervals.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <set>
#include <tuple>

#include "analysis/calibration/intervals.hpp"

namespace dionsim::analysis {

namespace {

FoldPriors priors_from(const std::vector<PublishedRow>& others) {
  FoldPriors f;
  const InterNodePriorEstimate link = inter_node_prior_from_published(others);
  f.link_low = link.link_time_low;
  f.link_high = link.link_time_high;
  f.alltoall_inter_low = link.alltoall_vs_ring_low;
  f.alltoall_inter_high = link.alltoall_vs_ring_high;
  const IntraDomainPriorEstimate intra = intra_domain_prior_from_published(others);
  f.nvlink_low = intra.link_time_low;
  f.nvlink_high = intra.link_time_high;
  f.alltoall_intra_low = intra.alltoall_vs_ring_low;
  f.alltoall_intra_high = intra.alltoall_vs_ring_high;
  const NetHopPriorEstimate hop = net_hop_prior_from_published(others);
  f.net_step_low_us = hop.extra_low_us;
  f.net_step_high_us = hop.extra_high_us;
  f.fabric_spread = fabric_spread_from_published(others).spread();
  return f;
}

// One source's deviations from the central time v, at its two ends a and b: (up, down), each >= 0.
std::pair<double, double> deviations(double v, double a, double b) {
  return {std::max({0.0, a - v, b - v}), std::max({0.0, v - a, v - b})};
}

}  // namespace

CollectiveRecordRange collective_record_range(const std::vector<RowPrediction>& predictions) {
  std::array<std::vector<double>, 3> ratios;
  for (const auto& p : predictions) {
    if (!p.skipped.empty() || !(p.dionsim_us > 0) || !(p.row->time_us > 0)) continue;
    ratios[static_cast<std::size_t>(regime_of(p.row->size_bytes))].push_back(p.row->time_us / p.dionsim_us);
  }
  CollectiveRecordRange r;
  for (std::size_t g = 0; g < 3; ++g) {
    std::tie(r.low[g], r.high[g]) = prediction_range(ratios[g]);
    r.rows[g] = static_cast<int>(ratios[g].size());
  }
  return r;
}

namespace {

// The priors and the model-form range drawn from `others` (with their nominal predictions).
FoldPriors fold_priors(const std::vector<PublishedRow>& others, const std::vector<RowPrediction>& other_predictions,
                       const std::string& cluster) {
  FoldPriors f = priors_from(others);
  f.cluster = cluster;
  f.record = collective_record_range(other_predictions);
  return f;
}

// The intervals of the rows `indices` of `predictions` (whose rows are `held`, index-aligned) by
// the fold's priors and range, into `intervals` (indexed like `predictions`).
void fold_intervals(const FoldPriors& f, const std::vector<PublishedRow>& held, const std::vector<std::size_t>& indices,
                    const std::vector<RowPrediction>& predictions, std::vector<RowInterval>& intervals) {
  // The held rows' times at one end of one source (index-aligned with `indices`).
  const auto at = [&](double nic_factor, double nvlink_factor, double net_step_us) {
    const ModelPerturbation m{nic_factor, nvlink_factor, net_step_us};
    std::vector<double> t;
    for (const auto& p : predict_published(held, nullptr, &m)) t.push_back(p.dionsim_us);
    return t;
  };
  const double z = kIntervalZ;
  // The rates' ends: a slower link is a larger time factor, so its rate factor is the inverse.
  const std::vector<std::pair<std::vector<double>, std::vector<double>>> ends = {
      {at(1.0 / f.link_high, 1, 0), at(1.0 / f.link_low, 1, 0)},
      {at(1, 1.0 / f.nvlink_high, 0), at(1, 1.0 / f.nvlink_low, 0)},
      {at(1, 1, f.net_step_low_us), at(1, 1, f.net_step_high_us)},
      {at(std::exp(-z * f.fabric_spread), 1, 0), at(std::exp(z * f.fabric_spread), 1, 0)},
  };
  for (std::size_t k = 0; k < indices.size(); ++k) {
    const RowPrediction& p = predictions[indices[k]];
    if (!p.skipped.empty() || !(p.dionsim_us > 0)) continue;
    const double v = p.dionsim_us;
    double up2 = 0, down2 = 0;
    const auto add = [&](double a, double b) {
      const auto [up, down] = deviations(v, a, b);
      up2 += up * up;
      down2 += down * down;
    };
    for (const auto& [low_end, high_end] : ends) add(low_end[k], high_end[k]);
    if (p.row->collective == "alltoall") {
      const bool across = p.nvlink_domains >= 2;
      add(v * (across ? f.alltoall_inter_low : f.alltoall_intra_low),
          v * (across ? f.alltoall_inter_high : f.alltoall_intra_high));
    }
    RowInterval& r = intervals[indices[k]];
    r.prediction = &p;
    r.cluster = f.cluster;
    r.lo_us = std::max(0.0, v - std::sqrt(down2));
    r.hi_us = v + std::sqrt(up2);
    r.covered = r.lo_us <= p.row->time_us && p.row->time_us <= r.hi_us;
    const auto g = static_cast<std::size_t>(regime_of(p.row->size_bytes));
    r.model_form_lo_us = v * f.record.low[g];
    r.model_form_hi_us = v * f.record.high[g];
    r.model_form_covered = r.model_form_lo_us <= p.row->time_us && p.row->time_us <= r.model_form_hi_us;
  }
}

void count(IntervalCoverage& c, SizeRegime regime, const RowInterval& r) {
  c.regime = regime;
  ++c.rows;
  c.covered += r.covered ? 1 : 0;
  c.mean_half_width_pct += 100.0 * (r.hi_us - r.lo_us) / 2.0 / r.prediction->dionsim_us;
  c.model_form_covered += r.model_form_covered ? 1 : 0;
  c.model_form_mean_half_width_pct += 100.0 * (r.model_form_hi_us - r.model_form_lo_us) / 2.0 / r.prediction->dionsim_us;
}

std::vector<IntervalCoverage> finished(std::map<SizeRegime, IntervalCoverage>& by_regime) {
  std::vector<IntervalCoverage> out;
  for (auto& [regime, c] : by_regime) {
    c.mean_half_width_pct /= c.rows;
    c.model_form_mean_half_width_pct /= c.rows;
    out.push_back(c);
  }
  return out;
}

// The predicted rows' intervals in file order, and the coverage per regime (and per preset).
void summarize_into(PublishedIntervals& out, std::vector<RowInterval> intervals) {
  std::map<SizeRegime, IntervalCoverage> by_regime;
  std::map<std::string, std::map<SizeRegime, IntervalCoverage>> by_preset;
  for (auto& r : intervals) {
    if (r.prediction == nullptr) continue;
    const SizeRegime regime = regime_of(r.prediction->row->size_bytes);
    count(by_regime[regime], regime, r);
    count(by_preset[r.prediction->preset][regime], regime, r);
    out.rows.push_back(std::move(r));
  }
  out.summary = finished(by_regime);
  for (auto& [preset, regimes] : by_preset) out.summary_by_preset[preset] = finished(regimes);
}

}  // namespace

PublishedIntervals published_intervals(const std::vector<PublishedRow>& rows) {
  PublishedIntervals out;
  out.predictions = predict_published(rows);
  std::map<std::string, std::vector<std::size_t>> by_cluster;
  for (std::size_t i = 0; i < rows.size(); ++i) by_cluster[cluster_of(rows[i])].push_back(i);
  std::vector<RowInterval> intervals(rows.size());
  for (const auto& [cluster, indices] : by_cluster) {
    const std::set<std::size_t> held_set(indices.begin(), indices.end());
    std::vector<PublishedRow> others, held;
    std::vector<RowPrediction> other_predictions;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (held_set.count(i)) {
        held.push_back(rows[i]);
      } else {
        others.push_back(rows[i]);
        other_predictions.push_back(out.predictions[i]);
      }
    }
    out.folds.push_back(fold_priors(others, other_predictions, cluster));
    fold_intervals(out.folds.back(), held, indices, out.predictions, intervals);
  }
  summarize_into(out, std::move(intervals));
  return out;
}

PublishedIntervals intervals_against_record(const std::vector<PublishedRow>& rows, const std::vector<PublishedRow>& record) {
  PublishedIntervals out;
  out.predictions = predict_published(rows);
  out.folds.push_back(fold_priors(record, predict_published(record), "the published record"));
  std::vector<std::size_t> all(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) all[i] = i;
  std::vector<RowInterval> intervals(rows.size());
  fold_intervals(out.folds.back(), rows, all, out.predictions, intervals);
  summarize_into(out, std::move(intervals));
  return out;
}

nlohmann::json collective_record_stress_json(const sim::WhatifConfig& config, const opt::Inventory& inventory,
                                            const sim::KernelModel& kernels) {
  nlohmann::json j;
  for (const auto& [end, factors] : {std::pair{"low", kCollectiveRecordLow}, std::pair{"high", kCollectiveRecordHigh}}) {
    sim::WhatifConfig c = config;
    c.collective_options.time_factor_by_size_regime = factors;
    const auto r = sim::run_whatif(c, inventory, kernels);
    j[std::string("step_wall_ms_collectives_at_record_") + end] = sim::ns_to_ms(r.step_wall_ns);
    j[std::string("opt_wall_ms_collectives_at_record_") + end] = sim::ns_to_ms(r.opt_wall_seen_ns());  // as opt_wall_ms
  }
  return j;
}

}  // namespace dionsim::analysis
