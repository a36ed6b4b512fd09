#include "analysis/records/records.hpp"

#include <filesystem>
#include <fstream>
#include <string_view>

#include "common/json_input.hpp"
#include "common/error.hpp"
#include "optimizer/deferral_json.hpp"
#include "optimizer/plan_json.hpp"
#include "optimizer/row_stats.hpp"

namespace dionsim::analysis {

using nlohmann::json;

namespace {

std::string_view float_bytes(const std::vector<float>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)};
}

MetricRow metric_row(const std::string& name, double value, const std::string& unit) {
  MetricRow row;
  row.name = name;
  row.value = value;
  row.unit = unit;
  return row;
}

}  // namespace

nlohmann::json plan_config_json(const opt::Inventory& inventory, const opt::PlanConfig& config) {
  opt::Plan empty;
  empty.config = config;
  nlohmann::json shapes = nlohmann::json::array();
  for (const auto& m : inventory.entries) shapes.push_back({m.name, m.rows, m.cols, m.count});
  return {{"model", inventory.name}, {"matrices", shapes}, {"plan", opt::to_json(empty).at("config")}};
}

void add_plan_metrics(RunRecord& record, const opt::Plan& plan) {
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

nlohmann::json step_config_json(const opt::NumericsCase& c) {
  const std::string where = (std::filesystem::path(c.dir) / "case.json").string();
  const nlohmann::json case_json = read_json_file(where, "the case.json that was just loaded");
  // One hash per array, then the hash of their concatenation: no copy of the arrays.
  std::string digests;
  for (const auto& w : c.initial) digests += sha256_hex(float_bytes(w));
  for (const auto& step : c.grads) {
    for (const auto& g : step) digests += sha256_hex(float_bytes(g));
  }
  return {{"case", case_json}, {"inputs_sha256", sha256_hex(digests)}};
}

void add_step_results(RunRecord& record, const opt::NumericsCase& c, const opt::ReferenceOptimizer& optimizer,
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
  for (auto& s : opt::gradient_row_stats(c.params, c.grads, c.config.plan.world)) {
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

void add_collective_results(RunRecord& record, const sim::CollectiveSpec& spec, const sim::CollectiveRow& row,
                            const sim::CollectiveResult& r, int ranks, std::int64_t nodes) {
  record.collectives.push_back({.op = sim::to_string(spec.op), .bytes = row.bytes, .world = ranks, .nodes = nodes,
                                .time_us = row.time_us, .algbw_GBps = row.algbw_GBps, .busbw_GBps = row.busbw_GBps});
  record.metrics.push_back({.name = "messages", .value = static_cast<double>(r.messages), .unit = ""});
}

RunRecord measure_record(json config, const json& out, std::uint64_t seed) {
  auto rec = RunRecord::begin("measure", RunMode::measured, std::move(config), seed);
  if (out["mode"] == "collective") {
    for (const auto& r : out["rows"])
      rec.collectives.push_back({out["op"].get<std::string>(), r["bytes"].get<std::int64_t>(),
                                 out["world"].get<std::int64_t>(), 1, r["time_us"].get<double>(),
                                 r["algbw_GBps"].get<double>(), r["busbw_GBps"].get<double>()});
    return rec;
  }
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
  return rec;
}

nlohmann::json deferral_config_json(const opt::DeferralConfig& c, const std::string& mode,
                                    const nlohmann::json& replayed) {
  nlohmann::json config = opt::config_json(c);
  config["mode"] = mode;  // the mode asked for (auto stays auto), not the one that ran
  if (!replayed.is_null()) config["replayed"] = replayed;
  return config;
}

RunRecord deferral_record(const nlohmann::json& config, const nlohmann::json& result,
                                    const opt::DeferralSummary& s, std::uint64_t seed) {
  auto rec = RunRecord::begin("deferral", RunMode::simulated, config, seed);
  for (const char* key : {"deferred_fraction", "deferred_fraction_step_p50", "deferred_fraction_step_p99",
                          "deferred_fraction_step_max", "steps_with_deferral", "effective_applied_fraction",
                          "nominal_fraction", "analytic_deferred_fraction", "winner_rows", "deferred_rows",
                          "waits_censored", "waits_abandoned", "packed_groups", "routed_groups"}) {
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

RunRecord whatif_record(const sim::WhatifResult& r, const nlohmann::json& config, std::uint64_t seed,
                        const std::map<std::string, Interval>* intervals) {
  auto rec = RunRecord::begin("whatif", RunMode::simulated, config, seed);
  auto metrics = sim::metrics_json(r);
  if (intervals) add_interval_json(metrics, *intervals);
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

json measured_config_json(const MeasurementConfig& c) {
  return {{"source", c.source},
          {"run", c.run},
          {"hardware", c.hardware},
          {"gpus_per_node", c.gpus_per_node},
          {"nodes", c.nodes},
          {"world", c.world},
          {"model", c.model},
          {"optimizer", c.optimizer},
          {"ns", c.ns},
          {"scope", c.scope},
          {"fraction", c.fraction},
          {"capacity_factor", opt::capacity_factor_json(c.capacity_factor, opt::AutoAs::null)}};
}

RunRecord measured_record(const MeasuredConfiguration& m) {
  auto rec = RunRecord::begin("measured_csv", RunMode::measured, measured_config_json(m.config), 0);
  for (const auto& [name, value] : m.metrics) {
    const auto* info = find_metric(name);
    rec.metrics.push_back({name, value, info ? std::string(info->unit) : std::string(), {}, {}, json::object()});
  }
  return rec;
}

RunRecord calibration_record(const Calibration& calibration, const json& config) {
  auto rec = RunRecord::begin("calibrate", RunMode::simulated, config, 0);
  rec.calibrations.push_back({.name = calibration.name,
                              .schema_version = calibration.schema_version,
                              .body = to_json(calibration),
                              .created_utc = {}});
  for (const auto& [name, p] : calibration.parameters)
    rec.metrics.push_back({name, p.value, p.units, {}, {}, json::object()});
  return rec;
}

namespace {

std::string validation_prefix(ValidationKind kind) {
  switch (kind) {
    case ValidationKind::leave_one_out: return "loo";
    case ValidationKind::calibration: return "holdout";
    case ValidationKind::extrapolation: return "extrapolate";
  }
  return "loo";
}

}  // namespace

RunRecord validation_record(const std::vector<PredictionRow>& rows, const std::vector<MetricSummary>& summary,
                            const json& config, std::uint64_t seed, ValidationKind kind) {
  const std::string p = validation_prefix(kind);
  auto rec = RunRecord::begin("validate", RunMode::simulated, config, seed);
  for (const auto& r : rows) {
    MetricRow m{.name = p + "_error_pct", .value = r.error_pct, .unit = "pct", .rank = {}, .step = {}, .labels = {}};
    m.labels = {
        {"configuration", r.configuration}, {"metric", r.metric}, {"measured", r.measured}, {"predicted", r.predicted}};
    rec.metrics.push_back(std::move(m));
  }
  for (const auto& s : summary) {
    const json labels = {{"metric", s.metric}, {"count", s.count}};
    rec.metrics.push_back({p + "_mean_abs_error_pct", s.mean_abs_error_pct, "pct", {}, {}, labels});
    rec.metrics.push_back({p + "_max_abs_error_pct", s.max_abs_error_pct, "pct", {}, {}, labels});
  }
  return rec;
}

void add_interval_results(RunRecord& rec, const std::vector<IntervalRow>& intervals,
                          const std::vector<CoverageSummary>& coverage, ValidationKind kind) {
  const std::string p = validation_prefix(kind);
  for (auto& m : rec.metrics) {
    if (m.name != p + "_error_pct") continue;
    for (const auto& r : intervals) {
      if (r.row.configuration != m.labels.value("configuration", "") || r.row.metric != m.labels.value("metric", ""))
        continue;
      m.labels["predicted_lo"] = r.interval.lo;
      m.labels["predicted_hi"] = r.interval.hi;
      m.labels["covered"] = r.covered();
      break;
    }
  }
  for (const auto& s : coverage) {
    const json labels = {{"metric", s.metric}, {"count", s.count}, {"covered", s.covered}};
    rec.metrics.push_back({p + "_coverage", s.count ? static_cast<double>(s.covered) / s.count : 0.0, "", {}, {}, labels});
    rec.metrics.push_back({p + "_mean_half_width_pct", s.mean_half_width_pct, "pct", {}, {}, labels});
  }
}

RunRecord extrapolation_record(const Extrapolation& e, const json& config, std::uint64_t seed) {
  std::vector<PredictionRow> rows;
  for (const auto& r : e.rows) rows.push_back(r.row);
  auto rec = validation_record(rows, summarize(rows), config, seed, ValidationKind::extrapolation);
  add_interval_results(rec, e.rows, e.summary, ValidationKind::extrapolation);
  for (const auto& d : e.differences) {
    MetricRow m{.name = "extrapolate_difference", .value = d.interval.value, .unit = "", .rank = {}, .step = {}, .labels = {}};
    if (const auto* info = find_metric(d.metric)) m.unit = std::string(info->unit);
    m.labels = {{"a", d.a},
                {"b", d.b},
                {"scope_a", d.scope_a},
                {"scope_b", d.scope_b},
                {"nodes", d.nodes},
                {"metric", d.metric},
                {"measured", d.measured},
                {"predicted_lo", d.interval.lo},
                {"predicted_hi", d.interval.hi},
                {"probability_positive", d.interval.probability_above(0.0)},
                {"covered", d.covered()}};
    rec.metrics.push_back(std::move(m));
  }
  for (const auto& [name, p] : e.calibration.parameters) {
    rec.metrics.push_back({"extrapolate_parameter", p.value, p.units, {}, {}, {{"parameter", name}, {"stderr", p.std_error}}});
  }
  return rec;
}

}  // namespace dionsim::analysis
