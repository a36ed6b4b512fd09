// dionsim recommend on the library (issue 19 item 4): the pick and the runner-up against a
// brute-force scan of every candidate, the deferral target, the lazy simulated estimate, the
// degenerate global_capped that is global, the margin model hook, bad input.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "optimizer/deferral.hpp"
#include "optimizer/inventory.hpp"
#include "sim/recommend.hpp"
#include "topologies/topology.hpp"

using namespace dionsim;
using namespace dionsim::sim;

namespace {

RecommendStudy seed_recommend() {
  RecommendStudy r;
  auto& s = r.study;
  s.base.model = "seed-5120x8";
  s.base.mfu = 0.45;
  s.base.deferral.steps = 2;  // the selection quality's steps (and a simulated estimate's)
  s.gpus_per_node = 8;
  s.scopes = {opt::Scope::local, opt::Scope::global, opt::Scope::global_capped};
  s.fractions = {0.25};
  s.capacity_factors = {std::nullopt, 1.0, 1.1, 2.0};
  s.nodes = {1, 2};
  s.fabrics = {topo::preset("h100-ndr400")};
  r.target_deferral = 1e-4;
  return r;
}

KernelModel h100() { return KernelModel(default_kernel_model_config(hardware_preset("h100-sxm", "--hardware"))); }

// What the pick and runner-up must be, by a plain scan of the candidates.
void check_choice(const ClusterRecommendation& rec, double target, bool runner_up = true) {
  REQUIRE(rec.pick.has_value());
  const auto& pick = rec.candidates[*rec.pick];
  for (std::size_t i = 0; i < rec.candidates.size(); ++i) {
    const auto& c = rec.candidates[i];
    if (!c.deferral_fraction) continue;  // not estimated (simulated, slower than the choice)
    CHECK(*c.feasible == (*c.deferral_fraction <= target));
    if (c.result.config.plan.scope != opt::Scope::global_capped) CHECK(*c.deferral_fraction == 0.0);
    if (*c.feasible && c.eligible()) CHECK(pick.result.step_wall_ns <= c.result.step_wall_ns);
    if (i != *rec.pick && i != rec.runner_up) CHECK_FALSE(c.result.quality.has_value());
  }
  CHECK(*pick.feasible);
  CHECK(pick.eligible());
  CHECK(pick.result.quality.has_value());
  if (!runner_up) {
    for (const auto& c : rec.candidates) {  // nothing of another effective scope qualifies
      if (c.feasible && *c.feasible && c.eligible()) CHECK(c.effective_scope() == pick.effective_scope());
    }
    CHECK_FALSE(rec.runner_up.has_value());
    return;
  }
  REQUIRE(rec.runner_up.has_value());
  const auto& ru = rec.candidates[*rec.runner_up];
  CHECK(*ru.feasible);
  CHECK(ru.eligible());
  CHECK(ru.effective_scope() != pick.effective_scope());
  CHECK(ru.result.quality.has_value());
  for (const auto& c : rec.candidates) {
    if (c.feasible && *c.feasible && c.eligible() && c.effective_scope() != pick.effective_scope()) {
      CHECK(ru.result.step_wall_ns <= c.result.step_wall_ns);
    }
  }
  CHECK(*rec.margin_ms() == Approx(1e-6 * static_cast<double>(ru.result.step_wall_ns - pick.result.step_wall_ns)));
  CHECK(*rec.margin_ms() >= 0.0);
}

}  // namespace

TEST_CASE("recommend: the fastest candidate within the target, and the runner-up of another scope", "[recommend]") {
  const auto study = seed_recommend();
  const auto inventory = opt::seed_5120x8();
  const auto kernels = h100();
  std::vector<std::int64_t> heard;
  const auto recs = recommend(study, inventory, kernels, [&](const ClusterRecommendation& r) { heard.push_back(r.cluster.world()); });
  REQUIRE(recs.size() == 2);
  CHECK(heard == std::vector<std::int64_t>{8, 16});
  for (const auto& rec : recs) {
    CHECK(rec.candidates.size() == 2 + 4);  // local, global, global_capped at 4 capacity factors
    check_choice(rec, study.target_deferral);
    // The analytic estimate is the deferral engine's, for every candidate.
    for (const auto& c : rec.candidates) {
      REQUIRE(c.deferral_fraction.has_value());
      if (c.result.config.plan.scope == opt::Scope::global_capped) {
        CHECK(*c.deferral_fraction == opt::analytic_deferral(c.result.plan).fraction());
      }
    }
    const auto j = to_json(rec, study);
    CHECK(j["candidates"].size() == rec.candidates.size());
    CHECK(j["pick"]["candidate"] == rec.candidates[*rec.pick].label());
    CHECK(j["pick"]["selection_quality"].is_object());
    CHECK(j["deferral_estimate"] == "analytic");
    CHECK_FALSE(j.contains("scope"));  // the cluster, not a candidate
    CHECK_FALSE(j.contains("p_pick_wins"));  // no margin model given
  }
  // c = 1 at 8 GPUs defers about 1 % of winners: over any target below that.
  const auto& c1 = recs[0].candidates[3];
  REQUIRE(c1.label() == "global_capped@1");
  CHECK(*c1.deferral_fraction > 1e-3);
  CHECK_FALSE(*c1.feasible);
  // A target nothing capped meets leaves local and global.
  auto strict = study;
  strict.target_deferral = 1e-300;
  for (const auto& rec : recommend(strict, inventory, kernels)) {
    check_choice(rec, strict.target_deferral);
    CHECK(rec.candidates[*rec.pick].result.config.plan.scope != opt::Scope::global_capped);
    CHECK(rec.candidates[*rec.runner_up].result.config.plan.scope != opt::Scope::global_capped);
  }
}

TEST_CASE("recommend: the margin model hears the pick and the runner-up", "[recommend]") {
  auto study = seed_recommend();
  study.study.nodes = {1};
  const auto inventory = opt::seed_5120x8();
  int calls = 0;
  const MarginModel model = [&](const WhatifConfig& pick, const WhatifConfig& runner_up) {
    ++calls;
    CHECK(pick.world() == runner_up.world());
    CHECK(pick.plan.scope != runner_up.plan.scope);
    return std::optional<MarginInterval>{{-1.0, 5.0, 0.75}};
  };
  const auto recs = recommend(study, inventory, h100(), {}, model);
  REQUIRE(recs.size() == 1);
  CHECK(calls == 1);
  REQUIRE(recs[0].margin_interval.has_value());
  const auto j = to_json(recs[0], study);
  CHECK(j["margin_ms_lo"] == -1.0);
  CHECK(j["margin_ms_hi"] == 5.0);
  CHECK(j["p_pick_wins"] == 0.75);
  CHECK(recommend_table_row(recs[0]).find("0.750") != std::string::npos);
}

TEST_CASE("recommend: a simulated estimate runs only where the choice needs it", "[recommend]") {
  auto study = seed_recommend();
  study.study.nodes = {1};
  study.study.base.deferral.estimator = DeferralEstimator::simulated;
  const auto inventory = opt::seed_5120x8();
  const auto recs = recommend(study, inventory, h100());
  REQUIRE(recs.size() == 1);
  const auto& rec = recs[0];
  check_choice(rec, study.target_deferral);
  for (const auto& c : rec.candidates) {
    if (!c.deferral_fraction || c.result.config.plan.scope != opt::Scope::global_capped) continue;
    CHECK(c.deferral_estimator.rfind("simulated", 0) == 0);
    opt::DeferralConfig d;
    d.inventory = inventory;
    d.plan.optimizer = c.result.config.plan.optimizer;
    d.plan.world = 8;
    d.plan.fraction = 0.25;
    d.plan.capacity_factor = c.result.config.plan.capacity_factor;
    d.steps = 2;
    CHECK(*c.deferral_fraction == opt::run_deferral(d).deferred_fraction);
  }
  // Candidates slower than the runner-up were not estimated.
  const auto runner_step = rec.candidates[*rec.runner_up].result.step_wall_ns;
  for (const auto& c : rec.candidates) {
    if (c.result.step_wall_ns > runner_step) CHECK_FALSE(c.deferral_fraction.has_value());
  }
}

TEST_CASE("recommend: at 8192 GPUs a global_capped that routes everything is global, not a runner-up", "[recommend]") {
  RecommendStudy study;
  auto& s = study.study;
  s.base.model = "gpt-14b";
  s.base.mfu = 0.45;
  s.base.deferral.steps = 1;
  s.scopes = {opt::Scope::local, opt::Scope::global, opt::Scope::global_capped};
  s.fractions = {0.25};
  s.capacity_factors = {std::nullopt, 1.0};
  s.gpus = {8192};
  s.fabrics = {topo::preset("h100-ndr400")};
  const auto inventory = opt::load_inventory("gpt-14b");
  const auto recs = recommend(study, inventory, h100());
  REQUIRE(recs.size() == 1);
  const auto& rec = recs[0];
  // c = 1 still packs one group and defers a quarter of its winners: over 1e-4, so nothing but
  // global qualifies.
  check_choice(rec, study.target_deferral, false);
  CHECK(*rec.candidates[3].deferral_fraction > 0.2);
  const auto& capped_auto = rec.candidates[2];
  REQUIRE(capped_auto.label() == "global_capped@auto");
  CHECK(capped_auto.result.routing.packed == 0);
  CHECK(capped_auto.effective_scope() == opt::Scope::global);
  CHECK_FALSE(capped_auto.degeneracy.empty());
  // global and the all-routed global_capped run the same step: global is picked (it is what it says).
  CHECK(capped_auto.result.step_wall_ns == rec.candidates[1].result.step_wall_ns);
  CHECK(rec.candidates[*rec.pick].result.config.plan.scope == opt::Scope::global);
  // local selects k·w = 8192 of 5120 rows there: listed, never picked; the runner-up is global_capped
  // at a c that still packs (1.5 routes every group too: then there is none).
  CHECK_FALSE(rec.candidates[0].eligible());
  CHECK(rec.candidates[0].result.step_wall_ns > 0);
  study.target_deferral = 0.5;
  const auto loose = recommend(study, inventory, h100());
  check_choice(loose[0], 0.5);
  CHECK(loose[0].candidates[*loose[0].runner_up].label() == "global_capped@1");
}

TEST_CASE("recommend: bad input is refused before anything runs", "[recommend]") {
  auto study = seed_recommend();
  for (double t : {0.0, 1.0, -1e-4, std::numeric_limits<double>::quiet_NaN()}) {
    study.target_deferral = t;
    CHECK_THROWS_WITH(validate(study), Catch::Contains("--target-deferral"));
  }
  study.target_deferral = 1e-4;
  study.study.fractions = {0.25, 0.5};
  CHECK_THROWS_WITH(validate(study), Catch::Contains("one fraction"));
  study.study.fractions = {0.25};
  study.study.nodes.clear();
  CHECK_THROWS_AS(validate(study), UsageError);
}

TEST_CASE("recommend: the pick's and the runner-up's own intervals, no one else's", "[recommend]") {
  auto study = seed_recommend();
  study.study.nodes = {1};
  const auto inventory = opt::seed_5120x8();
  int calls = 0;
  const CandidateIntervals model = [&](const WhatifConfig& c) {
    ++calls;
    const double step = 500.0 + (c.plan.scope == opt::Scope::local ? 0.0 : 1.0);
    return std::map<std::string, MetricInterval>{{"step_wall_ms", {step - 20.0, step + 30.0}}};
  };
  const auto recs = recommend(study, inventory, h100(), {}, {}, model);
  REQUIRE(recs.size() == 1);
  const auto& r = recs[0];
  REQUIRE(r.pick);
  REQUIRE(r.runner_up);
  CHECK(calls == 2);
  for (std::size_t i = 0; i < r.candidates.size(); ++i)
    CHECK(r.candidates[i].intervals.empty() == (i != *r.pick && i != *r.runner_up));
  const auto j = to_json(r, study);
  for (const char* role : {"pick", "runner_up"}) {
    CHECK(j[role].contains("step_wall_ms_lo"));
    CHECK(j[role]["step_wall_ms_hi"].get<double>() - j[role]["step_wall_ms_lo"].get<double>() == Approx(50.0));
  }
  int with = 0;
  for (const auto& c : j["candidates"]) with += c.contains("step_wall_ms_lo") ? 1 : 0;
  CHECK(with == 2);
  CHECK(recommend_table_row(r).find(" ± 25.00") != std::string::npos);  // half of the 50 ms interval
}

TEST_CASE("recommend: the stress test prices both candidates with every collective at the record's ends", "[recommend]") {
  auto study = seed_recommend();
  study.study.nodes = {2};
  const auto inventory = opt::seed_5120x8();
  const auto kernels = h100();
  // At factors of 1 the stress margin is the margin itself.
  study.collective_stress_low = std::array<double, 3>{1.0, 1.0, 1.0};
  study.collective_stress_high = std::array<double, 3>{1.0, 1.0, 1.0};
  auto recs = recommend(study, inventory, kernels);
  REQUIRE(recs.size() == 1);
  REQUIRE(recs[0].stress_margin_ms.has_value());
  CHECK(recs[0].stress_margin_ms->first == Approx(*recs[0].margin_ms()).margin(1e-9));
  CHECK(recs[0].stress_margin_ms->second == Approx(*recs[0].margin_ms()).margin(1e-9));
  CHECK(*recs[0].pick_holds_under_stress() == (*recs[0].margin_ms() > 0));
  // At real ends: each side is the runner-up's step minus the pick's, both re-simulated with every
  // collective call of a size regime at that regime's factor.
  study.collective_stress_low = std::array<double, 3>{0.9, 0.9, 0.9};
  study.collective_stress_high = std::array<double, 3>{3.0, 5.0, 2.5};
  recs = recommend(study, inventory, kernels);
  const auto& rec = recs[0];
  REQUIRE(rec.stress_margin_ms.has_value());
  for (const auto& [factors, margin] : {std::pair{*study.collective_stress_low, rec.stress_margin_ms->first},
                                        std::pair{*study.collective_stress_high, rec.stress_margin_ms->second}}) {
    auto pick = rec.candidates[*rec.pick].result.config, runner_up = rec.candidates[*rec.runner_up].result.config;
    pick.collective_options.time_factor_by_size_regime = factors;
    runner_up.collective_options.time_factor_by_size_regime = factors;
    const double expected = ns_to_ms(run_whatif(runner_up, inventory, kernels).step_wall_ns) -
                            ns_to_ms(run_whatif(pick, inventory, kernels).step_wall_ns);
    CHECK(margin == Approx(expected).margin(1e-9));
  }
  // Slower collectives move the two candidates apart: their collectives differ.
  CHECK(rec.stress_margin_ms->second != Approx(rec.stress_margin_ms->first).margin(1e-6));
  const auto j = to_json(rec, study);
  CHECK(j["margin_ms_collectives_at_record_high"] == rec.stress_margin_ms->second);
  CHECK(j["pick_holds_at_record_ends"] == *rec.pick_holds_under_stress());
  CHECK(recommend_table_row(rec).find(" / ") != std::string::npos);
  // Without the study's ends: no stress test, no field.
  study.collective_stress_low.reset();
  CHECK_FALSE(recommend(study, inventory, kernels)[0].stress_margin_ms.has_value());
}
