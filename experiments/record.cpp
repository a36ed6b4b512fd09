#include "experiments/record.hpp"

#include <filesystem>
#include <fstream>
#include <string_view>

#include "analysis/step_fit.hpp"
#include "common/error.hpp"
#include "optimizer/deferral_json.hpp"
#include "optimizer/plan_json.hpp"

namespace dionsim::cli {

Recorder::Recorder(const CommonOptions& common, std::string kind) : common_(common), kind_(std::move(kind)) {
  if (!common_.db.empty()) db_.emplace(analysis::Database::open(common_.db));
}

bool Recorder::skip(const nlohmann::json& config) const {
  if (!db_ || common_.force || !db_->has_run(kind_, analysis::config_hash(config))) return false;
  log(common_, kind_ + ": configuration already in " + common_.db + ", skipped (--force re-runs it)");
  return true;
}

analysis::RunRecord Recorder::begin(const nlohmann::json& config, analysis::RunMode mode) const {
  return analysis::RunRecord::begin(kind_, mode, config, common_.seed);
}

std::int64_t Recorder::store(const analysis::RunRecord& record) {
  if (!db_) return 0;
  const std::int64_t id =
      db_->store(record, common_.force ? analysis::OnExisting::replace : analysis::OnExisting::keep);
  log(common_, kind_ + ": recorded as run " + std::to_string(id) + " in " + common_.db);
  return id;
}

nlohmann::json plan_config_json(const opt::Inventory& inventory, const opt::PlanConfig& config) {
  opt::Plan empty;
  empty.config = config;
  nlohmann::json shapes = nlohmann::json::array();
  for (const auto& m : inventory.entries) shapes.push_back({m.name, m.rows, m.cols, m.count});
  return {{"model", inventory.name}, {"matrices", shapes}, {"plan", opt::to_json(empty).at("config")}};
}

void add_plan_metrics(analysis::RunRecord& record, const opt::Plan& plan) {
  auto add = [&](const char* name, double value, const char* unit, nlohmann::json labels) {
    record.metrics.push_back(
        {.name = name, .value = value, .unit = unit, .rank = {}, .step = {}, .labels = std::move(labels)});
  };
  const nlohmann::json none = nlohmann::json::object();
  add("a2a_payload_bytes", static_cast<double>(plan.a2a_payload_bytes), "bytes", none);
  add("norms_allgather_bytes", static_cast<double>(plan.norms_allgather_bytes), "bytes", none);
  add("ddp_allgather_bytes", static_cast<double>(plan.ddp_allgather_bytes), "bytes", none);
  add("ns_flops_per_rank", plan.ns_flops_per_rank, "flops", none);
  add("collectives", static_cast<double>(plan.collectives), "", none);
  for (std::size_t i = 0; i < plan.groups.size(); ++i) {
    const opt::GroupPlan& g = plan.groups[i];
    const nlohmann::json labels = {{"group", i},
                                   {"rows", g.rows},
                                   {"cols", g.cols},
                                   {"path", std::string(opt::to_string(g.path))},
                                   {"routed", g.routed}};
    add("group_matrices", static_cast<double>(g.N), "", labels);
    add("group_k", static_cast<double>(g.k), "", labels);
    add("group_k_tot", static_cast<double>(g.k_tot), "", labels);
    add("group_capacity_factor", g.c, "", labels);
    add("group_budget_rows", static_cast<double>(g.B), "", labels);
    add("group_ns_flops", g.ns_flops, "flops", labels);
    add("group_a2a_bytes", static_cast<double>(g.a2a_bytes), "bytes", labels);
    add("group_norms_bytes", static_cast<double>(g.norms_bytes), "bytes", labels);
    add("group_allgather_bytes", static_cast<double>(g.allgather_bytes), "bytes", labels);
  }
}

namespace {

std::string_view float_bytes(const std::vector<float>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)};
}

}  // namespace

nlohmann::json step_config_json(const opt::NumericsCase& c) {
  const std::string where = (std::filesystem::path(c.dir) / "case.json").string();
  std::ifstream in(where);
  nlohmann::json case_json;
  try {
    case_json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw_bad_input(where, "(file)", e.what(), "the case.json that was just loaded");
  }
  // One hash per array, then the hash of their concatenation: no copy of the arrays.
  std::string digests;
  for (const auto& w : c.initial) digests += analysis::sha256_hex(float_bytes(w));
  for (const auto& step : c.grads) {
    for (const auto& g : step) digests += analysis::sha256_hex(float_bytes(g));
  }
  return {{"case", case_json}, {"inputs_sha256", analysis::sha256_hex(digests)}};
}

void add_step_results(analysis::RunRecord& record, const opt::NumericsCase& c, const opt::ReferenceOptimizer& optimizer,
                      double wall_ms) {
  const auto& stats = optimizer.stats();  // [rank][step]
  for (std::size_t r = 0; r < stats.size(); ++r) {
    for (std::size_t t = 0; t < stats[r].size(); ++t) {
      record.deferral.push_back({.trial = 0,
                                 .step = static_cast<std::int64_t>(t),
                                 .rank = static_cast<std::int64_t>(r),
                                 .winner_rows = stats[r][t].winner_rows,
                                 .deferred_rows = stats[r][t].deferred_rows});
    }
  }
  record.metrics.push_back({.name = "cpu_step_wall_ms", .value = wall_ms, .unit = "ms"});
  for (auto& s : opt::gradient_row_stats(c.params, c.grads, c.config.world)) {
    record.gradient_row_stats.push_back({.step = s.step,
                                         .rows = s.rows,
                                         .cols = s.cols,
                                         .world = s.world,
                                         .rank = s.rank,
                                         .row_count = s.row_count,
                                         .mean_l1 = s.mean_l1,
                                         .quantiles = std::move(s.quantiles)});
  }
}

nlohmann::json load_replay(opt::NormStream& stream) {
  const auto db = analysis::Database::open(stream.replay_path, analysis::Access::read_only);
  const std::int64_t run_id = db.newest_run_with_gradient_row_stats();
  std::vector<opt::RowNormStats> stats;
  for (auto& g : db.gradient_row_stats(run_id)) {
    stats.push_back({g.step, g.rows, g.cols, g.world, g.rank, g.row_count, g.mean_l1, std::move(g.quantiles)});
  }
  const std::string where = stream.replay_path + (run_id ? " run " + std::to_string(run_id) : std::string());
  stream.replay = std::make_shared<const opt::ReplayStats>(opt::make_replay(stats, where));
  return {{"run_id", run_id}, {"config_hash", db.load_run(run_id).config_hash}};
}

void record_collective(Recorder& recorder, const nlohmann::json& run_config, const sim::CollectiveSpec& spec,
                       const sim::CollectiveRow& row, const sim::CollectiveResult& r, int ranks, std::int64_t nodes) {
  if (!recorder.enabled()) return;
  auto record = recorder.begin(run_config);
  record.collectives.push_back({.op = sim::to_string(spec.op), .bytes = row.bytes, .world = ranks, .nodes = nodes,
                                .time_us = row.time_us, .algbw_GBps = row.algbw_GBps, .busbw_GBps = row.busbw_GBps});
  record.metrics.push_back({.name = "messages", .value = static_cast<double>(r.messages), .unit = ""});
  recorder.store(record);
}

namespace {

analysis::MetricRow metric_row(const std::string& name, double value, const std::string& unit) {
  analysis::MetricRow row;
  row.name = name;
  row.value = value;
  row.unit = unit;
  return row;
}

}  // namespace

void store_measure(const CommonOptions& common, nlohmann::json config, const nlohmann::json& out) {
  if (common.db.empty()) return;
  auto db = analysis::Database::open(common.db);
  auto rec = analysis::RunRecord::begin("measure", analysis::RunMode::measured, std::move(config), common.seed);
  if (out["mode"] == "collective") {
    for (const auto& r : out["rows"])
      rec.collectives.push_back({out["op"].get<std::string>(), r["bytes"].get<std::int64_t>(),
                                 out["world"].get<std::int64_t>(), 1, r["time_us"].get<double>(),
                                 r["algbw_GBps"].get<double>(), r["busbw_GBps"].get<double>()});
  } else {
    for (const auto& m : out["metrics"])
      rec.metrics.push_back(
          metric_row(m["metric"].get<std::string>(), m["value"].get<double>(), m["unit"].get<std::string>()));
    std::int64_t step = 0;
    for (const auto& ms : out["step_ms"]) {
      auto row = metric_row("opt_step_ms", ms.get<double>(), "ms");
      row.step = step++;
      rec.metrics.push_back(row);
    }
    for (const auto& [k, ms] : out["kernels_ms"].items()) {
      auto row = metric_row("kernel_ms", ms.get<double>(), "ms");
      row.rank = 0;
      row.labels = {{"kernel_class", k}};
      rec.metrics.push_back(row);
    }
    for (const auto& c : out["collectives"]) {
      auto row = metric_row("collective_ms", c["ms"].get<double>(), "ms");
      row.rank = 0;
      row.labels = {{"collective", c["name"]}, {"group", c["group"]}, {"bytes_sent", c["bytes_sent"]}};
      rec.metrics.push_back(row);
    }
  }
  const auto id = db.store(rec, common.force ? analysis::OnExisting::replace : analysis::OnExisting::keep);
  log(common, "stored run " + std::to_string(id) + " in " + common.db);
}

void save_calibration(const CommonOptions& common, analysis::Database* db, const analysis::Calibration& calibration,
                      const std::string& name, const std::vector<std::string>& sources, const std::string& out) {
  if (db) {
    db->store(analysis::calibration_record(calibration, {{"name", name}, {"sources", sources}}),
              analysis::OnExisting::replace);
    log(common, "stored calibration '" + name + "' in " + common.db);
  }
  if (!out.empty()) {
    analysis::write_calibration(out, calibration);
    log(common, "wrote calibration '" + name + "' to " + out);
  }
}

nlohmann::json deferral_config_json(const opt::DeferralConfig& c, const std::string& mode,
                                    const nlohmann::json& replayed) {
  nlohmann::json config = opt::to_json(c, opt::DeferralSummary{});
  config = {{"model", config["model"]}, {"optimizer", config["optimizer"]}, {"world", config["world"]},
            {"fraction", config["fraction"]}, {"capacity_factor", config["capacity_factor"]}, {"ef", config["ef"]},
            {"norms", config["norms"]}, {"steps", config["steps"]}, {"trials", config["trials"]}, {"mode", mode},
            {"seed", c.seed}};
  if (!replayed.is_null()) config["replayed"] = replayed;
  if (c.momentum_dtype != opt::Dtype::float32) config["momentum_dtype"] = std::string(opt::to_string(c.momentum_dtype));
  return config;
}

analysis::RunRecord deferral_record(const nlohmann::json& config, const nlohmann::json& result,
                                    const opt::DeferralSummary& s, std::uint64_t seed) {
  auto rec = analysis::RunRecord::begin("deferral", analysis::RunMode::simulated, config, seed);
  for (const char* key : {"deferred_fraction", "deferred_fraction_step_p50", "deferred_fraction_step_p99",
                          "deferred_fraction_step_max", "steps_with_deferral", "effective_applied_fraction",
                          "nominal_fraction", "analytic_deferred_fraction", "winner_rows", "deferred_rows",
                          "waits_censored", "waits_abandoned"}) {
    rec.metrics.push_back({.name = key, .value = result.at(key).get<double>(), .unit = ""});
  }
  for (const char* key : {"a2a_payload_bytes", "a2a_payload_bytes_c1", "extra_bytes_over_c1"}) {
    rec.metrics.push_back({.name = key, .value = result.at(key).get<double>(), .unit = "bytes"});
  }
  for (const auto& h : result.at("wait_histogram")) {
    rec.metrics.push_back({.name = "wait_steps_count", .value = h.at("count").get<double>(), .unit = "",
                           .labels = {{"steps", h.at("steps")}}});
  }
  for (std::size_t t = 0; t < s.counters.size(); ++t) {
    for (std::size_t k = 0; k < s.counters[t].size(); ++k) {
      for (std::size_t r = 0; r < s.counters[t][k].size(); ++r) {
        const auto& c = s.counters[t][k][r];
        rec.deferral.push_back({static_cast<std::int64_t>(t), static_cast<std::int64_t>(k),
                                static_cast<std::int64_t>(r), c.winner_rows, c.deferred_rows});
      }
    }
  }
  return rec;
}

}  // namespace dionsim::cli
