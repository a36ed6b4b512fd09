// dionsim calibrate: measured inputs → extracted metrics (--dump-metrics) or fitted parameters
// (table, --json, --out CALIB.json). What is fitted depends on the input: the H200 anchor table and
// nccl-tests output give collective latency/bandwidth (and GEMM throughput for the anchors);
// profiler traces give NS GEMM throughput and all-to-all kernel transfer; a measurement CSV or the
// database's measured runs (--db without --measured) fit the what-if step model
// (analysis/calibration/step_fit.hpp), selected with --where. --db also stores the calibration (and the CSV's
// measured configurations) in the database.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "analysis/records/stored_runs.hpp"
#include "analysis/calibration/calibrate_io.hpp"
#include "analysis/calibration/fit_calibration.hpp"
#include "analysis/measured/kineto.hpp"
#include "analysis/measured/measurements.hpp"
#include "analysis/calibration/extrapolation.hpp"
#include "analysis/calibration/step_fit.hpp"
#include "analysis/store/store.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "experiments/cli.hpp"
#include "experiments/record.hpp"

namespace dionsim::cli {

namespace {

using nlohmann::json;
using analysis::InputKind;

void print(const std::string& text) { std::fputs(text.c_str(), stdout); }

}  // namespace

int run_calibrate(std::span<const std::string> args) {
  Command cmd(
      "calibrate",
      "--measured FILE [--measured FILE …] | --db DB  [--where KEY=VALUE …] [--dump-metrics] [--out CALIB.json] "
      "[--name NAME]",
      "Reads measured runs — PyTorch-profiler traces (Kineto JSON, optionally gzipped; one per rank), a "
      "measurement CSV, the H200 anchor CSV or nccl-tests output — and prints what it extracted "
      "(--dump-metrics) or fits model parameters with standard errors (table, --json, or --out FILE).");
  std::vector<std::string> measured, where;
  std::string out, name;
  bool dump = false;
  cmd.options().add_options()(
      "measured", po::value(&measured)->value_name("FILE"),
      "trace (.json/.json.gz), measurement CSV, anchor CSV or nccl-tests stdout; repeatable for traces (one per rank)")(
      "dump-metrics", po::bool_switch(&dump),
      "print the metrics extracted per rank and step (traces), per configuration (CSV) or per row (nccl-tests)")(
      "out", po::value(&out)->value_name("CALIB.json"), "write the fitted calibration to this file")(
      "name", po::value(&name)->value_name("NAME"), "name of the calibration (default: the first input's file name)")(
      "where", po::value(&where)->value_name("KEY=VALUE"),
      "select measured configurations (CSV or --db) by a column, e.g. run=1node-real-step; repeatable: one key's "
      "values are alternatives, different keys must all match");
  if (!cmd.parse(args)) return 0;
  const auto& common = cmd.common();
  if (measured.empty() && common.db.empty())
    throw UsageError("calibrate: --measured FILE or --db DB is required (see 'dionsim calibrate --help')");
  if (dump && !out.empty()) throw UsageError("calibrate: --dump-metrics and --out are exclusive");
  // Checked before anything is read or fitted: an output that is one of the inputs (or the
  // database) would destroy it; a folder or a device cannot be replaced by a file.
  if (!out.empty()) {
    std::vector<std::string> inputs = measured;
    if (!common.db.empty()) inputs.push_back(common.db);
    require_output_file(out, "--out", inputs);
  }
  const std::string tool = "dionsim " DIONSIM_VERSION;
  std::optional<analysis::Database> db;
  if (!common.db.empty()) db = analysis::Database::open(common.db);

  // The step-model fit: a measurement CSV, or the database's measured runs.
  const bool from_db = measured.empty();
  if (from_db || analysis::detect_input_kind(measured.front()) == InputKind::measurements) {
    if (!from_db && measured.size() > 1) throw_bad_usage("--measured", measured[1], "a single measurement CSV");
    const auto all = from_db ? analysis::measured_configurations_from_db(*db)
                             : analysis::group_configurations(analysis::read_measurement_csv(measured.front()));
    const auto selected = analysis::select_configurations(all, where);
    if (dump) {
      json dumped = json::array();
      for (const auto& g : selected) {
        dumped.push_back(analysis::to_json(g));
        if (common.json) continue;
        std::printf("%s:", g.config.label().c_str());
        for (const auto& [metric, value] : g.metrics) std::printf(" %s=%g", metric.c_str(), value);
        std::printf("\n");
      }
      if (common.json) print_json(dumped);
      return 0;
    }
    const std::string source = from_db ? common.db : measured.front();
    if (name.empty()) name = std::filesystem::path(source).filename().string();
    log(common, "fitting the step model to " + std::to_string(selected.size()) + " measured configurations");
    const auto fit = analysis::fit_step_model(selected);
    for (const auto& p : fit.unconstrained)
      log(common, p + ": not constrained by the selected runs; left out (whatif keeps its preset)");
    for (const auto& p : fit.at_bound) log(common, p + ": ended on its bound (held there; stderr 0)");
    auto sources = std::vector<std::string>{source};
    for (const auto& w : where) sources.push_back("where " + w);
    auto calibration = analysis::calibration_from_step_fit(fit, name, sources, tool);
    // The model-form error the intervals use (analysis/calibration/intervals.hpp): its own leave-one-out.
    analysis::attach_model_error(calibration, analysis::leave_one_out_model_error(selected));
    if (calibration.model_error.empty()) log(common, "too few configurations for a leave-one-out: no model_error stored");
    const auto in_sample = analysis::compare_predictions(selected, fit.parameters);
    if (db && !from_db)
      for (const auto& g : all) db->store(analysis::measured_record(g), analysis::OnExisting::keep);
    save_calibration(common, db ? &*db : nullptr, calibration, name, sources, out);
    if (common.json) {
      json rows = json::array();
      for (const auto& r : in_sample) rows.push_back(analysis::to_json(r));
      print_json({{"calibration", analysis::to_json(calibration)}, {"in_sample", rows}});
    } else {
      print(analysis::calibration_table(calibration));
      print(analysis::in_sample_table(in_sample));
    }
    return 0;
  }
  if (!where.empty()) throw UsageError("calibrate: --where applies to a measurement CSV or --db only");
  const InputKind kind = analysis::detect_input_kind(measured.front());
  for (const auto& file : measured) {
    if (analysis::detect_input_kind(file) != kind)
      throw_bad_usage("--measured", file, "inputs of one kind (all traces or one file)");
  }
  if (kind != InputKind::trace && measured.size() > 1)
    throw_bad_usage("--measured", measured[1], "a single non-trace file");
  if (name.empty()) name = std::filesystem::path(measured.front()).filename().string();
  const bool table = !common.json;

  json dumped = json::array();
  analysis::Calibration calibration;
  if (kind == InputKind::trace) {
    std::vector<analysis::KinetoTrace> traces;
    for (const auto& file : measured) traces.push_back(analysis::read_kineto_trace(file));
    dumped = analysis::dump_metrics(traces);
    if (dump && table) print(analysis::trace_metrics_tables(dumped));
    if (!dump) calibration = analysis::calibration_from_traces(traces, name, measured, tool);
  } else if (kind == InputKind::nccl_tests) {
    const auto runs = analysis::read_nccl_tests_output(measured.front());
    for (const auto& run : runs) {
      dumped.push_back(analysis::to_json(run));
      const std::string title =
          run.op + ", " + std::to_string(run.world) + " ranks on " + std::to_string(run.nodes) + " nodes";
      if (dump && table)
        print(analysis::json_rows_table(title, dumped.back()["rows"], {"bytes", "time_us", "algbw_GBps", "busbw_GBps"}));
    }
    if (!dump) calibration = analysis::calibration_from_nccl_tests(runs, name, measured.front(), tool);
  } else {
    if (dump) throw UsageError("calibrate: --dump-metrics does not apply to the anchor CSV (it is fitted directly)");
    const auto fits = analysis::fit_anchors(analysis::read_anchors_csv(measured.front()));
    calibration = analysis::calibration_from_anchors(fits, name, measured.front(), tool);
  }
  if (dump) {
    if (!table) print_json(dumped);
    return 0;
  }
  save_calibration(common, db ? &*db : nullptr, calibration, name, measured, out);
  if (table)
    print(analysis::calibration_table(calibration));
  else
    print_json(analysis::to_json(calibration));
  return 0;
}

}  // namespace dionsim::cli
