#pragma once
// What `dionsim calibrate` reads and prints around the fits: the kind of a measured input (by its
// content) and the fixed-width tables of its results (each line ends in '\n').
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/calibration/fit_calibration.hpp"
#include "analysis/calibration/step_fit.hpp"

namespace dionsim::analysis {

enum class InputKind { trace, measurements, anchors, nccl_tests };

// By content first: gzip or JSON → trace; CSV by its first header column; nccl-tests by its banner;
// a file named .json/.json.gz is a trace (its reader says what is wrong). IoError when it cannot be
// opened, InputError for anything else.
[[nodiscard]] InputKind detect_input_kind(const std::string& path);

// The calibrations of traces (all of them together, one per rank), nccl-tests logs and the
// anchor CSV given beside a measurement CSV: each is fitted on its own (fit_calibration.hpp) and
// then joins the step-model fit of its GPU (calibrate_by_hardware). Traces of several GPUs are
// refused (InputError naming the trace).
[[nodiscard]] std::vector<Calibration> calibrations_of_inputs(const std::vector<std::string>& files,
                                                              const std::string& tool);

// The fitted parameters with their standard errors and units.
[[nodiscard]] std::string calibration_table(const Calibration& c);
// The in-sample comparison of a step-model fit: whatif with the fitted parameters vs the runs.
[[nodiscard]] std::string in_sample_table(const std::vector<PredictionRow>& rows);
// The configurations calibrate could not fit, with the reason.
[[nodiscard]] std::string skipped_table(const std::vector<SkippedConfiguration>& skipped);
// A titled table of JSON rows (objects holding every column): floats %.3f, integers, else JSON.
[[nodiscard]] std::string json_rows_table(const std::string& title, const nlohmann::json& rows,
                                          const std::vector<std::string>& columns);
// --dump-metrics of traces: dump_metrics()'s per-rank table, and the across-ranks one when present.
[[nodiscard]] std::string trace_metrics_tables(nlohmann::json dumped);

}  // namespace dionsim::analysis
