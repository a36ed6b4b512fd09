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
#include <set>

#include "analysis/records/stored_runs.hpp"
#include "analysis/calibration/calibrate_io.hpp"
#include "analysis/calibration/collective_fit.hpp"
#include "analysis/calibration/fit_calibration.hpp"
#include "analysis/measured/kineto.hpp"
#include "analysis/measured/measurements.hpp"
#include "analysis/calibration/extrapolation.hpp"
#include "analysis/calibration/step_fit.hpp"
#include "analysis/store/store.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/table.hpp"
#include "experiments/cli.hpp"
#include "experiments/record.hpp"

namespace dionsim::cli {

namespace {

using nlohmann::json;
using analysis::InputKind;

void print(const std::string& text) { std::fputs(text.c_str(), stdout); }

// --csv of a calibration: its parameters, one row each (the JSON's calibration.parameters map),
// then the in-sample rows when there are any (stacked with a "table" column).
std::vector<Table> calibration_tables(const json& calibration, const json& in_sample = json::array()) {
  std::vector<Table> tables{table_from_map("parameters", calibration["parameters"], "parameter")};
  if (!in_sample.empty()) {
    tables.push_back(tables_from_json(in_sample).front());
    tables.back().name = "in_sample";
  }
  return tables;
}

}  // namespace

// --nccl-tests LOG[,LOG…] --fabric F: the collective model fitted to every row of the logs.
static int run_calibrate_collectives(const CommonOptions& common, const std::string& logs, const std::string& fabric_name,
                              std::string name, const std::string& out) {
  if (logs.empty() || fabric_name.empty()) throw UsageError("calibrate: --nccl-tests LOG[,LOG…] and --fabric F go together");
  const auto fabric = topo::preset(fabric_name, "--fabric");
  std::vector<std::string> files;
  std::vector<analysis::CollectiveSample> samples;
  std::set<std::string> nccl_versions;  // what ran the logs, where they say
  for (std::size_t from = 0; from <= logs.size();) {
    const auto to = std::min(logs.find(',', from), logs.size());
    files.push_back(logs.substr(from, to - from));
    if (files.back().empty()) throw_bad_usage("--nccl-tests", logs, "a comma list of nccl-tests logs");
    const auto runs = analysis::read_nccl_tests_output(files.back());
    for (const auto& run : runs)
      if (!run.nccl_version.empty()) nccl_versions.insert(run.nccl_version);
    const auto more = analysis::samples_from_nccl_tests(runs, files.back());
    samples.insert(samples.end(), more.begin(), more.end());
    from = to + 1;
  }
  if (!out.empty()) require_output_file(out, "--out", files);
  if (name.empty()) name = std::filesystem::path(files.front()).filename().string();
  const auto fit = analysis::fit_collective_model(fabric, samples);
  for (const auto& p : fit.unconstrained) log(common, p + ": not constrained by the logs; the preset's value is kept");
  for (const auto& p : fit.undetermined)
    log(common, p + ": not determined by the logs (within 2 standard errors of the preset's value, or moved only "
                    "together with another parameter); the preset's value is kept");
  for (const auto& p : fit.at_bound) log(common, p + ": ended on a bound of its range (its stderr is not meaningful)");
  if (fit.fitted.empty()) {
    // Nothing to write: a calibration holding no parameter would only restate the preset.
    char rms[96];
    std::snprintf(rms, sizeof rms, "rms relative error %.4f", fit.rms_relative_error_before);
    std::string named = files.front();
    if (files.size() > 1) named += " (and " + std::to_string(files.size() - 1) + " more logs)";
    throw InputError(named + ": the logs determine none of the collective model's parameters on " + fabric.name +
                     " (each within 2 standard errors of the preset's value, or not constrained): no calibration "
                     "to write, the preset's values stand (" + rms + " with them). Logs over more sizes, "
                     "collectives or node counts determine more");
  }
  auto calibration = analysis::calibration_from_collective_fit(fit, fabric, name, files, "dionsim " DIONSIM_VERSION);
  if (!nccl_versions.empty()) {
    // The model prices by NCCL 2.28.3's rules; later releases moved Blackwell's constants
    // (docs/simulator.md, "Later NCCL releases"), so a fit to their logs absorbs the difference.
    std::string list;
    bool later = false;
    for (const auto& v : nccl_versions) {
      list += (list.empty() ? "" : ", ") + v;
      later = later || analysis::nccl_version_code(v) >= 22807;
    }
    calibration.method += "; NCCL of the logs: " + list + " (the model follows NCCL 2.28.3's rules)";
    if (later) {
      log(common, "the logs ran NCCL " + list +
                      "; the model follows 2.28.3's rules, and 2.28.7 and later moved some of them (Blackwell's "
                      "Ring/LL128 and NVLS-Tree ceilings, NVLS Tree's network latency; from 2.29.2 the all-to-all's LL "
                      "threshold per p2p part; docs/simulator.md, 'Later NCCL releases'): the fit absorbs the "
                      "difference");
    }
  }
  save_calibration(common, nullptr, calibration, name, files, out);
  if (common.machine()) print_result(common, analysis::to_json(calibration), calibration_tables(analysis::to_json(calibration)));
  else print(analysis::calibration_table(calibration));
  return 0;
}

int run_calibrate(std::span<const std::string> args) {
  Command cmd(
      "calibrate",
      "--measured FILE [--measured FILE …] | --db DB  [--where KEY=VALUE …] [--dump-metrics] [--out CALIB.json] "
      "[--name NAME] | --nccl-tests LOG[,LOG…] --fabric F",
      "Reads measured runs — PyTorch-profiler traces (Kineto JSON, optionally gzipped; one per rank), a "
      "measurement CSV, the H200 anchor CSV or nccl-tests output — and prints what it extracted "
      "(--dump-metrics) or fits model parameters with standard errors (table, --json, or --out FILE).");
  std::vector<std::string> measured, where;
  std::string out, name, nccl_logs, fabric;
  bool dump = false;
  cmd.options().add_options()(
      "measured", po::value(&measured)->value_name("FILE"),
      "trace (.json/.json.gz), measurement CSV, anchor CSV or nccl-tests stdout; repeatable for traces (one per rank)")(
      "dump-metrics", po::bool_switch(&dump),
      "print the metrics extracted per rank and step (traces), per configuration (CSV) or per row (nccl-tests)")(
      "out", po::value(&out)->value_name("CALIB.json|DIR/"),
      "write the fitted calibration to this file; a folder (an existing one, or ending in '/'): one <gpu>.json per "
      "GPU of the selection")(
      "name", po::value(&name)->value_name("NAME"), "name of the calibration (default: the first input's file name)")(
      "where", po::value(&where)->value_name("KEY=VALUE"),
      "select measured configurations (CSV or --db) by a column, e.g. run=1node-real-step; repeatable: one key's "
      "values are alternatives, different keys must all match")(
      "nccl-tests", po::value(&nccl_logs)->value_name("LOG[,LOG…]"),
      "fit the collective model's fabric parameters to nccl-tests logs of your cluster (with --fabric)")(
      "fabric", po::value(&fabric)->value_name("F"), "the fabric preset the --nccl-tests fit starts from");
  cmd.offer_csv();
  if (!cmd.parse(args)) return 0;
  const auto& common = cmd.common();
  if (!nccl_logs.empty() || !fabric.empty()) return run_calibrate_collectives(common, nccl_logs, fabric, name, out);
  if (measured.empty() && common.db.empty())
    throw UsageError("calibrate: --measured FILE or --db DB is required (see 'dionsim calibrate --help')");
  if (dump && !out.empty()) throw UsageError("calibrate: --dump-metrics and --out are exclusive");
  for (const auto& m : measured)
    if (m.empty()) throw_bad_usage("--measured", "", "a file (a trace, a measurement or anchor CSV, an nccl-tests log)");
  // Checked before anything is read or fitted: an output that is one of the inputs (or the
  // database) would destroy it; a folder or a device cannot be replaced by a file.
  if (!out.empty() && !out.ends_with('/') && !std::filesystem::is_directory(out)) {
    std::vector<std::string> inputs = measured;
    if (!common.db.empty()) inputs.push_back(common.db);
    require_output_file(out, "--out", inputs);
  }
  const std::string tool = "dionsim " DIONSIM_VERSION;
  std::optional<analysis::Database> db;
  if (!common.db.empty()) db = analysis::Database::open(common.db);

  // The step-model fit: a measurement CSV, or the database's measured runs.
  const bool from_db = measured.empty();
  // A measurement CSV (or --db) with traces, nccl-tests logs or the anchors: one fit, the others'
  // parameters held at their measured values (analysis::calibrate_by_hardware).
  std::string csv;
  std::vector<std::string> joined;
  for (const auto& file : measured) {
    if (analysis::detect_input_kind(file) != InputKind::measurements) {
      joined.push_back(file);
    } else if (!csv.empty()) {
      throw_bad_usage("--measured", file, "a single measurement CSV");
    } else {
      csv = file;
    }
  }
  if (from_db || !csv.empty()) {
    if (dump && !joined.empty()) throw_bad_usage("--measured", joined.front(), "one kind of input with --dump-metrics");
    const auto extra = analysis::calibrations_of_inputs(joined, tool);
    const auto all = csv.empty() ? analysis::measured_configurations_from_db(*db)
                                 : analysis::group_configurations(analysis::read_measurement_csv(csv));
    const auto selected = analysis::select_configurations(all, where, csv.empty() ? common.db : csv);
    if (dump) {
      json dumped = json::array();
      for (const auto& g : selected) {
        dumped.push_back(analysis::to_json(g));
        if (common.machine()) continue;
        std::printf("%s:", g.config.label().c_str());
        for (const auto& [metric, value] : g.metrics) std::printf(" %s=%g", metric.c_str(), value);
        std::printf("\n");
      }
      if (common.machine()) print_result(common, dumped);
      return 0;
    }
    const std::string source = csv.empty() ? common.db : csv;
    if (name.empty()) name = std::filesystem::path(source).filename().string();
    auto sources = std::vector<std::string>{source};
    for (const auto& w : where) sources.push_back("where " + w);
    log(common, "fitting the step model to " + std::to_string(selected.size()) + " measured configurations, per GPU" +
                    (joined.empty() ? "" : ", with the parameters of " + std::to_string(joined.size()) + " more inputs held"));
    auto result = analysis::calibrate_by_hardware(selected, name, sources, tool, {}, extra);
    // The model-form error the intervals use (analysis/calibration/intervals.hpp): each GPU's own
    // leave-one-configuration-out.
    const auto by_gpu = analysis::split_by_hardware(selected);
    for (auto& c : result.fitted)
      for (const auto& h : by_gpu.hardware) {
        if (h.hardware != c.fit.hardware) continue;
        analysis::attach_model_error(c.calibration, analysis::leave_one_out_model_error(h.configurations));
        if (c.calibration.model_error.empty())
          log(common, c.fit.hardware + ": too few configurations for a leave-one-out: no model_error stored");
      }
    for (const auto& s : result.skipped) log(common, "skipped " + s.reason);
    for (const auto& c : result.fitted) {
      for (const auto& p : c.fit.unconstrained)
        log(common, c.fit.hardware + ": " + p + ": not constrained by the selected runs; left out (whatif keeps its preset)");
      for (const auto& p : c.fit.at_bound) log(common, c.fit.hardware + ": " + p + ": ended on its bound (held there; stderr 0)");
    }
    if (db && !csv.empty())
      for (const auto& g : all) db->store(analysis::measured_record(g), analysis::OnExisting::keep);
    // One calibration: --out is its file (or a folder); several: a folder, one <gpu>.json each.
    const bool folder = !out.empty() && (out.ends_with('/') || std::filesystem::is_directory(out));
    if (!out.empty() && !folder && result.fitted.size() > 1)
      throw_bad_usage("--out", out, "a folder: the selection gives " + std::to_string(result.fitted.size()) +
                                        " calibrations (one per GPU), written as FOLDER/<gpu>.json");
    if (folder) require_output_folder(out, "--out");
    json fitted = json::array();
    std::vector<Table> tables;
    for (const auto& c : result.fitted) {
      const std::string file = folder ? (std::filesystem::path(out) / (c.fit.hardware + ".json")).string() : out;
      save_calibration(common, db ? &*db : nullptr, c.calibration, c.calibration.name, sources, file);
      json rows = json::array();
      for (const auto& r : c.in_sample) rows.push_back(analysis::to_json(r));
      fitted.push_back({{"calibration", analysis::to_json(c.calibration)}, {"in_sample", rows}});
      for (auto& t : calibration_tables(fitted.back()["calibration"], rows)) {
        if (result.fitted.size() > 1) t.name = c.fit.hardware + "_" + t.name;
        tables.push_back(std::move(t));
      }
      if (!common.machine()) print(analysis::calibration_table(c.calibration) + analysis::in_sample_table(c.in_sample));
    }
    json skipped = json::array();
    for (const auto& s : result.skipped) skipped.push_back(analysis::to_json(s));
    if (common.machine()) {
      // One calibration keeps the shape {"calibration", "in_sample"}; several are a list.
      json doc = fitted.size() == 1 ? fitted.front() : json{{"calibrations", fitted}};
      doc["skipped"] = skipped;
      if (!skipped.empty()) {
        tables.push_back(tables_from_json(skipped).front());
        tables.back().name = "skipped";
      }
      print_result(common, doc, tables);
    } else if (!result.skipped.empty()) {
      print(analysis::skipped_table(result.skipped));
    }
    return 0;
  }
  if (!where.empty()) throw UsageError("calibrate: --where applies to a measurement CSV or --db only");
  if (!out.empty()) require_output_file(out, "--out", measured);  // one calibration: a file, not a folder
  const InputKind kind = analysis::detect_input_kind(measured.front());
  for (const auto& file : measured) {
    if (analysis::detect_input_kind(file) != kind)
      throw_bad_usage("--measured", file, "inputs of one kind (all traces or one file)");
  }
  if (kind != InputKind::trace && measured.size() > 1)
    throw_bad_usage("--measured", measured[1], "a single non-trace file");
  if (name.empty()) name = std::filesystem::path(measured.front()).filename().string();
  const bool table = !common.machine();

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
    const auto fits = analysis::fit_anchors(analysis::read_anchors_csv(measured.front()), measured.front());
    calibration = analysis::calibration_from_anchors(fits, name, measured.front(), tool);
  }
  if (dump) {
    if (!table) print_result(common, dumped);
    return 0;
  }
  save_calibration(common, db ? &*db : nullptr, calibration, name, measured, out);
  if (table)
    print(analysis::calibration_table(calibration));
  else
    print_result(common, analysis::to_json(calibration), calibration_tables(analysis::to_json(calibration)));
  return 0;
}

}  // namespace dionsim::cli
