// dionsim calibrate: measured inputs → extracted metrics (--dump-metrics) or fitted parameters
// (table, --json, --out CALIB.json). What is fitted depends on the input: the H200 anchor table
// gives collective latency/bandwidth and GEMM throughput; profiler traces give NS GEMM throughput
// (isolated and overlapping a collective). Fits that need the simulator are not done here.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "analysis/fit_calibration.hpp"
#include "analysis/kineto.hpp"
#include "analysis/kineto_io.hpp"
#include "analysis/measurements.hpp"
#include "common/error.hpp"
#include "experiments/cli.hpp"

namespace dionsim::cli {

namespace {

enum class InputKind { trace, measurements, anchors };

// By content first: gzip or JSON → a profiler trace; a CSV by its first header column.
InputKind detect_kind(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot open for reading");
  std::string head(64, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  const auto first = head.find_first_not_of(" \t\r\n\xEF\xBB\xBF");
  if (first == std::string::npos)
    throw_bad_input(path, "content", "(empty)", "a profiler trace (JSON) or a measurement CSV");
  if (static_cast<unsigned char>(head[0]) == 0x1f || head[first] == '{' || head[first] == '[') return InputKind::trace;
  if (head.compare(first, 7, "source,") == 0) return InputKind::measurements;
  if (head.compare(first, 5, "what,") == 0) return InputKind::anchors;
  // Named like a trace but not JSON: let the trace reader say what is wrong with it.
  if (path.ends_with(".json") || path.ends_with(".json.gz")) return InputKind::trace;
  throw_bad_input(
      path, "content", head.substr(first, 20),
      "a profiler trace (JSON, optionally gzipped), a measurement CSV (header 'source,run,…') or an anchor CSV "
      "(header 'what,world,…')");
}

void print_fit_table(const analysis::Calibration& c) {
  std::printf("# calibration '%s' (%s)\n%-40s %14s %12s  %s\n", c.name.c_str(), c.hardware.c_str(), "parameter",
              "value", "stderr", "units");
  for (const auto& [name, p] : c.parameters) {
    std::printf("%-40s %14.4f %12.4f  %s\n", name.c_str(), p.value, p.std_error, p.units.c_str());
  }
}

void print_step_table(const std::string& file, const std::vector<analysis::StepMetrics>& steps) {
  std::printf("# %s\n%4s %4s %11s %10s %10s %10s %6s %9s %14s %9s %9s %9s %7s\n", file.c_str(), "rank", "step",
              "opt_step_ms", "cpu_ms", "gpu_win_ms", "gpu_ms", "idle%", "a2a_ms", "a2a_bytes", "ag_ms", "gemm_ms",
              "other_ms", "kernels");
  for (const auto& m : steps) {
    std::printf("%4d %4d %11.3f %10.3f %10.3f %10.3f %6.1f %9.3f %14lld %9.3f %9.3f %9.3f %7d\n", m.rank, m.step,
                m.opt_step_ms, m.opt_cpu_span_ms, m.opt_gpu_window_ms, m.opt_gpu_ms, m.opt_gpu_idle_pct, m.a2a_ms,
                static_cast<long long>(m.a2a_payload_bytes), m.allgather_ms, m.gemm_ms, m.non_gemm_ms, m.kernel_count);
  }
}

}  // namespace

int run_calibrate(std::span<const std::string> args) {
  Command cmd("calibrate", "--measured FILE [--measured FILE …] [--dump-metrics] [--out CALIB.json] [--name NAME]",
              "Reads measured runs — PyTorch-profiler traces (Kineto JSON, optionally gzipped), a measurement CSV or "
              "the H200 anchor CSV — and prints what it extracted (--dump-metrics) or fits model parameters with "
              "standard errors (table, --json, or a calibration file with --out).");
  std::vector<std::string> measured;
  std::string out;
  std::string name;
  bool dump = false;
  cmd.options().add_options()(
      "measured", po::value(&measured)->value_name("FILE"),
      "trace (.json/.json.gz), measurement CSV or anchor CSV; repeatable (e.g. one trace per rank)")(
      "dump-metrics", po::bool_switch(&dump),
      "print the metrics extracted per rank and step (traces) or per configuration (CSV)")(
      "out", po::value(&out)->value_name("CALIB.json"), "write the fitted calibration to this file")(
      "name", po::value(&name)->value_name("NAME"), "name of the calibration (default: the first input's file name)");
  if (!cmd.parse(args)) return 0;
  if (measured.empty()) throw UsageError("calibrate: --measured FILE is required (see 'dionsim calibrate --help')");
  if (cmd.has("db")) throw UsageError("calibrate: --db is not supported yet; use --out CALIB.json");
  if (dump && !out.empty()) throw UsageError("calibrate: --dump-metrics and --out are exclusive");
  const InputKind kind = detect_kind(measured.front());
  for (const auto& file : measured) {
    if (detect_kind(file) != kind) throw_bad_usage("--measured", file, "inputs of one kind (all traces or one CSV)");
  }
  if (kind != InputKind::trace && measured.size() > 1) throw_bad_usage("--measured", measured[1], "a single CSV file");
  if (name.empty()) name = std::filesystem::path(measured.front()).filename().string();

  nlohmann::json dumped = nlohmann::json::array();
  nlohmann::json across_json = nlohmann::json::array();
  analysis::Calibration calibration;
  if (kind == InputKind::trace) {
    std::vector<analysis::KinetoTrace> traces;
    for (const auto& file : measured) {
      traces.push_back(analysis::read_kineto_trace(file));
      const auto steps = analysis::reduce_steps(traces.back());
      if (steps.empty())
        throw InputError(file + ": no 'Optimizer.step#…' annotation; expected a profiled optimizer step");
      if (dump && !cmd.common().json) print_step_table(file, steps);
      for (const auto& m : steps) {
        nlohmann::json row = analysis::to_json(m);
        row["file"] = file;
        dumped.push_back(row);
      }
    }
    if (dump && traces.size() > 1) {
      const auto across = analysis::reduce_across_ranks(traces);
      if (!cmd.common().json)
        std::printf("# across %zu ranks\n%4s %15s %15s %15s %14s %14s\n", traces.size(), "step", "opt_step_ms_max",
                    "a2a_transfer_ms", "a2a_wait_ms_max", "a2a_bytes", "a2a_algbw_GBps");
      for (const auto& c : across) {
        if (!cmd.common().json)
          std::printf("%4d %15.3f %15.3f %15.3f %14lld %14.1f\n", c.step, c.opt_step_ms_max, c.a2a_transfer_ms,
                      c.a2a_wait_ms_max, static_cast<long long>(c.a2a_payload_bytes), c.a2a_algbw_GBps);
        across_json.push_back(analysis::to_json(c));
      }
    }
    if (!dump) calibration = analysis::calibration_from_traces(traces, name, measured, "dionsim " DIONSIM_VERSION);
  } else if (kind == InputKind::measurements) {
    const auto groups = analysis::group_configurations(analysis::read_measurement_csv(measured.front()));
    for (const auto& g : groups) dumped.push_back(analysis::to_json(g));
    if (!dump)
      throw UsageError("calibrate: a measurement CSV has nothing to fit without the simulator yet; use --dump-metrics");
    if (!cmd.common().json) {
      for (const auto& g : groups) {
        std::printf("%s:", g.config.label().c_str());
        for (const auto& [metric, value] : g.metrics) std::printf(" %s=%g", metric.c_str(), value);
        std::printf("\n");
      }
    }
  } else {
    const auto anchors = analysis::read_anchors_csv(measured.front());
    if (dump)
      throw UsageError(
          "calibrate: --dump-metrics reads traces and measurement CSVs; the anchor CSV is fitted directly");
    calibration = analysis::calibration_from_anchors(analysis::fit_anchors(anchors), name, measured.front(),
                                                     "dionsim " DIONSIM_VERSION);
  }
  if (dump) {
    if (cmd.common().json && kind == InputKind::trace)
      print_json({{"per_rank", dumped}, {"across_ranks", across_json}});
    else if (cmd.common().json)
      print_json(dumped);
    return 0;
  }
  if (!out.empty()) {
    analysis::write_calibration(out, calibration);
    log(cmd.common(), "wrote calibration '" + name + "' to " + out);
  }
  if (cmd.common().json)
    print_json(analysis::to_json(calibration));
  else
    print_fit_table(calibration);
  return 0;
}

}  // namespace dionsim::cli
