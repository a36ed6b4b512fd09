#pragma once
// Step-model calibration: choose the free parameters of `dionsim whatif`'s step model so that its
// predicted metrics match measured runs (a measurement CSV or the database's measured runs), by
// weighted least squares on relative residuals (Levenberg–Marquardt, bounded, central-difference
// Jacobian through the simulator — one prediction is ~ms), with the parameter covariance
// σ̂² (JᵀJ)⁻¹ (fit.hpp's convention). Leave-one-configuration-out validation on top.
//
// Parameters (every one physical and bounded; names are those of the calibration file, which
// kernel_calibration_from_parameters (parameters.hpp) applies to whatif exactly as the fit did):
// (the table with bounds, starts and where each lands: analysis/calibration/parameters.cpp)
//   fwd_bwd_ms                 forward+backward compute per step          [1, 1e5] ms
//   ns_gemm_efficiency         NS GEMM throughput / dense bf16 peak        (0, 1]
//   hbm_efficiency.<class>     HBM efficiency of a non-GEMM kernel class   (0, 1]; classes used by
//                              the same set of scopes share one fitted value (they cannot be told
//                              apart); groups that the data separates only weakly get large standard
//                              errors with strong correlations (the covariance says which combinations
//                              are determined)
//   nic_efficiency             achieved / nominal NIC bandwidth (FSDP rings, all-to-all base)  (0, 1]
//   alltoall_intra_efficiency  one-node all-to-all: achieved / the fabric's NVLink time   (0, 1]
//   alltoall_inter_efficiency  multi-node all-to-all: achieved / the fabric's NIC time    (0, 1]
//   alltoall_latency_us        fixed cost per all-to-all                  [0, 5000] µs
// and fixed: launch_gap_us = 0 (the plan counts eager launches, ~700 per step, where the
// measured compiled reference launched 60–117; the kernel times already contain their gaps).
// A parameter the selected runs do not constrain (e.g. the inter-node ones without a multi-node
// run) is left out of the fit and of the calibration (whatif keeps its preset value).
#include <Eigen/Dense>
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "analysis/calibration/fit_calibration.hpp"
#include "analysis/measured/measurements.hpp"
#include "optimizer/inventory.hpp"
#include "sim/whatif.hpp"
#include "sim/whatif_calibration.hpp"

namespace dionsim::analysis {


// measured metric -> whatif metric; `fitted` ones enter the residuals, the others are compared only.
struct StepMetric {
  std::string measured;
  std::string predicted;
  bool fitted = true;
};
[[nodiscard]] const std::vector<StepMetric>& step_metrics();
// The step_metrics() entry of a measured metric name; nullptr when it is none.
[[nodiscard]] const StepMetric* find_step_metric(const std::string& measured);
// The whatif metric a configuration's measured metric is compared with: `metric.predicted`, except
// the idle share of a run that measured the collective-stream window (`opt_stream_window_ms`).
[[nodiscard]] const std::string& predicted_metric(const MeasuredConfiguration& configuration,
                                                  const StepMetric& metric);

// "key=value" filters on a configuration's columns (to_json of MeasuredConfiguration): conditions
// on one key are alternatives (OR), different keys must all hold (AND). UsageError for a bad
// condition, InputError when nothing matches (naming `source`, the CSV or database read, and the
// values its configurations have for the keys asked about).
[[nodiscard]] std::vector<MeasuredConfiguration> select_configurations(const std::vector<MeasuredConfiguration>& all,
                                                                       const std::vector<std::string>& where,
                                                                       const std::string& source = "");



struct StepFitOptions {
  std::int64_t tokens_per_gpu = 16384;
  int max_iterations = 100;
  std::string fabric;  // fabric preset the runs are modelled on; "" = their GPU's default (gpu_preset_of)
  // Measured parameters held at their values (not fitted) under the fitted ones: what traces,
  // nccl-tests logs or the anchors gave (e.g. ns_gemm_isolated_tflops, nccl_all_to_all_w8_algbw_GBps).
  // A fitted parameter they make irrelevant (ns_gemm_efficiency beside a traced NS rate) no
  // longer moves any residual and is left out as unconstrained.
  std::map<std::string, double> fixed;
};

struct StepFitResult {
  std::string hardware;            // the GPU preset ("h100-sxm")
  std::string hardware_label;      // as measured ("H100 SXM")
  std::string fabric;              // the fabric preset the runs were modelled on ("h100-ndr400")
  std::vector<std::string> ns_variants;  // of the runs; with several, kernel rates are "<name>@<variant>"
  std::vector<std::string> names;  // fitted parameters (groups: "hbm_efficiency.a+b")
  // The calibration-file parameters each fitted one sets (a group: one per kernel class).
  std::vector<std::vector<std::string>> sets;
  std::vector<std::string> units;
  Eigen::VectorXd values, std_errors;
  Eigen::MatrixXd covariance;
  std::vector<std::string> at_bound;         // fitted parameters that ended on a bound
  std::vector<std::string> unconstrained;    // left out: the data does not constrain them
  std::map<std::string, double> parameters;  // what the calibration file holds (groups expanded)
  int residuals = 0;
  int iterations = 0;
  bool converged = false;
  double rms_relative_error = 0;
};
// InputError for configurations of different GPUs, an unknown GPU/model/NS variant, or fewer
// fitted metrics than free parameters.
[[nodiscard]] StepFitResult fit_step_model(const std::vector<MeasuredConfiguration>& configurations,
                                           const StepFitOptions& options = {});

// The selection split by GPU (gpu_preset_of): the configurations the step model can be fitted on,
// per GPU in order of first appearance, and the others with the reason — a GPU with no preset, a
// model that is no known inventory (the seed's B200 rows: mixformer's inventory is not public), an
// NS variant, optimizer or scope that does not parse, no metric the step model fits.
struct SkippedConfiguration {
  std::string configuration;  // MeasurementConfig::label()
  std::string hardware;       // as measured
  std::string reason;         // the error that refused it
};
struct HardwareRuns {
  std::string hardware;  // GPU preset ("h100-sxm")
  std::vector<MeasuredConfiguration> configurations;
};
struct RunsByHardware {
  std::vector<HardwareRuns> hardware;
  std::vector<SkippedConfiguration> skipped;
};
[[nodiscard]] RunsByHardware split_by_hardware(const std::vector<MeasuredConfiguration>& configurations);

// The fitted calibration (schema 3, covariance of the fitted parameters expanded to the classes).
[[nodiscard]] Calibration calibration_from_step_fit(const StepFitResult& fit, const std::string& name,
                                                    const std::vector<std::string>& sources, const std::string& tool);

struct PredictionRow;
// One step-model calibration per GPU of the selection (`dionsim calibrate` with or without
// --where): split_by_hardware, then fit_step_model on each GPU's runs. A GPU whose fit is refused
// (e.g. fewer fitted metrics than free parameters) joins the skipped list with the reason.
// Calibrations are named `name` when the selection names one GPU, else "<name>-<gpu preset>".
// InputError when nothing can be fitted (naming the first configuration skipped and why).
// `measured`: calibrations of the same invocation's traces, nccl-tests logs or anchors; each joins
// the fit of its GPU — its parameters held at their measured values in the fit (StepFitOptions::fixed)
// and written into that GPU's calibration beside the fitted ones; InputError for one of a GPU
// with no selected run, or a parameter two inputs both measured.
struct HardwareCalibration {
  StepFitResult fit;
  Calibration calibration;
  std::vector<PredictionRow> in_sample;
};
struct StepCalibrations {
  std::vector<HardwareCalibration> fitted;
  std::vector<SkippedConfiguration> skipped;
};
[[nodiscard]] StepCalibrations calibrate_by_hardware(const std::vector<MeasuredConfiguration>& selected,
                                                     const std::string& name, const std::vector<std::string>& sources,
                                                     const std::string& tool, const StepFitOptions& options = {},
                                                     const std::vector<Calibration>& measured = {});
[[nodiscard]] nlohmann::json to_json(const SkippedConfiguration& skipped);
// What the fit predicts measured configurations with: the GPU preset, and per configuration the
// whatif configuration before any calibration (in the order given) and the model inventories.
struct StepModelSetup {
  std::string hardware, hardware_label;
  sim::Hardware hw;
  std::vector<sim::WhatifConfig> configs;
  std::map<std::string, opt::Inventory> inventories;  // by model
  // Of each configuration: an optimizer step timed alone by the host (opt.step() of a benchmark),
  // which the model runs with the host not ahead.
  std::vector<bool> host_behind;
};
[[nodiscard]] StepModelSetup step_model_setup(const std::vector<MeasuredConfiguration>& configurations,
                                              const StepFitOptions& options = {});

// A configuration of the setup as the fit predicts it with `calibration`: its step parameters
// applied, the host not ahead for a step timed alone, an all-to-all measured at its world replayed.
[[nodiscard]] sim::WhatifConfig as_fitted(sim::WhatifConfig config, bool host_behind,
                                          const sim::KernelCalibration& calibration);

struct PredictionRow {
  std::string configuration;  // MeasurementConfig::label()
  std::string scope;
  int nodes = 0;
  std::string metric;  // measured name
  double measured = 0, predicted = 0, error_pct = 0;
  bool fitted = false;  // a metric the fit uses (in-sample) — not whether this row was in the fit
};
// whatif's predictions with these parameters (a calibration's parameter map) vs the measurements.
[[nodiscard]] std::vector<PredictionRow> compare_predictions(const std::vector<MeasuredConfiguration>& configurations,
                                                             const std::map<std::string, double>& parameters,
                                                             const StepFitOptions& options = {});

struct MetricSummary {
  std::string metric;
  int count = 0;
  double mean_abs_error_pct = 0, max_abs_error_pct = 0;
};
[[nodiscard]] std::vector<MetricSummary> summarize(const std::vector<PredictionRow>& rows);

// Leave one configuration out: fit on the others, predict it. Rows of every held-out configuration.
[[nodiscard]] std::vector<PredictionRow> leave_one_out(const std::vector<MeasuredConfiguration>& configurations,
                                                       const StepFitOptions& options = {});

// How a validation's predictions were made: leave-one-out fits, a given calibration unfitted, or
// a fit on the smaller node counts predicting the largest (validate --extrapolate).
enum class ValidationKind { leave_one_out, calibration, extrapolation };

[[nodiscard]] nlohmann::json to_json(const PredictionRow& row);
[[nodiscard]] nlohmann::json to_json(const MetricSummary& summary);

}  // namespace dionsim::analysis
