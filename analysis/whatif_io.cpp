#include "analysis/whatif_io.hpp"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>

#include "analysis/fit_calibration.hpp"
#include "analysis/perfetto.hpp"
#include "common/error.hpp"
#include "sim/kernel_model.hpp"
#include "sim/whatif_trace.hpp"

namespace dionsim::analysis {

namespace {

sim::KernelCalibration from_fitted(const Calibration& fitted, const sim::Hardware& hw, const std::string& path,
                                   const Note& note) {
  std::map<std::string, double> values;
  for (const auto& [name, p] : fitted.parameters) values[name] = p.value;
  auto cal = sim::kernel_calibration_from_parameters(fitted.name, fitted.hardware, values, hw);
  for (const auto& name : cal.unused_parameters) note(path + ": " + name + " is not used by whatif");
  return cal;
}

}  // namespace

std::optional<Calibration> stored_calibration(const Database* db, const std::string& name,
                                              const std::string& db_label) {
  if (db == nullptr || std::filesystem::exists(name)) return std::nullopt;
  const auto row = db->calibration(name);
  if (!row) return std::nullopt;
  return calibration_from_json(row->body, db_label + ": calibration '" + name + "'");
}

sim::KernelCalibration load_whatif_calibration(const std::string& path, const sim::Hardware& hw, const Database* db,
                                               const std::string& db_label, const Note& note) {
  if (auto stored = stored_calibration(db, path, db_label)) return from_fitted(*stored, hw, path, note);
  std::ifstream in(path);
  if (!in) throw IoError(path + ": cannot open the calibration file");
  const auto doc = nlohmann::json::parse(in, nullptr, false);
  if (!doc.is_object() || !doc.contains("schema_version")) return sim::load_kernel_calibration(path, hw);
  return from_fitted(read_calibration(path), hw, path, note);  // strict: other versions, unknown keys
}

void use_db_gemms(const Database& db, sim::KernelCalibration& cal, const std::string& db_label, const Note& note) {
  std::string gpu = cal.config.hardware.name.substr(0, cal.config.hardware.name.find('-'));
  for (auto& c : gpu) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::vector<sim::GemmAnchor> anchors;
  for (const auto& label : {gpu, "NVIDIA " + gpu}) {
    for (const auto& t : db.kernel_timings(label, "gemm", "bf16")) {
      anchors.push_back(sim::gemm_anchor_from_timing(t.m, t.n, t.k, t.batch, t.time_us));
    }
  }
  if (anchors.empty()) return;
  cal.config.gemm_anchors = anchors;
  cal.config.anchors_peak_TFLOPs = cal.config.hardware.peak_bf16_TFLOPs;
  cal.name += "+db-gemms(" + std::to_string(anchors.size()) + ")";
  note(db_label + ": GEMM efficiency from " + std::to_string(anchors.size()) + " measured " + gpu + " GEMMs");
}

RunRecord whatif_record(const sim::WhatifResult& r, const nlohmann::json& config, std::uint64_t seed) {
  auto rec = RunRecord::begin("whatif", RunMode::simulated, config, seed);
  const auto metrics = sim::metrics_json(r);
  for (const auto& [name, value] : metrics.items()) {
    if (!value.is_number()) continue;
    const std::string unit = name.ends_with("_ms")      ? "ms"
                             : name.ends_with("_bytes") ? "bytes"
                             : name.ends_with("_pct")   ? "pct"
                                                        : "";
    MetricRow m;
    m.name = name;
    m.value = value.get<double>();
    m.unit = unit;
    rec.metrics.push_back(std::move(m));
  }
  for (const auto& e : r.opt.events) {
    const bool compute = e.stream == sim::StreamKind::compute;
    PhaseRow p;  // rank 0, step 0
    p.megabatch = e.task;
    p.phase = e.name;
    p.kernel_class = compute ? e.name : "nccl_" + e.name;
    p.start_ns = e.start_ns;
    p.duration_ns = e.duration_ns;
    p.bytes = e.bytes;
    p.flops = static_cast<std::int64_t>(e.flops);
    rec.phases.push_back(std::move(p));
  }
  return rec;
}

void write_whatif_trace(const sim::WhatifResult& r, const std::string& dir, const std::string& ranks_spec) {
  std::filesystem::create_directories(dir);
  TraceWriter out(std::filesystem::path(dir) / sim::trace_file_name(r.config));
  const auto events = sim::trace_events(r);
  for (auto rank : sim::trace_ranks(ranks_spec, r.config.world())) {
    const int pid = static_cast<int>(rank);
    out.process_name(pid, "rank " + std::to_string(rank));
    for (const auto& t : sim::trace_threads()) out.thread_name(pid, t.tid, t.name);
    for (const auto& e : events) {
      out.complete(pid, e.tid, e.name, e.category, TracePs::from_ns(e.start_ns), TracePs::from_ns(e.duration_ns),
                   e.args);
    }
  }
  out.close();
}

}  // namespace dionsim::analysis
