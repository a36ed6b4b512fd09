// Acceptance tests of issue 5 on the library: payloads equal the plan's, bandwidth monotonicity,
// exposed communication vs bytes, traces that parse and nest, bad input before anything runs.
#include <catch2/catch.hpp>
#include <unistd.h>  // getpid: per-process temporary files
#include <cmath>
#include <filesystem>
#include <fstream>

#include "analysis/perfetto/perfetto.hpp"
#include "common/error.hpp"
#include "optimizer/deferral.hpp"
#include "optimizer/inventory.hpp"
#include "sim/whatif.hpp"
#include "analysis/calibration/parameters.hpp"
#include "sim/whatif_calibration.hpp"
#include "sim/whatif_trace.hpp"
#include "topologies/topology.hpp"

using namespace dionsim;
using namespace dionsim::sim;

namespace {

WhatifStudy seed_study() {
  WhatifStudy s;
  s.base.model = "seed-5120x8";
  s.base.fwd_bwd_ms = 450.0;
  s.gpus_per_node = 8;
  s.scopes = {opt::Scope::local, opt::Scope::global, opt::Scope::global_capped};
  s.fractions = {0.25};
  s.capacity_factors = {std::nullopt};
  s.nodes = {1, 2, 4, 16};
  s.fabrics = {topo::preset("h100-ndr400")};
  return s;
}

KernelModel h100() { return KernelModel(default_kernel_model_config(hardware_preset("h100-sxm", "--hardware"))); }

}  // namespace

TEST_CASE("whatif: a2a payload equals the plan's, in every configuration", "[whatif]") {
  auto study = seed_study();
  study.fractions = {0.25, 0.5};
  study.capacity_factors = {std::nullopt, 1.0};
  const auto inventory = opt::seed_5120x8();
  const auto model = h100();
  const auto configs = expand(study);
  CHECK(configs.size() == 4 * (2 + 2 + 2 * 2));  // capacity factors multiply global_capped only
  for (const auto& c : configs) {
    const auto r = run_whatif(c, inventory, model);
    const auto plan = opt::make_plan(inventory, c.plan_config());
    CHECK(r.opt.a2a_bytes == plan.a2a_payload_bytes);
    CHECK(metrics_json(r)["a2a_payload_bytes"].get<std::int64_t>() == plan.a2a_payload_bytes);
    CHECK(r.step_wall_ns == r.fwd_bwd.wall_ns + r.opt.wall_ns);
  }
  // spec §7: the thread's w=8 capped payload, 360.61 MB
  study.scopes = {opt::Scope::global_capped};
  study.capacity_factors = {std::nullopt};
  study.nodes = {2};
  study.gpus_per_node = 4;
  const auto r = run_whatif(expand(study).front(), inventory, model);
  CHECK(static_cast<double>(r.plan.a2a_payload_bytes) / 1e6 == Approx(360.61).margin(0.01));
}

TEST_CASE("whatif: more bandwidth never makes a step slower", "[whatif]") {
  const auto inventory = opt::seed_5120x8();
  const auto model = h100();
  for (auto scope : {opt::Scope::local, opt::Scope::global, opt::Scope::global_capped}) {
    for (int nodes : {1, 2, 8, 64}) {
      DurationNs previous = std::numeric_limits<DurationNs>::max();
      for (double nic : {5.0, 12.5, 25.0, 50.0, 100.0, 200.0}) {
        auto study = seed_study();
        study.scopes = {scope};
        study.nodes = {nodes};
        study.fabrics.front().nic_GBps = nic;
        const auto r = run_whatif(expand(study).front(), inventory, model);
        INFO(opt::to_string(scope) << " nodes " << nodes << " nic " << nic);
        CHECK(r.step_wall_ns <= previous);
        previous = r.step_wall_ns;
      }
      // NVLink bandwidth too
      DurationNs prev_nv = std::numeric_limits<DurationNs>::max();
      for (double nv : {50.0, 150.0, 450.0, 900.0}) {
        auto study = seed_study();
        study.scopes = {scope};
        study.nodes = {nodes};
        study.fabrics.front().nvlink_GBps = nv;
        const auto r = run_whatif(expand(study).front(), inventory, model);
        CHECK(r.step_wall_ns <= prev_nv);
        prev_nv = r.step_wall_ns;
      }
    }
  }
}

// The issue's property, in the form the model guarantees. Exposed communication depends on the
// bytes, on per-message latency and on what compute a scope's phase structure puts beside its
// collectives, so it is not a function of bytes alone (docs/whatif.md lists the measured
// exceptions: one node, where global_capped pays its extra all-gather; local vs global_capped at
// 8-64 nodes, where local's last reverse all-to-all has nothing left to hide behind; and
// global_capped's norm all-gather ring at 512 ranks, latency-bound at (w-1) hops). What holds, and
// is asserted: off-node and with latency removed (bytes are then the only cost of a collective),
// a scope that sends at most half of global's bytes never has more exposed communication.
TEST_CASE("whatif: on one fabric a scope sending fewer bytes never has more exposed communication", "[whatif]") {
  const auto inventory = opt::seed_5120x8();
  const auto model = h100();
  const auto bytes = [](const WhatifResult& r) { return r.plan.a2a_payload_bytes + r.plan.norms_allgather_bytes; };
  int compared = 0;
  for (const char* fabric : {"h100-ndr400", "p5-efa"}) {
    for (int nodes : {2, 4, 8, 16, 64}) {
      for (double nic : {10.0, 50.0}) {
        auto study = seed_study();
        study.fabrics = {topo::preset(fabric)};
        study.fabrics.front().nic_GBps = nic;
        study.fabrics.front().nic_latency_us = 0.0;
        study.fabrics.front().nvlink_latency_us = 0.0;
        study.nodes = {nodes};
        study.capacity_factors = {1.0, 1.25, std::nullopt};
        std::vector<WhatifResult> results;
        for (const auto& c : expand(study)) results.push_back(run_whatif(c, inventory, model));
        for (const auto& a : results) {
          for (const auto& b : results) {
            if (b.config.plan.scope != opt::Scope::global || 2 * bytes(a) > bytes(b)) continue;
            INFO(fabric << " nodes " << nodes << " nic " << nic << ": " << opt::to_string(a.config.plan.scope) << " "
                        << bytes(a) << " B vs global " << bytes(b) << " B");
            CHECK(a.exposed_comm_ns <= b.exposed_comm_ns);
            CHECK(a.opt.exposed_comm_ns <= b.opt.exposed_comm_ns);
            ++compared;
          }
        }
      }
    }
  }
  CHECK(compared >= 20 * 3);
}

TEST_CASE("whatif: a trace parses as JSON and its events nest per thread", "[whatif]") {
  auto study = seed_study();
  study.nodes = {2};
  const auto inventory = opt::seed_5120x8();
  const auto model = h100();
  const auto dir = std::filesystem::temp_directory_path() / ("dionsim_whatif_trace_test." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const auto& c : expand(study)) {
    const auto r = run_whatif(c, inventory, model);
    const auto path = dir / trace_file_name(c);
    {
      analysis::TraceWriter out(path);
      for (auto rank : trace_ranks("", c.world())) {
        out.process_name(static_cast<int>(rank), "rank " + std::to_string(rank));
        for (const auto& t : trace_threads()) out.thread_name(static_cast<int>(rank), t.tid, t.name);
        for (const auto& e : trace_events(r)) {
          out.complete(static_cast<int>(rank), e.tid, e.name, e.category, analysis::TracePs::from_ns(e.start_ns),
                       analysis::TracePs::from_ns(e.duration_ns), e.args);
        }
      }
      out.close();
    }
    std::ifstream in(path);
    const auto trace = nlohmann::json::parse(in);  // throws if it is not JSON
    REQUIRE(trace.contains("traceEvents"));
    std::int64_t complete = 0, collectives = 0;
    for (const auto& e : trace["traceEvents"]) {
      if (e["ph"] == "X") ++complete;
      if (e["ph"] == "X" && e["tid"] == 1 && e["name"] != "opt.step") {
        ++collectives;
        CHECK(e["args"]["bytes"].get<std::int64_t>() > 0);
      }
    }
    CHECK(collectives == 4 * r.plan.collectives);  // 4 ranks by default
    CHECK(complete > collectives);
    CHECK(analysis::nesting_violations(trace).empty());
  }
  std::filesystem::remove_all(dir);
  CHECK(trace_ranks("all", 16).size() == 16);
  CHECK(trace_ranks("", 2).size() == 2);
  CHECK_THROWS_AS(trace_ranks("16", 16), UsageError);
}

TEST_CASE("whatif: deferral is the deferral engine's estimate, as a fraction", "[whatif][deferral]") {
  // Issue 19 item 5: one estimator. whatif's deferral_fraction is opt::analytic_deferral (the figure
  // `deferral` reports as analytic_deferred_fraction) or, simulated, run_deferral's deferred_fraction
  // for the same world, fraction, c, steps and seed.
  auto study = seed_study();
  study.scopes = {opt::Scope::global_capped};
  study.capacity_factors = {1.0};
  study.nodes = {1};
  study.gpus_per_node = 4;
  const auto inventory = opt::seed_5120x8();
  const auto model = h100();
  auto config = expand(study).front();
  const auto analytic = run_whatif(config, inventory, model);
  REQUIRE(analytic.deferral_fraction.has_value());
  CHECK(analytic.deferral_estimator == "analytic");
  opt::DeferralConfig d;
  d.inventory = inventory;
  d.plan.optimizer = config.plan.optimizer;
  d.plan.world = 4;
  d.plan.fraction = 0.25;
  d.plan.capacity_factor = 1.0;
  d.steps = 3;
  const auto engine = opt::run_deferral(d);
  CHECK(*analytic.deferral_fraction == engine.analytic_deferred_fraction);
  // c = 1 at w = 4 (pr = 9, k = 320 per group of 33 matrices): a fraction of a percent, well above
  // what auto c (z = 2) leaves.
  CHECK(*analytic.deferral_fraction > 1e-3);
  CHECK(*analytic.deferral_fraction < 0.05);
  CHECK(metrics_json(analytic)["deferral_fraction"].get<double>() == *analytic.deferral_fraction);
  CHECK(metrics_json(analytic)["deferral_estimate"] == "analytic");
  config.deferral.estimator = DeferralEstimator::simulated;
  config.deferral.steps = 3;
  const auto simulated = run_whatif(config, inventory, model);
  CHECK(*simulated.deferral_fraction == engine.deferred_fraction);
  CHECK(simulated.deferral_mode == std::string(opt::to_string(engine.mode)));
  CHECK(to_json(config)["deferral_estimate"] == "simulated");  // the hash names the estimate
  config.plan.capacity_factor.reset();
  config.deferral.estimator = DeferralEstimator::analytic;
  CHECK(*run_whatif(config, inventory, model).deferral_fraction < *analytic.deferral_fraction / 20);
  CHECK_FALSE(to_json(config).contains("deferral_estimate"));  // analytic: earlier hashes stay
  config.plan.scope = opt::Scope::local;
  CHECK_FALSE(run_whatif(config, inventory, model).deferral_fraction.has_value());
}

TEST_CASE("whatif: routing counts and the resolved c, and degenerate scopes are named", "[whatif][routing]") {
  // Issue 19 item 7 on gpt-14b's inventory at 8192 GPUs: auto c routes every capped group to exact
  // global; local selects k·w = 8192 of 5120 rows.
  const auto inventory = opt::load_inventory("gpt-14b");
  WhatifStudy s;
  s.base.model = "gpt-14b";
  s.base.mfu = 0.45;
  s.scopes = {opt::Scope::local, opt::Scope::global, opt::Scope::global_capped};
  s.fractions = {0.25};
  s.capacity_factors = {std::nullopt, 1.0};
  s.gpus = {512, 8192};
  s.fabrics = {topo::preset("h100-ndr400")};
  const auto configs = expand(s);
  std::int64_t groups = 0;
  for (const auto& c : configs) {
    const auto plan = opt::make_plan(inventory, c.plan_config());
    const Routing r = routing_of(plan);
    groups = static_cast<std::int64_t>(plan.groups.size());
    CHECK(r.packed + r.exact_global + r.local + r.unsharded == groups);
    if (c.plan.scope == opt::Scope::global) CHECK(r.exact_global == groups);
    if (c.plan.scope == opt::Scope::local) CHECK(r.local == groups);
    if (c.plan.scope != opt::Scope::global_capped) CHECK_FALSE(r.capacity_factor_min.has_value());
    if (c.plan.scope == opt::Scope::global_capped && c.world() == 8192 && !c.plan.capacity_factor) {
      CHECK(r.packed == 0);
      CHECK(r.exact_global == groups);
      CHECK(*r.capacity_factor_min > 1.0);
      CHECK(degeneracy_note(c, r).find("routed to exact global") != std::string::npos);
    }
    if (c.plan.scope == opt::Scope::global_capped && c.world() == 512) {
      CHECK(r.packed > 0);
      CHECK(degeneracy_note(c, r).empty());
      if (c.plan.capacity_factor) CHECK(*r.capacity_factor_min == 1.0);
      if (c.plan.capacity_factor) CHECK(*r.capacity_factor_max == 1.0);
    }
    if (c.plan.scope == opt::Scope::local && c.world() == 8192) {
      CHECK(r.local_all_rows >= 1);
      CHECK(r.local_example_kw == 8192);
      CHECK(degeneracy_note(c, r).find("8192 of 5120 rows") != std::string::npos);
    }
    if (c.plan.scope == opt::Scope::local && c.world() == 512) CHECK(degeneracy_note(c, r).empty());
  }
  REQUIRE(groups > 0);
  const auto notes = degeneracy_notes(configs, inventory);
  CHECK(notes.size() == 2);  // local and global_capped (auto) at 8192; c = 1 still packs there
  const auto r = run_whatif(configs.back(), inventory, h100());
  CHECK(metrics_json(r)["routing"]["exact_global"].get<std::int64_t>() + metrics_json(r)["routing"]["packed"].get<std::int64_t>() == groups);
}

TEST_CASE("whatif: bad input is refused before anything runs", "[whatif]") {
  auto empty_nodes = seed_study();
  empty_nodes.nodes.clear();
  CHECK_THROWS_AS(expand(empty_nodes), UsageError);
  auto empty_scopes = seed_study();
  empty_scopes.scopes.clear();
  CHECK_THROWS_AS(expand(empty_scopes), UsageError);
  // per-node leaves of 32 ports take five hosts of 6 GPUs (30 ports), not a refusal
  auto odd = seed_study();
  odd.fabrics = {topo::preset("p5-efa")};
  odd.gpus_per_node = 6;
  CHECK_NOTHROW(expand(odd));
  CHECK(topo::with_gpus_per_host(topo::preset("p5-efa"), 6).leaf_radix == 30);
  auto bad_fraction = seed_study();
  bad_fraction.fractions = {0.0};
  CHECK_THROWS_AS(expand(bad_fraction), UsageError);
  auto both = seed_study();
  both.base.mfu = 0.4;
  CHECK_THROWS_AS(expand(both), UsageError);
  CHECK_THROWS_AS(opt::load_inventory("no-such-model"), UsageError);
  const auto base = hardware_preset("h100-sxm", "--hardware");
  CHECK_THROWS_AS(parse_kernel_calibration(R"({"schema": "dionsim.fabric-calibration/1"})", "cal.json", base),
                  InputError);
  CHECK_THROWS_AS(parse_kernel_calibration(R"({"version": 1})", "cal.json", base), InputError);
  CHECK_THROWS_AS(
      parse_kernel_calibration(R"({"schema": "dionsim.kernel-calibration/1", "typo": 1})", "cal.json", base),
      InputError);
  // scripts/fuzz_cli.py: a name or notes of another type was a bare nlohmann type_error (exit 1).
  CHECK_THROWS_WITH(parse_kernel_calibration(R"({"schema": "dionsim.kernel-calibration/1", "name": []})", "cal.json", base),
                    Catch::Contains("cal.json: name: got '[]', expected a string"));
  CHECK_THROWS_AS(parse_kernel_calibration(R"({"schema": "dionsim.kernel-calibration/1", "notes": 5})", "cal.json", base),
                  InputError);
  const auto cal = parse_kernel_calibration(
      R"({"schema": "dionsim.kernel-calibration/1", "gemm_efficiency_scale": 1.3, "hbm_efficiency": 0.7,
          "overlap_slowdown_by_kernel": {"ns_gemm": 1.87},
          "kernel_times": [{"kernel": "pack", "size": 1e6, "time_us": 10}]})",
      "cal.json", base);
  CHECK(cal.config.gemm_efficiency_scale == 1.3);
  CHECK(cal.config.overlap_slowdown_by_kernel.at("ns_gemm") == 1.87);
  CHECK(cal.config.hardware.hbm_efficiency == 0.7);
  CHECK(cal.measured.lookup("pack", 1e6) == 10'000);
}

TEST_CASE("whatif: a `dionsim calibrate` file's parameters drive NS GEMMs and pin all-to-alls", "[whatif]") {
  const auto h200 = hardware_preset("h200", "--hardware");
  const std::map<std::string, double> params{{"ns_gemm_isolated_tflops", 750.0},
                                             {"ns_gemm_isolated_overhead_us", 3.0},
                                             {"nccl_all_to_all_w16_algbw_GBps", 100.0},
                                             {"gemm_bf16_tflops", 737.9}};
  const auto cal = dionsim::analysis::kernel_calibration_from_parameters("traces", "NVIDIA H200", params, h200);
  CHECK(cal.unused_parameters == std::vector<std::string>{"gemm_bf16_tflops"});
  const KernelModel model(cal.config, cal.measured);
  // 7.5e12 FLOPs at 750 TFLOP/s = 10 ms, + 2 launches x 3 us
  CHECK(model.time_ns({"ns_gemm", 7.5e12, 0, 2, 1280, 5120}) == 10'006'000);
  // other GEMM-free kernels keep the preset
  CHECK(model.time_ns({"pack", 0, 4'800'000'000, 1, 0, 0}) ==
        std::llround(1e6 / h200.hbm_efficiency + h200.launch_gap_us * 1e3));
  // world 16 all-to-alls are pinned, others are not
  auto study = seed_study();
  study.nodes = {1, 2};
  study.alltoall_algbw_GBps_by_world = cal.alltoall_algbw_GBps_by_world;
  const auto configs = expand(study);
  for (const auto& c : configs) {
    CHECK(c.alltoall_algbw_GBps.has_value() == (c.world() == 16));
  }
  const auto r = run_whatif(configs.back(), opt::seed_5120x8(), model);  // global_capped, 2 nodes
  CHECK(r.opt.a2a_ns ==
        Approx(static_cast<double>(r.plan.a2a_payload_bytes) / 100e9 * 1e9).margin(2 * r.plan.collectives));
  // a calibration measured on another GPU is refused
  CHECK_THROWS_AS(
      dionsim::analysis::kernel_calibration_from_parameters("traces", "NVIDIA H200", params, hardware_preset("h100-sxm", "--hardware")),
      InputError);
}

TEST_CASE("whatif: expected maximum of n standard normals", "[whatif][rank_skew]") {
  CHECK(expected_max_standard_normal(1) == 0.0);
  CHECK(expected_max_standard_normal(2) == Approx(1.0 / std::sqrt(M_PI)).epsilon(1e-9));  // closed form
  CHECK(expected_max_standard_normal(3) == Approx(1.5 / std::sqrt(M_PI)).epsilon(1e-9));  // closed form
  CHECK(expected_max_standard_normal(4) == Approx(1.029375373).epsilon(1e-8));  // numerical integration (independent)
  CHECK(expected_max_standard_normal(8) == Approx(1.423600306).epsilon(1e-8));
  CHECK(expected_max_standard_normal(100) == Approx(2.507593636).epsilon(1e-8));
  // grows like sqrt(2 ln n), never decreasing
  double last = 0.0;
  for (std::int64_t n : {2, 16, 128, 1024, 8192, 65536}) {
    const double e = expected_max_standard_normal(n);
    CHECK(e > last);
    CHECK(e < std::sqrt(2.0 * std::log(static_cast<double>(n))));
    last = e;
  }
  CHECK_THROWS_AS(expected_max_standard_normal(0), InputError);
  CHECK(expected_rank_wait_ns(2.0, 1) == 0);
  CHECK(expected_rank_wait_ns(0.0, 64) == 0);
  CHECK(expected_rank_wait_ns(1.0, 4) == std::llround(1e6 * expected_max_standard_normal(4)));
}

TEST_CASE("whatif: the ranks' arrival skew lands in the step's first collective, not on the critical path",
          "[whatif][rank_skew]") {
  const auto inventory = opt::seed_5120x8();
  const auto model = h100();
  auto study = seed_study();
  study.nodes = {1, 4};
  const auto plain = expand(study);
  study.base.rank_skew_ms = 1.5;
  const auto skewed = expand(study);
  REQUIRE(plain.size() == skewed.size());
  for (std::size_t i = 0; i < plain.size(); ++i) {
    const auto a = run_whatif(plain[i], inventory, model);
    const auto b = run_whatif(skewed[i], inventory, model);
    INFO(opt::to_string(b.config.plan.scope) << " nodes " << b.config.nodes);
    const DurationNs wait = expected_rank_wait_ns(1.5, b.config.world());
    CHECK(a.rank_wait_ns == 0);
    CHECK(b.rank_wait_ns == wait);
    // The slowest rank's step is unchanged: step wall and critical path stay.
    CHECK(b.step_wall_ns == a.step_wall_ns);
    CHECK(b.opt.wall_ns == a.opt.wall_ns);
    // The measured rank's optimizer window and first collective grow by the wait.
    CHECK(b.opt_wall_seen_ns() == a.opt.wall_ns + wait);
    const bool capped = b.config.plan.scope == opt::Scope::global_capped;
    REQUIRE(b.first_collective.has_value());
    CHECK(*b.first_collective == (capped ? StepCollective::all_gather : StepCollective::all_to_all));
    CHECK(b.a2a_seen_ns() == a.opt.a2a_ns + (capped ? 0 : wait));
    CHECK(b.allgather_seen_ns() == a.opt.allgather_ns + (capped ? wait : 0));
    const auto m = metrics_json(b);
    CHECK(m["rank_wait_ms"].get<double>() == Approx(static_cast<double>(wait) * 1e-6));
    CHECK(m["opt_wall_ms"].get<double>() == Approx(static_cast<double>(a.opt.wall_ns + wait) * 1e-6));
    CHECK(m["opt_critical_path_ms"].get<double>() == Approx(static_cast<double>(a.opt.wall_ns) * 1e-6));
    CHECK(m["opt_gpu_idle_pct"].get<double>() > metrics_json(a)["opt_gpu_idle_pct"].get<double>());
    // The collective-stream window: first collective start to last collective end, by hand from
    // the events, and the wait on top (it is held in the first collective).
    DurationNs first = INT64_MAX, last = 0;
    for (const auto& e : a.opt.events) {
      if (e.stream != StreamKind::collective) continue;
      first = std::min(first, e.start_ns);
      last = std::max(last, e.start_ns + e.duration_ns);
    }
    REQUIRE(last > first);
    CHECK(a.comm_window_seen_ns() == last - first);
    CHECK(b.comm_window_seen_ns() == last - first + wait);
    CHECK(b.comm_window_seen_ns() <= b.opt_wall_seen_ns());  // the compute before and after is outside
    CHECK(m["opt_comm_window_ms"].get<double>() == Approx(static_cast<double>(last - first + wait) * 1e-6));
    CHECK(m["opt_gpu_idle_comm_window_pct"].get<double>() ==
          Approx(100.0 * (1.0 - static_cast<double>(b.opt.gpu_busy_ns) / static_cast<double>(last - first + wait))));
    // The configuration's hash input names the skew only when it is set.
    CHECK(to_json(b.config)["rank_skew_ms"] == 1.5);
    CHECK_FALSE(to_json(a.config).contains("rank_skew_ms"));
  }
  auto bad = seed_study();
  bad.base.rank_skew_ms = -1.0;
  CHECK_THROWS_WITH(expand(bad), Catch::Contains("--rank-skew-ms"));
}

TEST_CASE("whatif: HBM contention slows the collectives within one node only", "[whatif]") {
  const auto inventory = opt::seed_5120x8();
  const auto model = h100();
  auto study = seed_study();
  study.nodes = {1, 2};
  const auto plain = expand(study);
  study.base.collective_hbm_slowdown = 1.8;
  const auto slowed = expand(study);
  REQUIRE(plain.size() == slowed.size());
  for (std::size_t i = 0; i < plain.size(); ++i) {
    const auto a = run_whatif(plain[i], inventory, model);
    const auto b = run_whatif(slowed[i], inventory, model);
    INFO(opt::to_string(b.config.plan.scope) << " nodes " << b.config.nodes);
    CHECK(to_json(b.config)["collective_hbm_slowdown"] == 1.8);  // named in the hash input only when set
    CHECK_FALSE(to_json(a.config).contains("collective_hbm_slowdown"));
    if (b.config.nodes > 1) {  // across nodes the NIC bounds the collectives: nothing changes
      CHECK(b.opt.a2a_ns == a.opt.a2a_ns);
      CHECK(b.opt.wall_ns == a.opt.wall_ns);
    } else {  // every plan has an all-to-all beside a memory-bound kernel (the next task's momentum)
      CHECK(b.opt.a2a_ns > a.opt.a2a_ns);
      CHECK(b.opt.wall_ns >= a.opt.wall_ns);
      CHECK(b.opt.ns_gemm_ns == a.opt.ns_gemm_ns);  // the kernels themselves are not slowed
    }
  }
  auto bad = seed_study();
  bad.base.collective_hbm_slowdown = 0.9;
  CHECK_THROWS_WITH(expand(bad), Catch::Contains("--collective-hbm-slowdown"));
  // From a calibration: applied unless the command line set it; a factor below 1 is refused.
  const auto h100_hw = hardware_preset("h100-sxm", "--hardware");
  const auto cal = dionsim::analysis::kernel_calibration_from_parameters("c", "H100 SXM", {{"collective_hbm_slowdown", 1.5}}, h100_hw);
  CHECK(cal.unused_parameters.empty());
  WhatifConfig w;
  apply_step_calibration(cal.step, w);
  CHECK(w.collective_hbm_slowdown == 1.5);
  WhatifConfig given;
  given.collective_hbm_slowdown = 1.0;
  apply_step_calibration(cal.step, given);
  CHECK(given.collective_hbm_slowdown == 1.0);
  CHECK_THROWS_AS(dionsim::analysis::kernel_calibration_from_parameters("c", "H100 SXM", {{"collective_hbm_slowdown", 0.5}}, h100_hw),
                  InputError);
}
