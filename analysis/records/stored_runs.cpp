#include "analysis/records/stored_runs.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include "analysis/calibration/parameters.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/json_input.hpp"
#include "common/parse.hpp"
#include "optimizer/plan_json.hpp"
#include "sim/kernel_model.hpp"

namespace dionsim::analysis {

using nlohmann::json;

namespace {

sim::KernelCalibration from_fitted(const Calibration& fitted, const sim::Hardware& hw, const std::string& path,
                                   const Note& note, const std::string& ns_variant) {
  std::map<std::string, double> all;
  for (const auto& [name, p] : fitted.parameters) all[name] = p.value;
  const auto values = parameters_for_ns(all, ns_variant);
  std::set<std::string> others;  // variants of the file that this run is not
  for (const auto& [name, v] : all) {
    if (name.find('@') != std::string::npos && name.substr(name.find('@') + 1) != ns_variant)
      others.insert(name.substr(name.find('@') + 1));
  }
  for (const auto& v : others) note(path + ": the parameters of NS variant " + v + " are not used (--ns " + ns_variant + ")");
  // Errors name the file (or stored name) the user gave, then the calibration's own name: the
  // name alone is the file it was fitted from, which the user may never have seen.
  sim::KernelCalibration cal;
  try {
    cal = kernel_calibration_from_parameters(fitted.name, fitted.hardware, values, hw, fitted.fabric);
  } catch (const InputError& e) {
    throw InputError(path + ": calibration '" + fitted.name + "': " + e.what());
  }
  for (const auto& name : cal.unused_parameters) note(path + ": " + name + " is not used by whatif");
  return cal;
}

}  // namespace

std::vector<MeasuredConfiguration> measured_configurations_from_db(const Database& db) {
  std::vector<MeasuredConfiguration> out;
  for (const auto& run : db.find_runs({.kind = std::nullopt, .mode = RunMode::measured, .where = {}})) {
    const json& j = run.record.config;
    const std::string where = db.path() + ": run " + std::to_string(run.id);
    bool complete = true;
    for (const char* key : {"hardware", "gpus_per_node", "nodes", "model", "optimizer", "ns", "scope", "fraction"})
      complete = complete && j.contains(key);
    if (!complete) continue;  // a measured run of another shape (e.g. kernel timings only)
    MeasuredConfiguration m;
    auto& c = m.config;
    try {
      c.source = j.value("source", std::string("db"));
      c.run = j.value("run", "run-" + std::to_string(run.id));
      c.hardware = j.at("hardware").get<std::string>();
      // Bounded integers: get<int>() of a stored 1e300 is undefined and came out as --world -8589934592.
      c.gpus_per_node = static_cast<int>(json_integer(j.at("gpus_per_node"), where, "config.gpus_per_node", 1, 1024));
      c.nodes = static_cast<int>(json_integer(j.at("nodes"), where, "config.nodes", 1, 1 << 20));
      c.world = j.contains("world") ? static_cast<int>(json_integer(j.at("world"), where, "config.world", 1, 1 << 30))
                                    : c.gpus_per_node * c.nodes;
      c.model = j.at("model").get<std::string>();
      c.optimizer = lower(j.at("optimizer").get<std::string>());
      c.ns = j.at("ns").get<std::string>();
      c.scope = j.at("scope").get<std::string>();
      c.fraction = json_number(j.at("fraction"), where, "config.fraction", 1e-15, 1.0);
      if (j.contains("capacity_factor")) c.capacity_factor = opt::capacity_factor_from_json(j.at("capacity_factor"), where);
    } catch (const json::exception& e) {
      throw InputError(where + ": config: " + e.what());
    }
    for (const auto& metric : db.load_run(run.id).record.metrics) {
      if (metric.rank || metric.step) continue;  // aggregated values only
      const MetricInfo* info = find_metric(metric.name);
      if (info == nullptr)
        throw_bad_input(where, "metric", metric.name, "a metric of the measurement CSV (docs/measurements.md)");
      // The measurement CSV's rule for a value, here too: a stored -1e300 was taken in and the fit
      // then skipped the run without saying why.
      const bool percent = info->unit == "%";
      if (!(std::isfinite(metric.value) && metric.value >= 0 && metric.value <= 1e15) || (percent && metric.value > 100)) {
        char got[32];
        std::snprintf(got, sizeof got, "%g", metric.value);
        throw_bad_input(where, "metric " + metric.name, got, percent ? "a percentage in [0, 100]" : "a non-negative number (at most 1e15)");
      }
      m.metrics[metric.name] = metric.value;
    }
    if (!m.metrics.empty()) out.push_back(std::move(m));
  }
  if (out.empty()) {
    throw_bad_input(db.path(), "runs", "no measured runs with a configuration and metrics",
                    "measured runs (dionsim measure, or calibrate --measured CSV --db to import)");
  }
  return out;
}

std::optional<Calibration> stored_calibration(const Database* db, const std::string& name,
                                              const std::string& db_label) {
  if (db == nullptr || std::filesystem::exists(name)) return std::nullopt;
  const auto row = db->calibration(name);
  // Neither a file nor stored: the refusal names the database it was looked up in (it used to be
  // "<name>: cannot open for reading", as if no database had been given).
  if (!row) throw_bad_usage("--calibration", name, "a calibration file or the name of a calibration stored in " + db_label);
  return calibration_from_json(row->body, db_label + ": calibration '" + name + "'");
}

sim::KernelCalibration load_whatif_calibration(const std::string& path, const sim::Hardware& hw, const Database* db,
                                               const std::string& db_label, const Note& note,
                                               const std::string& ns_variant) {
  if (auto stored = stored_calibration(db, path, db_label)) return from_fitted(*stored, hw, path, note, ns_variant);
  const auto doc = parse_json_input(read_input_file(path, "a calibration JSON file", 64 << 20), path);
  if (!doc.is_object() || !doc.contains("schema_version")) return sim::load_kernel_calibration(path, hw);
  return from_fitted(read_calibration(path), hw, path, note, ns_variant);  // strict: other versions, unknown keys
}

std::optional<Calibration> fitted_calibration(const std::string& path, const Database* db,
                                              const std::string& db_label) {
  if (path.empty()) return std::nullopt;
  if (auto stored = stored_calibration(db, path, db_label)) return stored;
  const auto doc = parse_json_input(read_input_file(path, "a calibration JSON file", 64 << 20), path);
  if (!doc.is_object() || !doc.contains("schema_version")) return std::nullopt;
  return read_calibration(path);
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

nlohmann::json load_replay(opt::NormStream& stream) {
  const auto db = Database::open(stream.replay_path, Access::read_only);
  const std::int64_t run_id = db.newest_run_with_gradient_row_stats();
  std::vector<opt::RowNormStats> stats;
  for (auto& g : db.gradient_row_stats(run_id)) {
    stats.push_back({g.step, g.rows, g.cols, g.world, g.rank, g.row_count, g.mean_l1, std::move(g.quantiles)});
  }
  const std::string where = stream.replay_path + (run_id ? " run " + std::to_string(run_id) : std::string());
  stream.replay = std::make_shared<const opt::ReplayStats>(opt::make_replay(stats, where));
  return {{"run_id", run_id}, {"config_hash", db.load_run(run_id).config_hash}};
}

Calibration calibration_for_runs(const std::string& name_or_path, const Database* db, const std::string& db_label,
                                 const std::vector<MeasuredConfiguration>& selected) {
  auto stored = stored_calibration(db, name_or_path, db_label);
  Calibration cal = stored ? std::move(*stored) : read_calibration(name_or_path);
  const auto gpu = gpu_preset_of(cal.hardware);
  for (const auto& c : selected) {
    const auto runs = gpu_preset_of(c.config.hardware);
    if (!gpu || !runs || runs->hardware != gpu->hardware) {
      throw_bad_input(name_or_path, "hardware", cal.hardware,
                      "the GPU of the selected runs ('" + c.config.hardware + "' in " + c.config.label() + ")");
    }
    if (cal.fabric != runs->fabric) {  // the runs are modelled on their GPU's default fabric
      throw_bad_input(name_or_path, "fabric", cal.fabric,
                      "the fabric the selected runs are modelled on (" + runs->fabric + ")");
    }
  }
  return cal;
}

}  // namespace dionsim::analysis
