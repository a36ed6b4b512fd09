#include "analysis/calibration/extrapolation.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "analysis/calibration/parameters.hpp"
#include "common/error.hpp"
#include "common/format.hpp"
#include "sim/whatif_calibration.hpp"

namespace dionsim::analysis {

using nlohmann::json;

namespace {

// The calibrated model of `configurations` (whatif configurations with the calibration applied).
struct Calibrated {
  StepModelSetup setup;
  IntervalModel model;
  std::vector<sim::WhatifConfig> configs;
};

Calibrated calibrated(const std::vector<MeasuredConfiguration>& configurations, const Calibration& calibration,
                      const IntervalOptions& intervals, const StepFitOptions& options) {
  auto setup = step_model_setup(configurations, options);
  std::map<std::string, double> values;
  for (const auto& [name, p] : calibration.parameters) values[name] = p.value;
  auto kc = kernel_calibration_from_parameters(calibration.name, calibration.hardware, values, setup.hw);
  std::vector<sim::WhatifConfig> configs;
  for (std::size_t i = 0; i < setup.configs.size(); ++i)
    configs.push_back(as_fitted(setup.configs[i], setup.host_behind[i], kc));
  const sim::Hardware hw = setup.hw;
  IntervalModel model(std::move(kc), hw, uncertainty_of(&calibration, intervals));
  return {std::move(setup), std::move(model), std::move(configs)};
}

}  // namespace

ModelError leave_one_out_model_error(const std::vector<MeasuredConfiguration>& configurations,
                                     const StepFitOptions& options) {
  ModelError out;
  if (configurations.size() < 3) return out;
  std::map<std::string, std::pair<double, int>> sums;
  for (std::size_t k = 0; k < configurations.size(); ++k) {
    std::vector<MeasuredConfiguration> train;
    for (std::size_t i = 0; i < configurations.size(); ++i)
      if (i != k) train.push_back(configurations[i]);
    StepFitResult fit;
    try {
      fit = fit_step_model(train, options);
    } catch (const InputError&) {
      continue;  // too few metrics for the fold's free parameters
    }
    ++out.configurations;
    for (const auto& r : compare_predictions({configurations[k]}, fit.parameters, options)) {
      const StepMetric* m = find_step_metric(r.metric);
      if (m == nullptr || !std::isfinite(r.error_pct)) continue;
      const std::string& predicted = predicted_metric(configurations[k], *m);
      if (!has_interval_metric(predicted)) continue;
      auto& [ss, n] = sums[predicted];
      ss += (r.error_pct / 100.0) * (r.error_pct / 100.0);
      ++n;
    }
  }
  for (const auto& [metric, s] : sums) out.relative_rms[metric] = std::sqrt(s.first / s.second);
  if (out.relative_rms.empty()) out.configurations = 0;
  return out;
}

namespace {

// Relative rms of the prediction rows' errors per whatif metric with an interval.
ModelError relative_rms(const std::vector<MeasuredConfiguration>& predicted, const std::vector<PredictionRow>& rows) {
  std::map<std::string, std::pair<double, int>> sums;
  for (const auto& r : rows) {
    const StepMetric* m = find_step_metric(r.metric);
    if (m == nullptr || !std::isfinite(r.error_pct)) continue;
    const auto c = std::find_if(predicted.begin(), predicted.end(),
                                [&](const MeasuredConfiguration& x) { return x.config.label() == r.configuration; });
    if (c == predicted.end()) continue;
    const std::string& metric = predicted_metric(*c, *m);
    if (!has_interval_metric(metric)) continue;
    auto& [ss, n] = sums[metric];
    ss += (r.error_pct / 100.0) * (r.error_pct / 100.0);
    ++n;
  }
  ModelError out;
  for (const auto& [metric, s] : sums) out.relative_rms[metric] = std::sqrt(s.first / s.second);
  out.configurations = out.relative_rms.empty() ? 0 : static_cast<int>(predicted.size());
  return out;
}

}  // namespace

ModelError node_count_model_error(const std::vector<MeasuredConfiguration>& configurations,
                                  const std::map<std::string, double>& fitted, const StepFitOptions& options) {
  std::set<int> nodes;
  for (const auto& c : configurations) nodes.insert(c.config.nodes);
  if (nodes.size() < 2) return {};
  std::vector<MeasuredConfiguration> inner, outer;
  for (const auto& c : configurations) (c.config.nodes < *nodes.rbegin() ? inner : outer).push_back(c);
  StepFitResult fit;
  try {
    fit = fit_step_model(inner, options);
  } catch (const InputError&) {
    return {};  // too few metrics for the inner fit's free parameters
  }
  auto parameters = fit.parameters;
  for (const char* name : {"nic_efficiency", "alltoall_inter_efficiency"})
    if (const auto it = fitted.find(name); it != fitted.end()) parameters[name] = it->second;
  return relative_rms(outer, compare_predictions(outer, parameters, options));
}

void attach_model_error(Calibration& calibration, const ModelError& error) {
  calibration.model_error = error.relative_rms;
  calibration.model_error_configurations = error.relative_rms.empty() ? 0 : error.configurations;
}

double IntervalRow::half_width_pct() const {
  return interval.value != 0.0 ? 100.0 * interval.half_width() / std::abs(interval.value) : 0.0;
}

std::vector<IntervalRow> predict_with_intervals(const std::vector<MeasuredConfiguration>& configurations,
                                                const Calibration& calibration, const IntervalOptions& intervals,
                                                const StepFitOptions& options) {
  const auto cal = calibrated(configurations, calibration, intervals, options);
  std::vector<IntervalRow> rows;
  for (std::size_t i = 0; i < configurations.size(); ++i) {
    const auto& c = configurations[i];
    const auto& w = cal.configs[i];
    const auto ivs = cal.model.intervals(w, cal.setup.inventories.at(w.model));
    for (const auto& m : step_metrics()) {
      const auto it = c.metrics.find(m.measured);
      if (it == c.metrics.end()) continue;
      const auto iv = ivs.find(predicted_metric(c, m));
      if (iv == ivs.end()) continue;
      IntervalRow r;
      r.row = {c.config.label(), c.config.scope, c.config.nodes, m.measured, it->second, iv->second.value, 0.0, m.fitted};
      r.row.error_pct = it->second != 0.0 ? 100.0 * (r.row.predicted - r.row.measured) / r.row.measured : 0.0;
      r.interval = iv->second;
      rows.push_back(r);
    }
  }
  return rows;
}

std::vector<DifferenceRow> predict_differences(const std::vector<MeasuredConfiguration>& configurations,
                                               const Calibration& calibration, const IntervalOptions& intervals,
                                               const StepFitOptions& options) {
  const auto cal = calibrated(configurations, calibration, intervals, options);
  std::vector<DifferenceRow> rows;
  for (std::size_t i = 0; i < configurations.size(); ++i) {
    for (std::size_t j = i + 1; j < configurations.size(); ++j) {
      const auto& a = configurations[i].config;
      const auto& b = configurations[j].config;
      if (a.scope == b.scope || a.nodes != b.nodes || a.gpus_per_node != b.gpus_per_node || a.hardware != b.hardware ||
          a.model != b.model || a.optimizer != b.optimizer || a.ns != b.ns || a.fraction != b.fraction)
        continue;
      const auto& wa = cal.configs[i];
      const auto d = cal.model.differences(wa, cal.configs[j], cal.setup.inventories.at(wa.model));
      for (const auto& m : step_metrics()) {
        const auto ma = configurations[i].metrics.find(m.measured);
        const auto mb = configurations[j].metrics.find(m.measured);
        if (ma == configurations[i].metrics.end() || mb == configurations[j].metrics.end()) continue;
        const std::string& pa = predicted_metric(configurations[i], m);
        if (pa != predicted_metric(configurations[j], m)) continue;
        const auto iv = d.find(pa);
        if (iv == d.end()) continue;
        rows.push_back({a.label(), b.label(), a.scope, b.scope, a.nodes, m.measured, ma->second - mb->second, iv->second});
      }
    }
  }
  return rows;
}

std::vector<CoverageSummary> summarize_coverage(const std::vector<IntervalRow>& rows) {
  std::vector<CoverageSummary> out;
  auto add = [](CoverageSummary& s, const IntervalRow& r) {
    ++s.count;
    s.covered += r.covered() ? 1 : 0;
    s.mean_abs_error_pct += std::abs(r.row.error_pct);
    s.mean_half_width_pct += r.half_width_pct();
  };
  auto finish = [](CoverageSummary& s) {
    s.mean_abs_error_pct /= s.count;
    s.mean_half_width_pct /= s.count;
  };
  CoverageSummary all{"all", 0, 0, 0.0, 0.0};
  for (const auto& m : step_metrics()) {
    CoverageSummary s{m.measured, 0, 0, 0.0, 0.0};
    for (const auto& r : rows) {
      if (r.row.metric != m.measured) continue;
      add(s, r);
      add(all, r);
    }
    if (s.count == 0) continue;
    finish(s);
    out.push_back(s);
  }
  if (all.count > 0) {
    finish(all);
    out.push_back(all);
  }
  return out;
}

Extrapolation extrapolate(const std::vector<MeasuredConfiguration>& configurations, const IntervalOptions& intervals,
                          const StepFitOptions& options) {
  std::set<int> nodes;
  for (const auto& c : configurations) nodes.insert(c.config.nodes);
  if (nodes.size() < 2) {
    throw_bad_input("validate --extrapolate", "nodes", nodes.empty() ? "none" : std::to_string(*nodes.begin()),
                    "selected runs of at least two node counts (the smaller are fitted, the largest predicted)");
  }
  Extrapolation e;
  e.predicted_nodes = *nodes.rbegin();
  std::vector<MeasuredConfiguration> train, test;
  for (const auto& c : configurations) (c.config.nodes < e.predicted_nodes ? train : test).push_back(c);
  for (int n : nodes)
    if (n < e.predicted_nodes) e.fit_nodes.push_back(n);
  const auto fit = fit_step_model(train, options);
  std::string fitted;
  for (int n : e.fit_nodes) {
    if (!fitted.empty()) fitted += ',';
    fitted += std::to_string(n);
  }
  e.calibration = calibration_from_step_fit(fit, "extrapolate-from-" + fitted + "-nodes", {"validate --extrapolate"},
                                            "dionsim validate");
  attach_model_error(e.calibration, leave_one_out_model_error(train, options));
  // The leave-one-out saw node counts up to the largest fitted: beyond it the link's drift with
  // the node count is what it cannot show (intervals.hpp, (b')).
  IntervalOptions beyond = intervals;
  beyond.calibrated_nodes = e.fit_nodes.back();
  e.beyond = node_count_model_error(train, fit.parameters, options);
  beyond.beyond_model_error = e.beyond.relative_rms;
  e.rows = predict_with_intervals(test, e.calibration, beyond, options);
  e.differences = predict_differences(test, e.calibration, beyond, options);
  e.summary = summarize_coverage(e.rows);
  return e;
}

std::string interval_rows_table(const std::vector<IntervalRow>& rows) {
  std::string out = "| configuration | metric | measured | predicted ± 90 % | interval | error % | half-width % | covered |\n"
                    "|---|---|---:|---:|---|---:|---:|---|\n";
  for (const auto& r : rows) {
    const int digits = std::abs(r.interval.value) >= 100 ? 1 : 2;
    out += "| " + r.row.configuration + " | " + r.row.metric + " | " + format("%.4g", r.row.measured) + " | " +
           format_interval(r.interval, digits) + " | [" + format("%.4g", r.interval.lo) + ", " + format("%.4g", r.interval.hi) +
           "] | " + format("%+.1f", r.row.error_pct) + " | " + format("%.1f", r.half_width_pct()) + " | " +
           (r.covered() ? "yes" : "no") + " |\n";
  }
  return out;
}

std::string differences_table(const std::vector<DifferenceRow>& rows) {
  std::string out = "| nodes | difference | metric | measured | predicted ± 90 % | interval | covered |\n"
                    "|---:|---|---|---:|---:|---|---|\n";
  for (const auto& r : rows) {
    out += "| " + std::to_string(r.nodes) + " | " + r.scope_a + " − " + r.scope_b + " | " + r.metric + " | " +
           format("%+.1f", r.measured) + " | " + format("%+.1f", r.interval.value) + " ± " + format("%.1f", r.interval.half_width()) +
           " | [" + format("%+.1f", r.interval.lo) + ", " + format("%+.1f", r.interval.hi) + "] | " +
           (r.covered() ? "yes" : "no") + " |\n";
  }
  return out;
}

std::string coverage_table(const std::vector<CoverageSummary>& summary) {
  std::string out = "| metric | cells | covered | mean abs error % | mean half-width % |\n|---|---:|---:|---:|---:|\n";
  for (const auto& s : summary) {
    out += "| " + s.metric + " | " + std::to_string(s.count) + " | " + std::to_string(s.covered) + " (" +
           format("%.0f", 100.0 * s.covered / s.count) + " %) | " + format("%.1f", s.mean_abs_error_pct) + " | " +
           format("%.1f", s.mean_half_width_pct) + " |\n";
  }
  return out;
}

json to_json(const IntervalRow& r) {
  json j = to_json(r.row);
  j["predicted_lo"] = r.interval.lo;
  j["predicted_hi"] = r.interval.hi;
  j["half_width_pct"] = r.half_width_pct();
  j["covered"] = r.covered();
  return j;
}

json to_json(const DifferenceRow& r) {
  return {{"a", r.a},           {"b", r.b},
          {"scope_a", r.scope_a}, {"scope_b", r.scope_b},
          {"nodes", r.nodes},   {"metric", r.metric},
          {"measured", r.measured}, {"predicted", r.interval.value},
          {"predicted_lo", r.interval.lo}, {"predicted_hi", r.interval.hi},
          {"probability_positive", r.interval.probability_above(0.0)}, {"covered", r.covered()}};
}

json to_json(const CoverageSummary& s) {
  return {{"metric", s.metric},
          {"count", s.count},
          {"covered", s.covered},
          {"coverage", s.count ? static_cast<double>(s.covered) / s.count : 0.0},
          {"mean_abs_error_pct", s.mean_abs_error_pct},
          {"mean_half_width_pct", s.mean_half_width_pct}};
}

json to_json(const Extrapolation& e) {
  json rows = json::array(), diffs = json::array(), summary = json::array();
  for (const auto& r : e.rows) rows.push_back(to_json(r));
  for (const auto& d : e.differences) diffs.push_back(to_json(d));
  for (const auto& s : e.summary) summary.push_back(to_json(s));
  return {{"fit_nodes", e.fit_nodes},
          {"predicted_nodes", e.predicted_nodes},
          {"calibration", to_json(e.calibration)},
          {"beyond_model_error", {{"configurations", e.beyond.configurations}, {"relative_rms", e.beyond.relative_rms}}},
          {"extrapolated", rows},
          {"differences", diffs},
          {"coverage_summary", summary}};
}

std::string extrapolation_text(const Extrapolation& e) {
  std::string out = format("# fitted on %zu node count(s) up to %d, predicted %d nodes (90 %% intervals)\n", e.fit_nodes.size(),
                           e.fit_nodes.back(), e.predicted_nodes);
  out += interval_rows_table(e.rows);
  out += "\n";
  out += coverage_table(e.summary);
  out += "\n# differences on one node set\n";
  out += differences_table(e.differences);
  return out;
}

}  // namespace dionsim::analysis
