#pragma once
// Predictions of measured runs with their 90 % intervals (analysis/calibration/intervals.hpp), the
// model-form error a calibration carries (its own leave-one-configuration-out), and the
// extrapolation check of `dionsim validate --extrapolate`: fit on the runs of the smaller node
// counts, predict those of the largest, and count how often the intervals cover the measurement.
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "analysis/calibration/fit_calibration.hpp"
#include "analysis/calibration/intervals.hpp"
#include "analysis/calibration/step_fit.hpp"
#include "analysis/measured/measurements.hpp"

namespace dionsim::analysis {

// (b) Relative rms of (predicted − measured) / measured per whatif metric over a leave-one-
// configuration-out of `configurations` (a fold whose fit fails — too few metrics for its free
// parameters — is skipped). Empty with fewer than three configurations or when no fold fits.
struct ModelError {
  std::map<std::string, double> relative_rms;  // by whatif metric
  int configurations = 0;                       // folds that fitted
};
[[nodiscard]] ModelError leave_one_out_model_error(const std::vector<MeasuredConfiguration>& configurations,
                                                   const StepFitOptions& options = {});
void attach_model_error(Calibration& calibration, const ModelError& error);

// (b) beyond the fitted node counts: the calibration's own node-count extrapolation. With runs of
// at least two node counts, fit on all but the largest and predict the largest, the inter-node
// parameters (nic_efficiency, alltoall_inter_efficiency) taken from `fitted` (the fit of all of
// `configurations`): the link is the node-scaling term's and the prior's to cover, so what remains
// is the rest of the model's error one node count further (kernels beside a longer all-to-all,
// shards of another world). Relative rms per whatif metric; empty with one node count or when the
// inner fit fails.
[[nodiscard]] ModelError node_count_model_error(const std::vector<MeasuredConfiguration>& configurations,
                                                const std::map<std::string, double>& fitted,
                                                const StepFitOptions& options = {});

// A measured metric predicted with its interval.
struct IntervalRow {
  PredictionRow row;
  Interval interval;
  [[nodiscard]] bool covered() const { return interval.covers(row.measured); }
  [[nodiscard]] double half_width_pct() const;  // of the predicted value
};
// Every selected configuration predicted with `calibration` (its parameters, covariance and
// model-form error), for the measured metrics that have intervals.
[[nodiscard]] std::vector<IntervalRow> predict_with_intervals(const std::vector<MeasuredConfiguration>& configurations,
                                                              const Calibration& calibration,
                                                              const IntervalOptions& intervals,
                                                              const StepFitOptions& options = {});

// The difference a − b of a metric between two measured configurations of one node set (same
// GPU, nodes, GPUs per node, model, optimizer, NS, fraction; another scope), predicted with its
// interval (intervals.hpp: correlated sources cancel).
struct DifferenceRow {
  std::string a, b;  // configuration labels
  std::string scope_a, scope_b;
  int nodes = 0;
  std::string metric;  // measured name
  double measured = 0;
  Interval interval;
  [[nodiscard]] bool covered() const { return interval.covers(measured); }
};
[[nodiscard]] std::vector<DifferenceRow> predict_differences(const std::vector<MeasuredConfiguration>& configurations,
                                                             const Calibration& calibration,
                                                             const IntervalOptions& intervals,
                                                             const StepFitOptions& options = {});

struct CoverageSummary {
  std::string metric;  // "all" for every row
  int count = 0, covered = 0;
  double mean_abs_error_pct = 0, mean_half_width_pct = 0;
};
[[nodiscard]] std::vector<CoverageSummary> summarize_coverage(const std::vector<IntervalRow>& rows);

struct Extrapolation {
  std::vector<int> fit_nodes;  // node counts of the fitted runs
  int predicted_nodes = 0;
  Calibration calibration;     // fitted on those runs, with their leave-one-out model error
  ModelError beyond;           // node_count_model_error of those runs (empty with one node count)
  std::vector<IntervalRow> rows;
  std::vector<DifferenceRow> differences;
  std::vector<CoverageSummary> summary;
};
// InputError when the selection has a single node count (nothing to extrapolate to).
[[nodiscard]] Extrapolation extrapolate(const std::vector<MeasuredConfiguration>& configurations,
                                        const IntervalOptions& intervals, const StepFitOptions& options = {});

[[nodiscard]] std::string interval_rows_table(const std::vector<IntervalRow>& rows);
[[nodiscard]] std::string differences_table(const std::vector<DifferenceRow>& rows);
[[nodiscard]] std::string coverage_table(const std::vector<CoverageSummary>& summary);
[[nodiscard]] nlohmann::json to_json(const IntervalRow& row);
[[nodiscard]] nlohmann::json to_json(const DifferenceRow& row);
[[nodiscard]] nlohmann::json to_json(const CoverageSummary& summary);
[[nodiscard]] nlohmann::json to_json(const Extrapolation& extrapolation);
// validate --extrapolate's tables: the held-out cells, the coverage per metric, the differences.
[[nodiscard]] std::string extrapolation_text(const Extrapolation& extrapolation);

}  // namespace dionsim::analysis
