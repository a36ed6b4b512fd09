// Plan arithmetic: spec §8 TV4, the §7 reconciliation (thread payloads), the §6.2 predictions, the
// §2.6.4 FLOP model and inventories.
#include <catch2/catch.hpp>
#include <cmath>

#include "common/error.hpp"
#include "optimizer/inventory.hpp"
#include "optimizer/plan.hpp"
#include "optimizer/plan_json.hpp"

using namespace dionsim::opt;

namespace {

PlanConfig capped(std::int64_t w, double f, std::optional<double> c) {
  PlanConfig cfg;
  cfg.world = w;
  cfg.scope = Scope::global_capped;
  cfg.fraction = f;
  cfg.capacity_factor = c;
  return cfg;
}

double payload_MB(const std::string& model, std::int64_t w, Scope s, double f) {
  PlanConfig cfg;
  cfg.world = w;
  cfg.scope = s;
  cfg.fraction = f;
  return static_cast<double>(make_plan(load_inventory(model), cfg).a2a_payload_bytes) / 1e6;
}

}  // namespace

TEST_CASE("TV4: plan and routing table", "[plan]") {
  struct Row {
    std::int64_t S, C, N, w;
    double f;
    std::optional<double> cf;
    std::int64_t pl, k, pr;
    double c;
    std::int64_t B, k_tot, kw;
    bool routed;
  };
  const Row rows[] = {
      {16, 32, 1, 2, 0.25, std::nullopt, 8, 2, 1, 2.0, 4, 4, 4, false},
      {17, 32, 1, 4, 1.0, std::nullopt, 5, 5, 1, 1.7745966692414834, 9, 17, 20, true},
      {17, 32, 1, 4, 0.35, 1.0, 5, 2, 1, 1.0, 2, 6, 8, false},
      {17, 32, 1, 4, 0.35, std::nullopt, 5, 2, 1, 2.224744871391589, 5, 6, 8, true},
      {3, 32, 1, 4, 0.5, std::nullopt, 1, 1, 1, 2.732050807568877, 3, 2, 4, true},
      {16, 32, 4, 2, 0.25, 1.0, 8, 2, 2, 1.0, 4, 4, 4, false},
      {1024, 16, 20, 2, 0.1, 1.0, 512, 52, 10, 1.0, 520, 103, 104, true},
      {100, 64, 1, 2, 0.55, 1.0, 50, 28, 1, 1.0, 28, 56, 56, false},
      {5120, 5120, 33, 16, 0.25, std::nullopt, 320, 80, 3, 1.125, 270, 1280, 1280, false},
  };
  for (const Row& r : rows) {
    CAPTURE(r.S, r.C, r.N, r.w, r.f);
    const GroupPlan g = plan_group(r.S, r.C, r.N, capped(r.w, r.f, r.cf));
    CHECK(g.pl == r.pl);
    CHECK(g.k == r.k);
    CHECK(g.pr == r.pr);
    CHECK(g.c == Approx(r.c).epsilon(1e-15));
    CHECK(g.B == r.B);
    CHECK(g.k_tot == r.k_tot);
    CHECK(g.kw == r.kw);
    CHECK(g.routed == r.routed);
    CHECK(g.path == (r.routed ? Path::global : Path::capped_packed));
  }
  // 1.125 * 240 = 270.0 exactly: no extra row (§4.1).
  CHECK(auto_capacity_factor(16, 3, 80) == 1.125);
  // Double rounding is observable: 0.55 * 100 -> 56, 0.35 * 17 -> 6.
  CHECK(ceil_fraction(0.55, 100) == 56);
  CHECK(ceil_fraction(0.35, 17) == 6);
}

TEST_CASE("§7: the thread's measured a2a payloads within 0.5 %", "[plan]") {
  struct Row {
    std::int64_t w;
    Scope s;
    double MB;
  };
  const Row rows[] = {{4, Scope::global, 2621},     {4, Scope::global_capped, 673},  {4, Scope::local, 655},
                      {8, Scope::global, 1363},     {8, Scope::global_capped, 361},  {16, Scope::global, 734},
                      {16, Scope::global_capped, 205.1}, {16, Scope::local, 183.5}};
  for (const Row& r : rows) {
    CAPTURE(r.w, to_string(r.s));
    const double got = payload_MB("seed-5120x8", r.w, r.s, 0.25);
    CHECK(std::abs(got - r.MB) / r.MB < 0.005);
  }
  // Exact predictions of the spec's table (bytes, not MB).
  CHECK(payload_MB("seed-5120x8", 4, Scope::global_capped, 0.25) == Approx(673.21856).epsilon(1e-12));
  CHECK(payload_MB("seed-5120x8", 8, Scope::global_capped, 0.25) == Approx(360.61184).epsilon(1e-12));
  PlanConfig cfg = capped(4, 0.25, std::nullopt);
  const Plan p4 = make_plan(seed_5120x8(), cfg);
  CHECK(p4.norms_allgather_bytes == 33 * 1280 * 4 + 16 * 5120 * 4);
  REQUIRE(p4.groups.size() == 2);
  CHECK(p4.groups[0].B == 2973);  // per-peer 1 + B = 2974 rows vs local's 2880
  CHECK(p4.groups[1].B == 5244);
  CHECK(p4.collectives == 6);
  // 17.24 TF/step of Gram NS at w = 4 (§2.6.4).
  cfg.ns = NsKind::gram;
  CHECK(make_plan(seed_5120x8(), cfg).ns_flops_per_rank / 1e12 == Approx(17.239).epsilon(1e-4));
}

TEST_CASE("§6.2: 1b and 14b payload predictions", "[plan]") {
  struct Row {
    const char* model;
    double f;
    std::int64_t w;
    double global, local, capped, norms;
  };
  const Row rows[] = {{"gpt-1b", 0.25, 8, 481.3, 120.3, 130.9, 0.252},
                      {"gpt-1b", 0.25, 16, 261.1, 65.3, 77.3, 0.126},
                      {"gpt-1b", 0.25, 64, 100.7, 25.2, 42.0, 0.031},
                      {"gpt-1b", 0.5, 8, 481.3, 240.6, 255.4, 0.252},
                      {"gpt-14b", 0.25, 8, 7602.2, 1900.5, 1971.7, 1.229},
                      {"gpt-14b", 0.25, 32, 2359.3, 589.8, 678.1, 0.307},
                      {"gpt-14b", 0.5, 8, 7602.2, 3801.1, 3901.6, 1.229}};
  for (const Row& r : rows) {
    CAPTURE(r.model, r.f, r.w);
    CHECK(payload_MB(r.model, r.w, Scope::global, r.f) == Approx(r.global).margin(0.05));
    CHECK(payload_MB(r.model, r.w, Scope::local, r.f) == Approx(r.local).margin(0.05));
    const Plan p = make_plan(load_inventory(r.model), capped(r.w, r.f, std::nullopt));
    CHECK(static_cast<double>(p.a2a_payload_bytes) / 1e6 == Approx(r.capped).margin(0.05));
    CHECK(static_cast<double>(p.norms_allgather_bytes) / 1e6 == Approx(r.norms).margin(0.0005));
    for (const GroupPlan& g : p.groups) CHECK_FALSE(g.routed);
  }
  const Plan p = make_plan(load_inventory("gpt-1b"), capped(8, 0.25, std::nullopt));
  CHECK(p.groups[0].B == 621);
  CHECK(p.groups[1].B == 1315);
  CHECK(p.groups[2].B == 167);
  CHECK(p.groups[2].c == Approx(1.1559).epsilon(1e-4));
}

TEST_CASE("phase structure and bytes per path (§1.7, §3.5)", "[plan]") {
  SECTION("capped packed: 4 phases, all-gather then two a2a") {
    const GroupPlan g = plan_group(5120, 5120, 33, capped(16, 0.25, std::nullopt));
    REQUIRE(g.phases.size() == 4);
    CHECK(g.phases[0].collective.kind == CollectiveKind::all_gather);
    CHECK(g.phases[0].collective.bytes_sent == 33 * 320 * 4);
    CHECK(g.phases[1].collective.bytes_per_peer == 271 * 5120 * 2);
    CHECK(g.phases[1].collective.bytes_sent == 16 * 271 * 5120 * 2);
    CHECK(g.phases[2].collective.bytes_per_peer == 270 * 5120 * 2);
    CHECK(g.phases[3].collective.kind == CollectiveKind::none);
    // NS: pr x [kw, C]
    CHECK(g.phases[2].kernels[1].kernel == "ns_gemm");
    CHECK(g.phases[2].kernels[1].gemm_flops == 3 * ns_flops(NsKind::polar_express, 1280, 5120));
  }
  SECTION("global and local: 3 phases, a2a bytes Np*pl*C*2 / Np*k*C*2 each way") {
    PlanConfig cfg;
    cfg.world = 4;
    cfg.scope = Scope::global;
    const GroupPlan g = plan_group(17, 32, 1, cfg);
    REQUIRE(g.phases.size() == 3);
    CHECK(g.phases[0].collective.bytes_sent == 4 * 5 * 32 * 2);
    CHECK(g.ns_rows == 5);  // k_tot = ceil(0.25 * 17) from the true S
    cfg.scope = Scope::local;
    const GroupPlan l = plan_group(17, 32, 1, cfg);
    CHECK(l.phases[1].collective.bytes_per_peer == 2 * 32 * 2);
    CHECK(l.ns_rows == 8);
  }
  SECTION("DDP and single GPU") {
    PlanConfig cfg;
    cfg.world = 4;
    cfg.sharded = false;
    const GroupPlan g = plan_group(64, 32, 6, cfg);  // Dion2 unsharded: shorter dim = columns
    CHECK(g.path == Path::ddp);
    CHECK_FALSE(g.select_rows);
    CHECK(g.k == 8);
    CHECK(g.allgather_bytes == 2 * 64 * 8 * 2);
    REQUIRE(g.phases.size() == 2);
    CHECK(g.phases[0].collective.kind == CollectiveKind::all_gather);
    cfg.optimizer = OptimizerKind::nordion2;
    CHECK(plan_group(64, 32, 6, cfg).select_rows);
    CHECK(plan_group(64, 32, 1, cfg).path == Path::single);
    cfg.world = 1;
    cfg.sharded = true;
    const GroupPlan s = plan_group(64, 32, 6, cfg);
    CHECK(s.path == Path::single);
    CHECK(s.phases.size() == 1);
    CHECK(s.ns_matrices == 6);
  }
}

TEST_CASE("config validation and inventories", "[plan]") {
  PlanConfig cfg;
  cfg.world = 0;
  CHECK_THROWS_AS(validate(cfg), dionsim::UsageError);
  cfg.world = 2;
  cfg.fraction = 1.5;
  CHECK_THROWS_AS(validate(cfg), dionsim::UsageError);
  cfg.fraction = 0.0;
  CHECK_THROWS_AS(validate(cfg), dionsim::UsageError);
  cfg.fraction = 1.0;
  cfg.capacity_factor = 0.9;
  CHECK_THROWS_AS(validate(cfg), dionsim::UsageError);

  const Plan g = make_plan(load_inventory("gpt-768x12"), PlanConfig{});
  REQUIRE(g.groups.size() == 3);
  CHECK(g.groups[0].N == 48);
  CHECK(g.groups[1].rows == 3072);
  CHECK(g.groups[2].cols == 3072);
  CHECK(load_inventory("gpt-14b").entries.size() == 280);
  CHECK_THROWS_AS(load_inventory("gpt-banana"), dionsim::UsageError);
  const Inventory inv = parse_inventory_json(R"([{"name":"a","rows":8,"cols":4,"count":3},{"name":"b","rows":8,"cols":4}])", "x.json");
  CHECK(make_plan(inv, PlanConfig{}).groups.at(0).N == 4);
  CHECK_THROWS_WITH(parse_inventory_json(R"([{"name":"a","rows":8,"cols":4,"size":3}])", "x.json"),
                    Catch::Contains("x.json: [0].size"));
  CHECK_THROWS_WITH(parse_inventory_json(R"([{"name":"a","rows":0,"cols":4}])", "x.json"),
                    Catch::Contains("[0].rows"));
}

TEST_CASE("capacity factor: one parser, one rule, one JSON codec", "[plan][capacity]") {
  using dionsim::opt::AutoAs;
  CHECK_FALSE(dionsim::opt::parse_capacity_factor("auto", "--capacity-factor").has_value());
  CHECK(*dionsim::opt::parse_capacity_factor("1.25", "--capacity-factor") == 1.25);
  CHECK(*dionsim::opt::parse_capacity_factor("1", "--capacity-factor") == 1.0);
  CHECK(*dionsim::opt::parse_capacity_factor("1e6", "--capacity-factor") == 1e6);
  // Found by scripts/fuzz_cli.py: 1e300 was accepted and overflowed B = ceil(c·pr·k) (UB).
  CHECK_THROWS_WITH(dionsim::opt::parse_capacity_factor("1e300", "--capacity-factor"),
                    Catch::Contains("got '1e+300', expected auto or a number in [1, 1e6]"));
  for (const char* bad : {"0.5", "0", "-2", "nan", "inf", "1e400", "1e300", "1000001", "", "1.5x", "Auto"}) {
    INFO(bad);
    CHECK_THROWS_AS(dionsim::opt::parse_capacity_factor(bad, "--capacity-factor"), dionsim::UsageError);
  }
  CHECK_THROWS_WITH(dionsim::opt::parse_capacity_factor("0.5", "--capacity-factor"),
                    Catch::Contains("--capacity-factor: got '0.5'"));
  CHECK(dionsim::opt::capacity_factor_text(std::nullopt) == "auto");
  CHECK(dionsim::opt::capacity_factor_text(1.5) == "1.5");
  // Stored forms: "auto" (whatif, deferral, measure), null (plan, measured runs); both read back.
  CHECK(dionsim::opt::capacity_factor_json(std::nullopt) == nlohmann::json("auto"));
  CHECK(dionsim::opt::capacity_factor_json(std::nullopt, AutoAs::null).is_null());
  CHECK(dionsim::opt::capacity_factor_json(2.0) == nlohmann::json(2.0));
  CHECK_FALSE(dionsim::opt::capacity_factor_from_json(nlohmann::json("auto"), "x").has_value());
  CHECK_FALSE(dionsim::opt::capacity_factor_from_json(nlohmann::json(nullptr), "x").has_value());
  CHECK(*dionsim::opt::capacity_factor_from_json(nlohmann::json(1.1), "x") == 1.1);
  CHECK_THROWS_AS(dionsim::opt::capacity_factor_from_json(nlohmann::json(0.5), "db: run 3"), dionsim::InputError);
  CHECK_THROWS_AS(dionsim::opt::capacity_factor_from_json(nlohmann::json("1.5"), "db: run 3"), dionsim::InputError);
}
