#include "analysis/calibration/cross_validation.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "common/error.hpp"
#include "common/format.hpp"

namespace dionsim::analysis {

using nlohmann::json;

namespace {

std::vector<MeasuredConfiguration> without(const std::vector<MeasuredConfiguration>& all, std::size_t a,
                                           std::size_t b) {
  std::vector<MeasuredConfiguration> out;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (i != a && i != b) out.push_back(all[i]);
  return out;
}

// Relative residuals (predicted − measured) / measured of `c`'s metrics with an interval, by whatif
// metric, predicted with `parameters` — the cells leave_one_out_model_error sums.
std::map<std::string, double> relative_residuals(const MeasuredConfiguration& c,
                                                 const std::map<std::string, double>& parameters,
                                                 const StepFitOptions& options) {
  std::map<std::string, double> out;
  for (const auto& r : compare_predictions({c}, parameters, options)) {
    const StepMetric* m = find_step_metric(r.metric);
    if (m == nullptr || !std::isfinite(r.error_pct)) continue;
    const std::string& predicted = predicted_metric(c, *m);
    if (has_interval_metric(predicted)) out[predicted] = r.error_pct / 100.0;
  }
  return out;
}

// The nested leave-one-out of every fold from the pair fits: residuals[{k, j}] = j predicted by
// fit(all \ {k, j}) (nullopt: that fit was refused, as leave_one_out_model_error skips it).
using PairResiduals = std::map<std::pair<std::size_t, std::size_t>, std::optional<std::map<std::string, double>>>;

PairResiduals pair_residuals(const std::vector<MeasuredConfiguration>& all, const StepFitOptions& options) {
  PairResiduals out;
  // A fold of n − 1 configurations has a nested estimate only with n − 1 >= 3 (the rule of
  // leave_one_out_model_error).
  if (all.size() < 4) return out;
  for (std::size_t a = 0; a < all.size(); ++a) {
    for (std::size_t b = a + 1; b < all.size(); ++b) {
      std::optional<StepFitResult> fit;
      try {
        fit = fit_step_model(without(all, a, b), options);
      } catch (const InputError&) {
        out[{a, b}] = out[{b, a}] = std::nullopt;  // too few metrics for the pair fit's free parameters
        continue;
      }
      out[{a, b}] = relative_residuals(all[b], fit->parameters, options);
      out[{b, a}] = relative_residuals(all[a], fit->parameters, options);
    }
  }
  return out;
}

// Fold k's model-form error: relative rms over j != k of j's residuals; empty when no nested fit did.
ModelError fold_model_error(const PairResiduals& pairs, std::size_t k, std::size_t n) {
  ModelError e;
  std::map<std::string, std::pair<double, int>> sums;
  for (std::size_t j = 0; j < n; ++j) {
    if (j == k) continue;
    const auto it = pairs.find({k, j});
    if (it == pairs.end() || !it->second) continue;
    ++e.configurations;
    for (const auto& [metric, r] : *it->second) {
      auto& [ss, count] = sums[metric];
      ss += r * r;
      ++count;
    }
  }
  for (const auto& [metric, s] : sums) e.relative_rms[metric] = std::sqrt(s.first / s.second);
  if (e.relative_rms.empty()) e.configurations = 0;
  return e;
}

std::string join(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

CrossValidation cross_validate(const std::vector<MeasuredConfiguration>& configurations,
                               const IntervalOptions& intervals, const StepFitOptions& options) {
  if (configurations.size() < 2)
    throw_bad_input("validate", "configurations", std::to_string(configurations.size()),
                    "at least two measured configurations (one is held out)");
  check_interval_options(intervals);
  const auto pairs = pair_residuals(configurations, options);
  CrossValidation cv;
  std::set<std::string> priors;
  int defaulted = 0, with_priors = 0, unmatched = 0;
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  for (std::size_t k = 0; k < configurations.size(); ++k) {
    const auto train = without(configurations, k, kNone);
    const auto fit = fit_step_model(train, options);
    const auto& held = configurations[k];
    for (auto& row : compare_predictions({held}, fit.parameters, options)) cv.rows.push_back(row);

    CrossValidationFold fold;
    fold.configuration = held.config.label();
    fold.fitted_configurations = static_cast<int>(train.size());
    auto cal =
        calibration_from_step_fit(fit, "validate-without-" + fold.configuration, {"validate"}, "dionsim validate");
    const ModelError error = fold_model_error(pairs, k, configurations.size());
    attach_model_error(cal, error);
    fold.model_error = error.relative_rms;
    fold.model_error_configurations = cal.model_error_configurations;
    if (!fold.nested()) ++defaulted;
    for (const auto& p : uncertainty_of(&cal, intervals).priors) {
      fold.priors.push_back(p.name);
      priors.insert(p.name);
    }
    if (!fold.priors.empty()) ++with_priors;
    for (auto& r : predict_with_intervals({held}, cal, intervals, options)) {
      // An interval is shown only around the fit's own prediction of the cell: the interval model
      // sets up some runs differently (an opt.step() timed alone, host not ahead, is run
      // host-ahead there), and an interval around another value would be coverage of nothing.
      const auto same = std::find_if(cv.rows.begin(), cv.rows.end(), [&](const PredictionRow& p) {
        return p.configuration == r.row.configuration && p.metric == r.row.metric;
      });
      if (same == cv.rows.end() ||
          std::abs(r.interval.value - same->predicted) > 1e-6 * std::max(1.0, std::abs(same->predicted))) {
        ++unmatched;
        continue;
      }
      cv.intervals.push_back(std::move(r));
    }
    cv.folds.push_back(std::move(fold));
  }
  cv.coverage = summarize_coverage(cv.intervals);
  const std::string n = std::to_string(configurations.size());
  if (defaulted > 0)
    cv.notes.push_back(std::to_string(defaulted) + " of " + n +
                       " folds have no nested leave-one-out (fewer than three configurations of their own, or no "
                       "nested fit): their model-form error is the seed calibration's, not cross-validated");
  if (unmatched > 0)
    cv.notes.push_back(std::to_string(unmatched) +
                       " held-out cells have no interval: the interval model does not reproduce the fit's own "
                       "prediction of them (an opt.step() timed alone, host not ahead, is modelled host-ahead by "
                       "analysis/calibration/intervals.hpp), so they are left out of the coverage");
  if (with_priors > 0)
    cv.notes.push_back(std::to_string(with_priors) + " of " + n + " folds' runs do not constrain " + join(priors) +
                       ": their prior ranges widen those folds' intervals");
  return cv;
}

Holdout predict_holdout(const std::vector<MeasuredConfiguration>& configurations, const Calibration& calibration,
                        const IntervalOptions& intervals, const StepFitOptions& options) {
  Holdout h;
  h.calibration = calibration.name;
  std::map<std::string, double> parameters;
  for (const auto& [name, p] : calibration.parameters) parameters[name] = p.value;
  h.rows = compare_predictions(configurations, parameters, options);
  h.summary = summarize(h.rows);
  h.intervals = predict_with_intervals(configurations, calibration, intervals, options);
  h.coverage = summarize_coverage(h.intervals);
  return h;
}

std::string holdout_text(const Holdout& h) {
  return prediction_rows_text("predicted with calibration '" + h.calibration + "' (not fitted on these runs)", h.rows) +
         error_summary_text("summary", h.summary) + "# 90 % intervals\n" + interval_rows_table(h.intervals) + "\n" +
         coverage_table(h.coverage);
}

json to_json(const Holdout& h) {
  json out = {{"calibration", h.calibration},
              {"predicted", json::array()},
              {"predicted_summary", json::array()},
              {"predicted_intervals", json::array()},
              {"coverage_summary", json::array()}};
  for (const auto& r : h.rows) out["predicted"].push_back(to_json(r));
  for (const auto& s : h.summary) out["predicted_summary"].push_back(to_json(s));
  for (const auto& r : h.intervals) out["predicted_intervals"].push_back(to_json(r));
  for (const auto& s : h.coverage) out["coverage_summary"].push_back(to_json(s));
  return out;
}

const IntervalRow* interval_of(const CrossValidation& cv, const PredictionRow& row) {
  for (const auto& r : cv.intervals)
    if (r.row.configuration == row.configuration && r.row.metric == row.metric) return &r;
  return nullptr;
}

std::string prediction_rows_text(const std::string& title, const std::vector<PredictionRow>& rows,
                                 const CrossValidation* cv) {
  std::string out = "# " + title + "\n";
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-56s %-22s %12s %12s %9s", "configuration", "metric", "measured", "predicted",
                "error %");
  out += buf;
  if (cv) out += "  ± 90 %    covered";
  out += "\n";
  for (const auto& r : rows) {
    std::snprintf(buf, sizeof buf, "%-56s %-22s %12.4g %12.4g %+9.2f", r.configuration.c_str(), r.metric.c_str(),
                  r.measured, r.predicted, r.error_pct);
    out += buf;
    if (cv) {
      const IntervalRow* iv = interval_of(*cv, r);
      std::snprintf(buf, sizeof buf, "  %-10s %-7s", iv ? format("%.4g", iv->interval.half_width()).c_str() : "-",
                    iv ? (iv->covered() ? "yes" : "no") : "-");
      out += buf;
    }
    out += r.fitted ? "\n" : "  (not fitted)\n";
  }
  return out;
}

std::string error_summary_text(const std::string& title, const std::vector<MetricSummary>& summary) {
  std::string out = "# " + title + "\n";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-22s %6s %16s %15s\n", "metric", "cells", "mean |error| %", "max |error| %");
  out += buf;
  for (const auto& s : summary) {
    std::snprintf(buf, sizeof buf, "%-22s %6d %16.2f %15.2f\n", s.metric.c_str(), s.count, s.mean_abs_error_pct,
                  s.max_abs_error_pct);
    out += buf;
  }
  return out;
}

json to_json(const CrossValidationFold& f) {
  return {{"configuration", f.configuration},
          {"fitted_configurations", f.fitted_configurations},
          {"model_error_source", f.nested() ? "nested leave-one-out" : "default (the seed calibration's)"},
          {"model_error_configurations", f.model_error_configurations},
          {"priors", f.priors.empty() ? std::string() : join({f.priors.begin(), f.priors.end()})}};
}

json to_json(const CrossValidation& cv) {
  json rows = json::array(), coverage = json::array(), folds = json::array();
  for (const auto& r : cv.rows) {
    json j = to_json(r);
    if (const IntervalRow* iv = interval_of(cv, r)) {
      j["predicted_lo"] = iv->interval.lo;
      j["predicted_hi"] = iv->interval.hi;
      j["half_width_pct"] = iv->half_width_pct();
      j["covered"] = iv->covered();
    }
    rows.push_back(std::move(j));
  }
  json summary = json::array();
  for (const auto& s : summarize(cv.rows)) summary.push_back(to_json(s));
  for (const auto& s : cv.coverage) coverage.push_back(to_json(s));
  for (const auto& f : cv.folds) folds.push_back(to_json(f));
  return {
      {"leave_one_out", rows}, {"leave_one_out_summary", summary}, {"coverage_summary", coverage}, {"folds", folds}};
}

std::string leave_one_out_text(const CrossValidation& cv, const std::vector<PredictionRow>& in_sample, bool intervals) {
  std::string out;
  if (!in_sample.empty()) {
    out += prediction_rows_text("in-sample (fitted on all selected configurations)", in_sample);
    out += error_summary_text("in-sample summary", summarize(in_sample));
  }
  out += prediction_rows_text("leave-one-configuration-out (each configuration predicted by a fit on the others)", cv.rows,
                              intervals ? &cv : nullptr);
  out += error_summary_text("leave-one-out summary", summarize(cv.rows));
  if (intervals && cv.coverage.empty()) out += "# no held-out cell has a 90 % interval (stderr says why)\n";
  if (!cv.coverage.empty()) out += "# 90 % intervals of the held-out cells (each fold's own calibration)\n" + coverage_table(cv.coverage);
  return out;
}

nlohmann::json leave_one_out_json(const CrossValidation& cv, const std::vector<PredictionRow>& in_sample) {
  nlohmann::json result = to_json(cv);
  if (!in_sample.empty()) {
    result["in_sample"] = nlohmann::json::array();
    for (const auto& r : in_sample) result["in_sample"].push_back(to_json(r));
    result["in_sample_summary"] = nlohmann::json::array();
    for (const auto& s : summarize(in_sample)) result["in_sample_summary"].push_back(to_json(s));
  }
  return result;
}

}  // namespace dionsim::analysis
