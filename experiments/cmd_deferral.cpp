// dionsim deferral: how often global_capped defers winners, per world size and capacity_factor,
// simulated with the optimizer's own capped selection and pooled pack over many steps of
// momentum + error-feedback dynamics. Logic: optimizer/deferral.hpp.
#include <cstdio>
#include <optional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "analysis/records/stored_runs.hpp"
#include "analysis/store/store.hpp"
#include "analysis/store/store_provenance.hpp"
#include "common/error.hpp"
#include "common/format.hpp"
#include "common/parse.hpp"
#include "common/progress.hpp"
#include "experiments/cli.hpp"
#include "experiments/record.hpp"
#include "optimizer/deferral.hpp"
#include "optimizer/deferral_json.hpp"

namespace dionsim::cli {

int run_deferral(std::span<const std::string> args) {
  Command cmd("deferral", "--model M --world W[,W...] [--capacity-factor C[,C...]] [--norms STREAM] [--json]",
              "Simulates global_capped deferral with the optimizer's own winner selection and pooled pack over\n"
              "--steps steps of Dion2/NorDion2 momentum and error feedback (deferred winners keep accumulating),\n"
              "for every (world, capacity_factor). --recommend --target T: per world, the smallest c whose\n"
              "deferral stays <= T. STREAM: iid | lognormal:SIGMA | skew:rank=R,factor=F | skew:rows=P,factor=F |\n"
              "replay:DB (gradient row statistics recorded by 'dionsim step --db DB').");
  std::string model, optimizer = "dion2", worlds, capacity = "auto", norms = "iid", mode = "auto", dtype = "float32";
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
      ("momentum-dtype", po::value(&dtype)->default_value(dtype),
       "float32 | bfloat16 (= parameter dtype): bf16 momentum and keys, as the optimizer rounds them")
      ("steps", po::value(&steps)->default_value(steps), "optimizer steps per trial")
      ("trials", po::value(&trials)->default_value(trials), "independent trials (seeds derived from --seed)")
      ("mode", po::value(&mode)->default_value(mode), "exact | reduced | auto (exact when it fits)")
      ("threads", po::value(&threads)->default_value(threads), "worker threads (results do not depend on it)")
      ("recommend", po::bool_switch(&recommend), "per world: smallest capacity_factor with deferral <= --target")
      ("target", po::value(&target)->default_value(target, "1e-4"), "deferral target for --recommend, in (0, 1)");
  cmd.offer_csv();
  if (!cmd.parse(args)) return 0;
  opt::DeferralConfig base;
  base.plan.optimizer = opt::parse_optimizer(optimizer, "--optimizer");
  base.plan.fraction = fraction;
  base.ef = ef;
  base.momentum_dtype = opt::parse_dtype(dtype, "--momentum-dtype");
  base.stream = opt::parse_norm_stream(norms, "--norms");
  // replay:DB: the statistics are loaded (and the file checked) before any work.
  const nlohmann::json replayed = base.stream.kind == opt::StreamKind::replay ? analysis::load_replay(base.stream) : nlohmann::json();
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
    capacities.push_back(opt::parse_capacity_factor(item, "--capacity-factor"));
  }
  for (std::int64_t w : world_list) {
    for (const auto& cf : recommend ? std::vector<std::optional<double>>{std::nullopt} : capacities) {
      opt::DeferralConfig c = base;
      c.plan.world = w;
      c.plan.capacity_factor = cf;
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
  // Progress on a terminal (stderr only): one tick per simulation, the bisection's included.
  const std::int64_t per_config = recommend ? opt::recommend_max_evaluations() : 1;
  ProgressBar bar("deferral", static_cast<std::int64_t>(configs.size()) * per_config, cmd.common().quiet);
  bool header_printed = false;  // with the first row: an error before it leaves no orphan header
  const auto print_row = [&](const std::string& row) {
    if (bar.visible()) std::fputs("\r\033[K", stderr);  // the row does not land behind the bar
    if (!header_printed) std::fputs((recommend ? opt::recommend_table_header() : opt::table_header()).c_str(), stdout);
    header_printed = true;
    std::fputs(row.c_str(), stdout);
  };
  for (const auto& c : configs) {
    const std::string what = "world " + std::to_string(c.plan.world) + " c ";
    const auto show = [&](std::optional<double> cf) { bar.set_detail(what + (cf ? format("%.3f", *cf) : "auto")); };
    if (!bar.visible())
      log(cmd.common(), "deferral: " + model + " " + what + (c.plan.capacity_factor ? std::to_string(*c.plan.capacity_factor) : "auto"));
    if (recommend) {
      std::int64_t started = 0;
      const opt::Recommendation r = opt::recommend_capacity(c, target, opt::kRecommendMaxC, opt::kRecommendResolution,
                                                            [&](double cf) {
                                                              if (started++ > 0) bar.advance();
                                                              show(cf);
                                                            });
      bar.advance(per_config - started + 1);  // the last simulation, and the bisection steps it did not need
      out.push_back(opt::to_json(c, target, r));
      if (!cmd.common().machine()) print_row(opt::recommend_table_row(c, target, r));
      continue;
    }
    const nlohmann::json config = analysis::deferral_config_json(c, mode, replayed);
    const auto stored = db && !cmd.common().force ? db->stored_revision("deferral", analysis::config_hash(config))
                                                  : std::nullopt;
    if (stored) {
      log(cmd.common(), "deferral: already in " + cmd.common().db + Recorder::other_revision_note(*stored) +
                            ": skipped (--force re-runs)");
      bar.advance();
      continue;
    }
    show(c.plan.capacity_factor);
    const opt::DeferralSummary s = opt::run_deferral(c);
    bar.advance();
    out.push_back(opt::to_json(c, s));
    if (!cmd.common().machine()) print_row(opt::table_row(c, s));
    if (db) {
      db->store(analysis::deferral_record(config, out.back(), s, c.seed),
                cmd.common().force ? analysis::OnExisting::replace : analysis::OnExisting::skip);
    }
  }
  bar.finish();
  if (cmd.common().machine()) print_result(cmd.common(), out);
  return 0;
}

}  // namespace dionsim::cli
