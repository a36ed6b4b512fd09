#include "analysis/calibration/calibrate_io.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "analysis/measured/kineto.hpp"
#include "analysis/measured/kineto_io.hpp"
#include "analysis/measured/measurements.hpp"
#include "common/files.hpp"
#include "common/error.hpp"
#include "common/format.hpp"

namespace dionsim::analysis {

InputKind detect_input_kind(const std::string& path) {
  if (std::filesystem::exists(path)) require_regular_file(path, "a profiler trace or a measurement file");
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
  if (looks_like_nccl_tests(head)) return InputKind::nccl_tests;
  // Named like a trace but not JSON: let the trace reader say what is wrong with it.
  if (path.ends_with(".json") || path.ends_with(".json.gz")) return InputKind::trace;
  throw_bad_input(path, "content", head.substr(first, 20),
                  "a profiler trace (JSON, optionally gzipped), a measurement CSV (header 'source,run,…'), an anchor "
                  "CSV (header 'what,world,…') or nccl-tests output");
}

std::vector<Calibration> calibrations_of_inputs(const std::vector<std::string>& files, const std::string& tool) {
  std::vector<Calibration> out;
  std::vector<KinetoTrace> traces;
  std::vector<std::string> trace_files;
  for (const auto& file : files) {
    const std::string name = std::filesystem::path(file).filename().string();
    switch (detect_input_kind(file)) {
      case InputKind::trace:
        traces.push_back(read_kineto_trace(file));
        trace_files.push_back(file);
        if (traces.back().device_name != traces.front().device_name)
          throw_bad_input(file, "device", traces.back().device_name,
                          "the GPU of the other traces (" + traces.front().device_name + ")");
        break;
      case InputKind::nccl_tests:
        out.push_back(calibration_from_nccl_tests(read_nccl_tests_output(file), name, file, tool));
        break;
      case InputKind::anchors:
        out.push_back(calibration_from_anchors(fit_anchors(read_anchors_csv(file), file), name, file, tool));
        break;
      case InputKind::measurements:
        throw_bad_input(file, "kind", "a measurement CSV", "one measurement CSV per invocation");
    }
  }
  if (!traces.empty()) out.push_back(calibration_from_traces(traces, trace_files.front(), trace_files, tool));
  return out;
}

std::string calibration_table(const Calibration& c) {
  std::string out = format("# calibration '%s' (%s)\n%-40s %14s %12s  %s\n", c.name.c_str(), c.hardware.c_str(),
                           "parameter", "value", "stderr", "units");
  for (const auto& [name, p] : c.parameters) {
    out += format("%-40s %14.4f %12.4f  %s\n", name.c_str(), p.value, p.std_error, p.units.c_str());
  }
  return out;
}

std::string in_sample_table(const std::vector<PredictionRow>& rows) {
  std::string out =
      format("# in-sample: whatif with the fitted parameters vs the measured runs\n%-56s %-22s %12s %12s %9s\n",
             "configuration", "metric", "measured", "predicted", "error %");
  for (const auto& r : rows)
    out += format("%-56s %-22s %12.4g %12.4g %+9.2f%s\n", r.configuration.c_str(), r.metric.c_str(), r.measured,
                  r.predicted, r.error_pct, r.fitted ? "" : "  (not fitted)");
  return out;
}

std::string skipped_table(const std::vector<SkippedConfiguration>& skipped) {
  std::string out = format("# skipped: %zu configurations not fitted\n%-56s %-10s %s\n", skipped.size(), "configuration",
                           "hardware", "reason");
  for (const auto& s : skipped) {
    // The reason names the configuration first (it is an error message): shown once.
    const std::string prefix = s.configuration + ": ";
    const std::string reason = s.reason.starts_with(prefix) ? s.reason.substr(prefix.size()) : s.reason;
    out += format("%-56s %-10s %s\n", s.configuration.c_str(), s.hardware.c_str(), reason.c_str());
  }
  return out;
}

std::string json_rows_table(const std::string& title, const nlohmann::json& rows,
                            const std::vector<std::string>& columns) {
  std::string out = format("# %s\n", title.c_str());
  for (const auto& c : columns)
    out += format("%*s", static_cast<int>(std::max<std::size_t>(c.size(), 11) + 1), c.c_str());
  out += "\n";
  for (const auto& row : rows) {
    for (const auto& c : columns) {
      const int width = static_cast<int>(std::max<std::size_t>(c.size(), 11) + 1);
      const nlohmann::json& v = row.at(c);
      if (v.is_number_float())
        out += format("%*.3f", width, v.get<double>());
      else if (v.is_number())
        out += format("%*lld", width, v.get<long long>());
      else
        out += format("%*s", width, v.dump().c_str());
    }
    out += "\n";
  }
  return out;
}

std::string trace_metrics_tables(nlohmann::json dumped) {
  std::string out = json_rows_table(
      "per rank and step", dumped["per_rank"],
      {"rank", "step", "opt_step_ms", "opt_cpu_span_ms", "opt_gpu_window_ms", "opt_gpu_ms", "opt_gpu_idle_pct",
       "a2a_ms", "a2a_payload_bytes", "allgather_ms", "gemm_ms", "non_gemm_ms", "kernel_count"});
  if (!dumped["across_ranks"].empty())
    out += json_rows_table("across the ranks of each run", dumped["across_ranks"],
                           {"run", "step", "ranks", "opt_step_ms_max", "a2a_transfer_ms", "a2a_wait_ms_max",
                            "a2a_payload_bytes", "a2a_algbw_GBps"});
  return out;
}

}  // namespace dionsim::analysis
