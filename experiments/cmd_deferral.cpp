// dionsim deferral: how often global_capped defers winners, per world size and capacity_factor,
// simulated with the optimizer's own capped selection and pooled pack over many steps of
// momentum + error-feedback dynamics. Logic: optimizer/deferral.hpp.
#include <cstdio>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "analysis/store.hpp"
#include "analysis/store_provenance.hpp"
#include "common/error.hpp"
#include "common/parse.hpp"
#include "experiments/cli.hpp"
#include "experiments/record.hpp"
#include "optimizer/deferral.hpp"
#include "optimizer/deferral_json.hpp"

namespace dionsim::cli {

namespace {

void print_header() {
  std::printf("%6s %8s %-22s %-7s %12s %10s %10s %10s %7s %12s %9s %14s\n", "world", "c", "norms", "mode",
              "deferred", "step_p50", "step_p99", "step_max", "any%", "analytic", "eff_frac", "extra_bytes");
}

void print_row(const opt::DeferralConfig& c, const opt::DeferralSummary& s) {
  const std::string cf = c.capacity_factor ? std::to_string(*c.capacity_factor).substr(0, 6) : "auto";
  std::printf("%6lld %8s %-22s %-7s %12.4e %10.3e %10.3e %10.3e %7.2f %12.4e %9.5f %14lld%s\n",
              static_cast<long long>(c.world), cf.c_str(), c.stream.text.c_str(),
              std::string(opt::to_string(s.mode)).c_str(), s.deferred_fraction, s.step_p50, s.step_p99, s.step_max,
              100.0 * s.steps_with_deferral, s.analytic_deferred_fraction, s.effective_fraction,
              static_cast<long long>(s.extra_bytes), s.packed_groups == 0 ? "  (no packed group: all routed)" : "");
}

// One run per configuration: the JSON results as metrics, the per-rank counters as deferral rows.
void record(analysis::Database& db, const nlohmann::json& config, const nlohmann::json& result,
            const opt::DeferralSummary& s, std::uint64_t seed, bool force) {
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
        rec.deferral.push_back({static_cast<std::int64_t>(t), static_cast<std::int64_t>(k), static_cast<std::int64_t>(r),
                                c.winner_rows, c.deferred_rows});
      }
    }
  }
  db.store(rec, force ? analysis::OnExisting::replace : analysis::OnExisting::keep);
}

}  // namespace

int run_deferral(std::span<const std::string> args) {
  Command cmd("deferral", "--model M --world W[,W...] [--capacity-factor C[,C...]] [--norms STREAM] [--json]",
              "Simulates global_capped deferral with the optimizer's own winner selection and pooled pack over\n"
              "--steps steps of Dion2/NorDion2 momentum and error feedback (deferred winners keep accumulating),\n"
              "for every (world, capacity_factor). --recommend --target T: per world, the smallest c whose\n"
              "deferral stays <= T. STREAM: iid | lognormal:SIGMA | skew:rank=R,factor=F | skew:rows=P,factor=F |\n"
              "replay:DB (gradient row statistics recorded by 'dionsim step --db DB').");
  std::string model, optimizer = "dion2", worlds, capacity = "auto", norms = "iid", mode = "auto";
  double fraction = 0.25, ef = 0.95, target = 1e-4;
  std::int64_t steps = 20, trials = 1;
  int threads = 2;
  bool recommend = false;
  cmd.options().add_options()
      ("model", po::value(&model)->required(), "seed-5120x8, gpt-<h>x<L>, gpt-1b, gpt-14b or inventory.json")
      ("optimizer", po::value(&optimizer)->default_value(optimizer), "dion2 | nordion2 (EF decay: ef_decay | mu)")
      ("world", po::value(&worlds)->required(), "world sizes >= 2: list or range (16,64 or 16..1024)")
      ("fraction", po::value(&fraction)->default_value(fraction, "0.25"), "selected fraction, in (0, 1]")
      ("capacity-factor", po::value(&capacity)->default_value(capacity), "list of auto or c >= 1.0")
      ("norms", po::value(&norms)->default_value(norms), "gradient stream (see above)")
      ("ef", po::value(&ef)->default_value(ef, "0.95"), "EF decay of applied rows (Dion2 ef_decay, NorDion2 mu)")
      ("steps", po::value(&steps)->default_value(steps), "optimizer steps per trial")
      ("trials", po::value(&trials)->default_value(trials), "independent trials (seeds derived from --seed)")
      ("mode", po::value(&mode)->default_value(mode), "exact | reduced | auto (exact when it fits)")
      ("threads", po::value(&threads)->default_value(threads), "worker threads (results do not depend on it)")
      ("recommend", po::bool_switch(&recommend), "per world: smallest capacity_factor with deferral <= --target")
      ("target", po::value(&target)->default_value(target, "1e-4"), "deferral target for --recommend, in (0, 1)");
  if (!cmd.parse(args)) return 0;
  opt::DeferralConfig base;
  base.optimizer = opt::parse_optimizer(optimizer, "--optimizer");
  base.fraction = fraction;
  base.ef = ef;
  base.stream = opt::parse_norm_stream(norms, "--norms");
  // replay:DB: the statistics are loaded (and the file checked) before any work.
  const nlohmann::json replayed = base.stream.kind == opt::StreamKind::replay ? load_replay(base.stream) : nlohmann::json();
  base.steps = steps;
  base.trials = trials;
  base.seed = cmd.common().seed;
  base.mode = opt::parse_deferral_mode(mode, "--mode");
  base.threads = threads;
  if (threads < 1) throw_bad_usage("--threads", std::to_string(threads), "an integer >= 1");
  if (recommend && !(target > 0.0 && target < 1.0)) {
    throw_bad_usage("--target", std::to_string(target), "a number in (0, 1)");
  }
  // Validate every configuration before any work (STYLE.md point 8).
  std::vector<opt::DeferralConfig> configs;
  const std::vector<std::int64_t> world_list = parse_int_list(worlds, "--world");
  std::vector<std::optional<double>> capacities;
  for (const std::string& item : split_list(capacity, "--capacity-factor")) {
    capacities.push_back(item == "auto" ? std::nullopt : std::optional<double>(parse_double(item, "--capacity-factor")));
  }
  for (std::int64_t w : world_list) {
    for (const auto& cf : recommend ? std::vector<std::optional<double>>{std::nullopt} : capacities) {
      opt::DeferralConfig c = base;
      c.world = w;
      c.capacity_factor = cf;
      opt::validate(c);
      configs.push_back(c);
    }
  }
  const opt::Inventory inventory = opt::load_inventory(model);
  for (auto& c : configs) c.inventory = inventory;
  std::optional<analysis::Database> db;
  if (!cmd.common().db.empty()) {
    if (recommend) throw_bad_usage("--db", cmd.common().db, "no --db with --recommend (record the sweep instead)");
    db.emplace(analysis::Database::open(cmd.common().db));
  }
  nlohmann::json out = nlohmann::json::array();
  if (!cmd.common().json && !recommend) print_header();
  if (recommend && !cmd.common().json) {
    std::printf("%6s %-22s %10s %12s %14s %6s\n", "world", "norms", "target", "c", "deferred", "extra_bytes");
  }
  for (const auto& c : configs) {
    log(cmd.common(), "deferral: " + model + " world " + std::to_string(c.world) + " c " +
                          (c.capacity_factor ? std::to_string(*c.capacity_factor) : std::string("auto")));
    if (recommend) {
      const opt::Recommendation r = opt::recommend_capacity(c, target);
      out.push_back(opt::to_json(c, target, r));
      if (!cmd.common().json) {
        std::printf("%6lld %-22s %10.2e %12s %14.4e %14lld\n", static_cast<long long>(c.world), c.stream.text.c_str(),
                    target, r.capacity_factor ? std::to_string(*r.capacity_factor).substr(0, 6).c_str() : "> 4",
                    r.deferred_fraction, static_cast<long long>(r.extra_bytes));
      }
      continue;
    }
    nlohmann::json config = opt::to_json(c, opt::DeferralSummary{});
    config = {{"model", config["model"]}, {"optimizer", config["optimizer"]}, {"world", config["world"]},
              {"fraction", config["fraction"]}, {"capacity_factor", config["capacity_factor"]}, {"ef", config["ef"]},
              {"norms", config["norms"]}, {"steps", config["steps"]}, {"trials", config["trials"]}, {"mode", mode},
              {"seed", c.seed}};
    if (!replayed.is_null()) config["replayed"] = replayed;
    if (db && !cmd.common().force && db->has_run("deferral", analysis::config_hash(config))) {
      log(cmd.common(), "deferral: already in " + cmd.common().db + ", skipped (--force re-runs)");
      continue;
    }
    const opt::DeferralSummary s = opt::run_deferral(c);
    out.push_back(opt::to_json(c, s));
    if (!cmd.common().json) print_row(c, s);
    if (db) record(*db, config, out.back(), s, c.seed, cmd.common().force);
  }
  if (cmd.common().json) print_json(out);
  return 0;
}

}  // namespace dionsim::cli
