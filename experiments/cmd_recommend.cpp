// dionsim recommend: per cluster size, the scope and capacity_factor with the shortest predicted
// step whose deferral stays under a target, the runner-up and the margin. Logic: sim/recommend.hpp
// (over sim/whatif.hpp and the deferral engine); options shared with whatif: experiments/whatif_cli.
#include <iostream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "analysis/records/records.hpp"
#include "analysis/store/store.hpp"
#include "common/error.hpp"
#include "common/progress.hpp"
#include "experiments/cli.hpp"
#include "experiments/whatif_cli.hpp"
#include "analysis/calibration/published_intervals.hpp"
#include "sim/recommend.hpp"

namespace dionsim::cli {

namespace {

// One `recommend` run per cluster: its configuration (the cluster, the candidates in order, the
// target and the estimate) and, per candidate, its metrics under "<candidate>.<metric>"; the pick
// and the runner-up as indices into config.candidates.
analysis::RunRecord recommend_record(const nlohmann::json& config, const nlohmann::json& out, std::uint64_t seed) {
  auto rec = analysis::RunRecord::begin("recommend", analysis::RunMode::simulated, config, seed);
  const auto add = [&rec](const std::string& name, const nlohmann::json& v, const char* unit) {
    if (v.is_number()) rec.metrics.push_back({.name = name, .value = v.get<double>(), .unit = unit});
  };
  const auto& cands = out["candidates"];
  for (std::size_t i = 0; i < cands.size(); ++i) {
    const auto& c = cands[i];
    const std::string p = c["candidate"].get<std::string>() + ".";
    for (const char* m : {"step_wall_ms", "opt_wall_ms"}) {
      for (const char* suffix : {"", "_lo", "_hi"}) add(p + m + suffix, c.value(std::string(m) + suffix, nlohmann::json()), "ms");
    }
    add(p + "deferral_fraction", c["deferral_fraction"], "");
    for (const char* g : {"packed", "exact_global", "local", "unsharded"}) add(p + "groups_" + g, c["routing"][g], "");
    add(p + "capacity_factor_resolved_min", c["capacity_factor_resolved_min"], "");
    add(p + "capacity_factor_resolved_max", c["capacity_factor_resolved_max"], "");
    if (c["selection_quality"].is_object()) {
      for (const char* q : {"overlap_mean", "overlap_final", "overlap_min", "effective_fraction"}) {
        add(p + "selection_" + q, c["selection_quality"][q], "");
      }
    }
    for (const char* role : {"pick", "runner_up"}) {
      if (!out[role].is_null() && out[role]["candidate"] == c["candidate"]) add(std::string(role) + "_index", i, "");
    }
  }
  add("margin_ms", out["margin_ms"], "ms");
  if (out.contains("margin_ms_lo")) {
    add("margin_ms_lo", out["margin_ms_lo"], "ms");
    add("margin_ms_hi", out["margin_ms_hi"], "ms");
    add("p_pick_wins", out["p_pick_wins"], "");
  }
  if (out.contains("margin_ms_collectives_at_record_low")) {
    add("margin_ms_collectives_at_record_low", out["margin_ms_collectives_at_record_low"], "ms");
    add("margin_ms_collectives_at_record_high", out["margin_ms_collectives_at_record_high"], "ms");
  }
  return rec;
}

}  // namespace

int run_recommend(std::span<const std::string> args) {
  Command cmd("recommend",
              "--model M --nodes N,.. | --gpus W,.. --fabric F [--hardware H] [--target-deferral T] (--fwd-bwd-ms X | --mfu X)",
              "Per cluster size: the scope and capacity_factor with the shortest predicted training step whose\n"
              "global_capped deferral (the deferral engine's estimate, --deferral-estimate) stays <= --target-deferral;\n"
              "the runner-up of another scope and the margin; the pick's routing and resolved c. The candidates are\n"
              "--scope x --capacity-factor; every other whatif option describes the clusters.");
  WhatifCli cli;
  cli.options.capacities = "auto,1,1.05,1.1,1.25,1.5,2";
  cli.dynamics_always = true;  // the selection quality of the pick and the runner-up
  double target = 1e-4;
  add_whatif_options(cmd.options(), cli);
  cmd.options().add_options()("target-deferral", po::value(&target)->default_value(target, "1e-4"),
                              "largest acceptable deferral: fraction of winner rows deferred per step, in (0, 1)");
  cmd.offer_csv();
  if (!cmd.parse(args)) return 0;
  const auto& common = cmd.common();
  WhatifSetup setup = resolve_whatif(cli, cmd);
  sim::RecommendStudy study{setup.study, target, &setup.calibration.step};
  // The stress test: every collective call at the published record's measured / modelled ends.
  study.collective_stress_low = analysis::kCollectiveRecordLow;
  study.collective_stress_high = analysis::kCollectiveRecordHigh;
  sim::validate(study);  // before any work
  const auto configs = expand_calibrated(setup, common);
  warn_degenerate(sim::degeneracy_notes(configs, setup.inventory));

  nlohmann::json rows = nlohmann::json::array();
  std::int64_t stored = 0;
  bool header_printed = false;
  ProgressBar bar("recommend", static_cast<std::int64_t>(configs.size()), common.quiet);
  const auto done = [&](const sim::ClusterRecommendation& r) {
    auto out = sim::to_json(r, study);
    if (setup.db) {
      nlohmann::json config = sim::cluster_json(r);
      config["candidates"] = nlohmann::json::array();
      for (const auto& c : r.candidates) config["candidates"].push_back(c.label());
      for (const char* key : {"target_deferral", "deferral_estimate", "deferral_steps", "deferral_norms", "deferral_seed"}) {
        if (out.contains(key)) config[key] = out[key];
      }
      // Other interval options give other margins and P(win): another run.
      if (const auto o = analysis::interval_options_json(cli.intervals); !o.is_null()) config["interval_options"] = o;
      // One transaction per cluster; a stored cluster is shown (recomputed, deterministic), not stored again.
      if (common.force || !setup.db->has_run("recommend", analysis::config_hash(config))) {
        if (setup.db->store(recommend_record(config, out, common.seed),
                            common.force ? analysis::OnExisting::replace : analysis::OnExisting::skip) != 0) {
          ++stored;
        }
      }
    }
    if (common.machine()) {
      rows.push_back(std::move(out));
    } else {
      if (!header_printed) std::cout << sim::recommend_table_header() << '\n';
      header_printed = true;
      std::cout << sim::recommend_table_row(r) << '\n' << std::flush;
    }
    bar.advance(static_cast<std::int64_t>(r.candidates.size()));
  };
  // The margin on one node set: both configurations perturbed together (intervals.hpp), so what
  // they share cancels; P(pick wins) = P(runner-up − pick > 0).
  const sim::MarginModel margin = [&setup](const sim::WhatifConfig& pick, const sim::WhatifConfig& runner_up) {
    const auto d = setup.intervals->differences(runner_up, pick, setup.inventory);
    const auto it = d.find("step_wall_ms");
    if (it == d.end()) return std::optional<sim::MarginInterval>{};
    return std::optional<sim::MarginInterval>{{it->second.lo, it->second.hi, it->second.probability_above(0.0)}};
  };
  // The pick's and the runner-up's own 90 % intervals (step and optimizer wall).
  const sim::CandidateIntervals intervals = [&setup](const sim::WhatifConfig& candidate) {
    std::map<std::string, sim::MetricInterval> out;
    for (const auto& [metric, iv] : setup.intervals->intervals(candidate, setup.inventory)) {
      if (metric == "step_wall_ms" || metric == "opt_wall_ms") out[metric] = {iv.lo, iv.hi};
    }
    return out;
  };
  (void)sim::recommend(study, setup.inventory, *setup.kernels, done, margin, intervals);
  for (const auto& line : setup.intervals->uncertainty().notes) log(common, "intervals: " + line);
  bar.finish();
  if (setup.db) log(common, "recommend: " + std::to_string(stored) + " cluster(s) recorded in " + common.db);
  if (common.machine()) print_result(common, rows);
  return 0;
}

}  // namespace dionsim::cli
