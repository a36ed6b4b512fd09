// dionsim calibrate: measured inputs → extracted metrics (--dump-metrics) or fitted parameters
// (table, --json, --out CALIB.json). What is fitted depends on the input: the H200 anchor table and
// nccl-tests output give collective latency/bandwidth (and GEMM throughput for the anchors);
// profiler traces give NS GEMM throughput and all-to-all kernel transfer. Fits that need the
// simulator (a measurement CSV against predicted runs) are not done here.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/fit_calibration.hpp"
#include "analysis/kineto.hpp"
#include "analysis/measurements.hpp"
#include "common/error.hpp"
#include "experiments/cli.hpp"

namespace dionsim::cli {

namespace {

using nlohmann::json;
enum class InputKind { trace, measurements, anchors, nccl_tests };

// By content first: gzip or JSON → trace; CSV by its first header column; nccl-tests by its banner.
InputKind detect_kind(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot open for reading");
  std::string head(1 << 16, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  const auto first = head.find_first_not_of(" \t\r\n\xEF\xBB\xBF");
  if (first == std::string::npos) throw_bad_input(path, "content", "(empty)", "a profiler trace or a measurement file");
  if (static_cast<unsigned char>(head[0]) == 0x1f || head[first] == '{' || head[first] == '[') return InputKind::trace;
  if (head.compare(first, 7, "source,") == 0) return InputKind::measurements;
  if (head.compare(first, 5, "what,") == 0) return InputKind::anchors;
  if (analysis::looks_like_nccl_tests(head)) return InputKind::nccl_tests;
  // Named like a trace but not JSON: let the trace reader say what is wrong with it.
  if (path.ends_with(".json") || path.ends_with(".json.gz")) return InputKind::trace;
  throw_bad_input(path, "content", head.substr(first, 20),
                  "a profiler trace (JSON, optionally gzipped), a measurement CSV (header 'source,run,…'), an anchor "
                  "CSV (header 'what,world,…') or nccl-tests output");
}

void print_fit_table(const analysis::Calibration& c) {
  std::printf("# calibration '%s' (%s)\n%-40s %14s %12s  %s\n", c.name.c_str(), c.hardware.c_str(), "parameter",
              "value", "stderr", "units");
  for (const auto& [name, p] : c.parameters) {
    std::printf("%-40s %14.4f %12.4f  %s\n", name.c_str(), p.value, p.std_error, p.units.c_str());
  }
}

// Human tables of what --dump-metrics extracted; `rows` are the JSON objects --json prints.
void print_rows(const std::string& title, const json& rows, const std::vector<std::string>& columns) {
  std::printf("# %s\n", title.c_str());
  for (const auto& c : columns)
    std::printf("%*s", static_cast<int>(std::max<std::size_t>(c.size(), 11) + 1), c.c_str());
  std::printf("\n");
  for (const auto& row : rows) {
    for (const auto& c : columns) {
      const int width = static_cast<int>(std::max<std::size_t>(c.size(), 11) + 1);
      const json& v = row.at(c);
      if (v.is_number_float())
        std::printf("%*.3f", width, v.get<double>());
      else if (v.is_number())
        std::printf("%*lld", width, v.get<long long>());
      else
        std::printf("%*s", width, v.dump().c_str());
    }
    std::printf("\n");
  }
}

}  // namespace

int run_calibrate(std::span<const std::string> args) {
  Command cmd("calibrate", "--measured FILE [--measured FILE …] [--dump-metrics] [--out CALIB.json] [--name NAME]",
              "Reads measured runs — PyTorch-profiler traces (Kineto JSON, optionally gzipped; one per rank), a "
              "measurement CSV, the H200 anchor CSV or nccl-tests output — and prints what it extracted "
              "(--dump-metrics) or fits model parameters with standard errors (table, --json, or --out FILE).");
  std::vector<std::string> measured;
  std::string out, name;
  bool dump = false;
  cmd.options().add_options()(
      "measured", po::value(&measured)->value_name("FILE"),
      "trace (.json/.json.gz), measurement CSV, anchor CSV or nccl-tests stdout; repeatable for traces (one per rank)")(
      "dump-metrics", po::bool_switch(&dump),
      "print the metrics extracted per rank and step (traces), per configuration (CSV) or per row (nccl-tests)")(
      "out", po::value(&out)->value_name("CALIB.json"), "write the fitted calibration to this file")(
      "name", po::value(&name)->value_name("NAME"), "name of the calibration (default: the first input's file name)");
  if (!cmd.parse(args)) return 0;
  if (measured.empty()) throw UsageError("calibrate: --measured FILE is required (see 'dionsim calibrate --help')");
  if (cmd.has("db")) throw UsageError("calibrate: --db is not supported yet; use --out CALIB.json");
  if (dump && !out.empty()) throw UsageError("calibrate: --dump-metrics and --out are exclusive");
  const InputKind kind = detect_kind(measured.front());
  for (const auto& file : measured) {
    if (detect_kind(file) != kind) throw_bad_usage("--measured", file, "inputs of one kind (all traces or one file)");
  }
  if (kind != InputKind::trace && measured.size() > 1)
    throw_bad_usage("--measured", measured[1], "a single non-trace file");
  if (name.empty()) name = std::filesystem::path(measured.front()).filename().string();
  const std::string tool = "dionsim " DIONSIM_VERSION;
  const bool table = !cmd.common().json;

  json dumped = json::array();
  analysis::Calibration calibration;
  if (kind == InputKind::trace) {
    std::vector<analysis::KinetoTrace> traces;
    for (const auto& file : measured) traces.push_back(analysis::read_kineto_trace(file));
    dumped = analysis::dump_metrics(traces);
    if (dump && table) {
      print_rows(
          "per rank and step", dumped["per_rank"],
          {"rank", "step", "opt_step_ms", "opt_cpu_span_ms", "opt_gpu_window_ms", "opt_gpu_ms", "opt_gpu_idle_pct",
           "a2a_ms", "a2a_payload_bytes", "allgather_ms", "gemm_ms", "non_gemm_ms", "kernel_count"});
      if (!dumped["across_ranks"].empty())
        print_rows("across the ranks of each run", dumped["across_ranks"],
                   {"run", "step", "ranks", "opt_step_ms_max", "a2a_transfer_ms", "a2a_wait_ms_max",
                    "a2a_payload_bytes", "a2a_algbw_GBps"});
    }
    if (!dump) calibration = analysis::calibration_from_traces(traces, name, measured, tool);
  } else if (kind == InputKind::measurements) {
    const auto groups = analysis::group_configurations(analysis::read_measurement_csv(measured.front()));
    if (!dump)
      throw UsageError("calibrate: a measurement CSV has nothing to fit without the simulator yet; use --dump-metrics");
    for (const auto& g : groups) {
      dumped.push_back(analysis::to_json(g));
      if (!table) continue;
      std::printf("%s:", g.config.label().c_str());
      for (const auto& [metric, value] : g.metrics) std::printf(" %s=%g", metric.c_str(), value);
      std::printf("\n");
    }
  } else if (kind == InputKind::nccl_tests) {
    const auto runs = analysis::read_nccl_tests_output(measured.front());
    for (const auto& run : runs) {
      dumped.push_back(analysis::to_json(run));
      const std::string title =
          run.op + ", " + std::to_string(run.world) + " ranks on " + std::to_string(run.nodes) + " nodes";
      if (dump && table) print_rows(title, dumped.back()["rows"], {"bytes", "time_us", "algbw_GBps", "busbw_GBps"});
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
  if (!out.empty()) {
    analysis::write_calibration(out, calibration);
    log(cmd.common(), "wrote calibration '" + name + "' to " + out);
  }
  if (table)
    print_fit_table(calibration);
  else
    print_json(analysis::to_json(calibration));
  return 0;
}

}  // namespace dionsim::cli
