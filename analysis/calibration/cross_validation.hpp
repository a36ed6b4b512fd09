#pragma once
// Cross-validated intervals: `dionsim validate`'s leave-one-configuration-out with a 90 % interval
// on every held-out cell. Fold k fits the step model on every configuration but k (with its
// covariance, as `dionsim calibrate` does) and predicts k through predict_with_intervals
// (extrapolation.hpp, intervals.hpp): parameter covariance, the fold's model-form error, the
// fabric spread, and a prior for every parameter the fold's runs do not constrain.
//
// The fold's model-form error is a nested leave-one-out over the fold's own configurations (what
// `calibrate` stores with a calibration: leave_one_out_model_error), so nothing the fold predicts
// enters its own interval. fit(all \ {k, j}) serves both fold k (predicting j) and fold j
// (predicting k), so n configurations cost n + n(n−1)/2 fits, not n². A fold with fewer than three
// configurations of its own, or whose nested fits all fail, has no such estimate and takes
// default_model_error() — the seed calibration's leave-one-out, which on the seed's own runs has
// seen the held-out configuration: such a fold is marked (CrossValidationFold::model_error_source)
// and counted in the notes.
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "analysis/calibration/extrapolation.hpp"
#include "analysis/calibration/intervals.hpp"
#include "analysis/calibration/step_fit.hpp"
#include "analysis/measured/measurements.hpp"

namespace dionsim::analysis {

struct CrossValidationFold {
  std::string configuration;                  // held out (MeasurementConfig::label())
  int fitted_configurations = 0;              // the fold's calibration was fitted on these many
  std::map<std::string, double> model_error;  // whatif metric -> relative rms; empty = the default
  int model_error_configurations = 0;         // nested folds that fitted (0: the default was used)
  std::vector<std::string> priors;            // parameters the fold's runs do not constrain (prior ranges)
  [[nodiscard]] bool nested() const { return !model_error.empty(); }
};

struct CrossValidation {
  std::vector<PredictionRow> rows;  // every held-out cell, as leave_one_out() has them
  // The held-out cells of metrics with an interval, centred on the cell's prediction in `rows`
  // (a cell the interval model predicts differently gets none, and a note says how many).
  std::vector<IntervalRow> intervals;
  std::vector<CoverageSummary> coverage;  // summarize_coverage(intervals)
  std::vector<CrossValidationFold> folds;
  std::vector<std::string> notes;  // what was widened or defaulted, for stderr
};

// InputError for fewer than two configurations or a fold whose fit is refused (as leave_one_out).
[[nodiscard]] CrossValidation cross_validate(const std::vector<MeasuredConfiguration>& configurations,
                                             const IntervalOptions& intervals, const StepFitOptions& options = {});

// validate --calibration: a given calibration's predictions of runs it was not fitted on, with
// their intervals (predict_with_intervals) and the coverage.
struct Holdout {
  std::string calibration;  // its name
  std::vector<PredictionRow> rows;
  std::vector<MetricSummary> summary;
  std::vector<IntervalRow> intervals;
  std::vector<CoverageSummary> coverage;
};
[[nodiscard]] Holdout predict_holdout(const std::vector<MeasuredConfiguration>& configurations,
                                      const Calibration& calibration, const IntervalOptions& intervals,
                                      const StepFitOptions& options = {});
// The tables validate prints; {"calibration", "predicted", "predicted_summary",
// "predicted_intervals", "coverage_summary"}.
[[nodiscard]] std::string holdout_text(const Holdout& holdout);
[[nodiscard]] nlohmann::json to_json(const Holdout& holdout);

// The interval of a held-out cell (nullptr: its metric has none).
[[nodiscard]] const IntervalRow* interval_of(const CrossValidation& cv, const PredictionRow& row);

// Text tables (stdout): predicted vs measured per cell, with "± half" and covered where the cell
// has an interval; the summary of |error| per metric.
[[nodiscard]] std::string prediction_rows_text(const std::string& title, const std::vector<PredictionRow>& rows,
                                               const CrossValidation* cv = nullptr);
[[nodiscard]] std::string error_summary_text(const std::string& title, const std::vector<MetricSummary>& summary);

// {"leave_one_out": rows (with predicted_lo/_hi, half_width_pct, covered where there is an
// interval), "leave_one_out_summary", "coverage_summary", "folds"}.
[[nodiscard]] nlohmann::json to_json(const CrossValidation& cv);
// validate's default output: the in-sample rows and summary first when `in_sample` is not empty,
// then the held-out cells (with intervals unless `intervals` is false), their summary and the
// intervals' coverage. JSON: to_json(cv) plus "in_sample" and "in_sample_summary".
[[nodiscard]] std::string leave_one_out_text(const CrossValidation& cv, const std::vector<PredictionRow>& in_sample,
                                             bool intervals);
[[nodiscard]] nlohmann::json leave_one_out_json(const CrossValidation& cv, const std::vector<PredictionRow>& in_sample);
[[nodiscard]] nlohmann::json to_json(const CrossValidationFold& fold);

}  // namespace dionsim::analysis
