#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "optimizer/inventory.hpp"
#include "optimizer/plan.hpp"
#include "sim/collectives.hpp"
#include "sim/step_program.hpp"
#include "step_oracle.hpp"
#include "topologies/topology.hpp"

using namespace dionsim;
using namespace dionsim::sim;

namespace {

StepFabric fabric(int nodes, int gpn, double nic_GBps) {
  StepFabric f;
  f.name = "test";
  f.nodes = nodes;
  f.gpus_per_node = gpn;
  f.nvlink_GBps = 337.5;
  f.nvlink_latency_us = 5;
  f.nic_GBps = nic_GBps;
  f.nic_latency_us = 10;
  f.nodes_per_leaf = 32;
  return f;
}

opt::Plan seed_plan(std::int64_t world, opt::Scope scope) {
  opt::PlanConfig c;
  c.world = world;
  c.scope = scope;
  c.fraction = 0.25;
  c.optimizer = opt::OptimizerKind::nordion2;
  c.ns = opt::NsKind::gram;
  return opt::make_plan(opt::seed_5120x8(), c);
}

KernelModel h100() { return KernelModel(default_kernel_model_config(hardware_preset("h100-sxm", "--hardware"))); }

}  // namespace

TEST_CASE("AsyncRuntime issue order with three tasks in flight (spec §1.7)", "[step_program]") {
  // Four tasks of three phases: A0 B0 A1 C0 B1 A2 D0 C1 B2 D1 C2 D2 (newest first after admission).
  const auto order = async_runtime_order({3, 3, 3, 3}, 3);
  const std::vector<std::pair<int, int>> expect{{0, 0}, {1, 0}, {0, 1}, {2, 0}, {1, 1}, {0, 2},
                                                {3, 0}, {2, 1}, {1, 2}, {3, 1}, {2, 2}, {3, 2}};
  CHECK(order == expect);
  // One task at a time is sequential.
  CHECK(async_runtime_order({2, 2}, 1) == std::vector<std::pair<int, int>>{{0, 0}, {0, 1}, {1, 0}, {1, 1}});
  // A single-phase task finishes in its admission round.
  CHECK(async_runtime_order({1, 2}, 3) == std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {1, 1}});
  CHECK_THROWS_AS(async_runtime_order({1}, 0), InputError);
}

TEST_CASE("uncovered time of intervals", "[step_program]") {
  CHECK(uncovered_ns({{0, 10}}, {}) == 10);
  CHECK(uncovered_ns({{0, 10}}, {{2, 4}, {6, 8}}) == 6);
  CHECK(uncovered_ns({{0, 10}, {20, 30}}, {{5, 25}}) == 10);
  CHECK(uncovered_ns({{0, 10}}, {{0, 10}}) == 0);
  CHECK(uncovered_ns({{0, 10}, {5, 15}}, {{12, 20}}) == 12);  // overlapping busy intervals merge
}

TEST_CASE("all-to-all closed form on a non-blocking fat tree", "[step_program]") {
  const SymmetricFabricTimer t(fabric(2, 8, 50.0));
  // per-peer 1e6 B: intra 7e6 B / 337.5 GB/s = 20.7 us, inter 8e6 B / 50 GB/s = 160 us, + 10 us
  CHECK(t.time_ns({StepCollective::all_to_all, 16'000'000, 1'000'000}) == 170'000);
  const SymmetricFabricTimer one(fabric(1, 8, 50.0));
  CHECK(one.time_ns({StepCollective::all_to_all, 8'000'000, 1'000'000}) ==
        Approx(7e6 / 337.5e9 * 1e9 + 5000).margin(1));
  // pinned algbw: size / algbw
  auto pinned = fabric(2, 4, 50.0);
  pinned.alltoall_algbw_GBps = 25.0;
  CHECK(SymmetricFabricTimer(pinned).time_ns({StepCollective::all_to_all, 1'000'000'000, 1}) == 40'000'000);
  // oversubscription only matters for flows that leave the leaf: 4 nodes on 2-node leaves (rail)
  auto over = fabric(4, 8, 50.0);
  over.nodes_per_leaf = 2;
  over.oversubscription = 4.0;
  const SymmetricFabricTimer o(over);
  CHECK(o.leaf_exit_fraction() == Approx(1.0 - 1.0 / 24.0));
  CHECK(o.time_ns({StepCollective::all_to_all, 32'000'000, 1'000'000}) ==
        Approx(24e6 / 50e9 * 4.0 * (23.0 / 24.0) * 1e9 + 10'000).margin(1));
  // a ring all-gather of 1 MB pieces over 16 ranks crossing nodes: 15 x (1e6 / 50e9 + 10 us)
  CHECK(t.time_ns({StepCollective::all_gather, 1'000'000, 1'000'000}) == 15 * (20'000 + 10'000));
}

TEST_CASE("optimizer step: payload equals the plan's, streams never overlap themselves", "[step_program]") {
  const auto model = h100();
  for (auto scope : {opt::Scope::local, opt::Scope::global, opt::Scope::global_capped}) {
    const auto plan = seed_plan(8, scope);
    const auto r = simulate_optimizer_step(plan, model, SymmetricFabricTimer(fabric(2, 4, 19.0)));
    CHECK(r.a2a_bytes == plan.a2a_payload_bytes);
    CHECK(r.allgather_bytes == plan.norms_allgather_bytes);
    CHECK(r.collectives == plan.collectives);
    CHECK(r.gpu_busy_ns == r.ns_gemm_ns + r.non_gemm_ns);
    CHECK(r.wall_ns >= r.gpu_busy_ns);
    CHECK(r.wall_ns >= r.comm_ns);
    CHECK(r.exposed_comm_ns <= r.comm_ns);
    CHECK(r.exposed_comm_ns >= r.wall_ns - r.gpu_busy_ns - 1);  // all GPU idle time waits on a collective
    for (auto stream : {StreamKind::compute, StreamKind::collective}) {
      DurationNs end = 0;
      for (const auto& e : r.events) {
        if (e.stream != stream) continue;
        CHECK(e.start_ns >= end);
        end = e.start_ns + e.duration_ns;
      }
    }
  }
}

TEST_CASE("optimizer step: a phase's kernels follow the task's previous collective", "[step_program]") {
  const auto plan = seed_plan(8, opt::Scope::global_capped);
  const auto r = simulate_optimizer_step(plan, h100(), SymmetricFabricTimer(fabric(2, 4, 19.0)));
  for (const auto& k : r.events) {
    if (k.stream != StreamKind::compute || k.phase == 0) continue;
    for (const auto& c : r.events) {
      if (c.stream == StreamKind::collective && c.task == k.task && c.phase == k.phase - 1) {
        CHECK(k.start_ns >= c.start_ns + c.duration_ns);
      }
    }
  }
}

TEST_CASE("more bandwidth never makes the optimizer step slower", "[step_program]") {
  const auto model = h100();
  for (auto scope : {opt::Scope::local, opt::Scope::global, opt::Scope::global_capped}) {
    for (std::int64_t nodes : {1, 2, 8, 32}) {
      const auto plan = seed_plan(nodes * 8, scope);
      DurationNs previous = std::numeric_limits<DurationNs>::max();
      for (double nic : {5.0, 12.5, 25.0, 50.0, 100.0, 400.0}) {
        const auto r =
            simulate_optimizer_step(plan, model, SymmetricFabricTimer(fabric(static_cast<int>(nodes), 8, nic)));
        CHECK(r.wall_ns <= previous);
        previous = r.wall_ns;
      }
    }
  }
}

TEST_CASE("host launch cost puts launches on the critical path", "[step_program]") {
  const auto plan = seed_plan(4, opt::Scope::global_capped);
  const auto model = h100();
  const SymmetricFabricTimer timer(fabric(1, 4, 50.0));
  const auto hidden = simulate_optimizer_step(plan, model, timer);
  StepProgramOptions slow;
  slow.host_launch_us = 1000.0;  // 1 ms per launch: the host is the bottleneck
  const auto synced = simulate_optimizer_step(plan, model, timer, slow);
  CHECK(synced.wall_ns >= static_cast<DurationNs>(synced.launches) * 1'000'000);
  CHECK(synced.wall_ns > hidden.wall_ns);
  CHECK(synced.gpu_busy_ns == hidden.gpu_busy_ns);
  CHECK(hidden.host_issue_ns == 0);
  CHECK(synced.host_issue_ns == (synced.launches) * 1'000'000);
  // Host ahead of the GPU (steady-state training): the same host time, spent while the GPU is
  // busy elsewhere, so the GPU timeline is the hidden one to the nanosecond.
  StepProgramOptions ahead = slow;
  ahead.host_ahead = true;
  for (const auto& r : {simulate_optimizer_step(plan, model, timer, ahead),
                        test::list_schedule_optimizer_step(plan, model, timer, ahead)}) {
    CHECK(r.host_issue_ns == synced.host_issue_ns);
    CHECK(r.wall_ns == hidden.wall_ns);
    REQUIRE(r.events.size() == hidden.events.size());
    for (std::size_t i = 0; i < r.events.size(); ++i) CHECK(r.events[i].start_ns == hidden.events[i].start_ns);
  }
}

TEST_CASE("closed-form collective times agree with the engine's flows", "[step_program]") {
  // The fallback closed form (SymmetricFabricTimer) against sim::simulate_collective on the
  // topology, all-to-all and all-gather, NDR400 and EFA presets. (FabricCollectiveTimer is the
  // collective model now: tests/sim/test_collective_model.cpp; its FSDP path is the closed form.)
  for (const char* name : {"h100-ndr400", "p5-efa"}) {
    for (auto [nodes, gpn] : {std::pair{1, 8}, std::pair{2, 4}, std::pair{4, 8}, std::pair{16, 8}}) {
      const auto spec = topo::preset(name);
      const FabricCollectiveTimer engine(spec, nodes, gpn, std::nullopt);
      const SymmetricFabricTimer closed(step_fabric(spec, nodes, gpn));
      const std::int64_t w = static_cast<std::int64_t>(nodes) * gpn;
      const std::int64_t peer = 8'000'000;
      INFO(name << " " << nodes << "x" << gpn);
      const CollectiveRequest a2a{StepCollective::all_to_all, peer * w, peer};
      CollectiveSpec direct;
      direct.op = CollectiveOp::alltoall;
      direct.bytes = peer * w;
      const double a2a_ns =
          static_cast<double>(simulate_collective(topo::Topology(spec, nodes, gpn), direct, Mode::fast).time.count_ps()) / 1e3;
      CHECK(a2a_ns == Approx(static_cast<double>(closed.time_ns(a2a))).epsilon(0.02));
      // all-gather and reduce-scatter: the closed form's ring against the engine's ring (exact mode)
      const CollectiveRequest ag{StepCollective::all_gather, peer, peer};
      CollectiveSpec ring;
      ring.op = CollectiveOp::allgather;
      ring.algorithm = Algorithm::ring;
      ring.bytes = peer * w;
      const topo::Topology topology(spec, nodes, gpn);
      const double ring_ns =
          static_cast<double>(simulate_collective(topology, ring, Mode::exact).time.count_ps()) / 1e3;
      // Bandwidth terms are identical ((w-1) pieces over the NIC); latency differs: the closed form
      // charges one hop latency per ring step (steps in lock-step), the engine's per-flow ring lets
      // a piece move on as soon as it arrived. At 8 MB pieces the two agree within 8 %.
      CHECK(static_cast<double>(closed.time_ns(ag)) == Approx(ring_ns).epsilon(0.08));
    }
  }
}

TEST_CASE("the engine's stream program and the one-pass list schedule (oracle) agree to the nanosecond",
          "[step_program]") {
  const auto model = h100();
  for (auto scope : {opt::Scope::local, opt::Scope::global, opt::Scope::global_capped}) {
    for (std::int64_t nodes : {1, 2, 16}) {
      for (double host_us : {0.0, 8.0}) {
        const auto plan = seed_plan(nodes * 8, scope);
        const SymmetricFabricTimer timer(fabric(static_cast<int>(nodes), 8, 25.0));
        StepProgramOptions options;
        options.host_launch_us = host_us;
        const auto a = simulate_optimizer_step(plan, model, timer, options);
        const auto b = test::list_schedule_optimizer_step(plan, model, timer, options);
        INFO(opt::to_string(scope) << " nodes " << nodes << " host " << host_us);
        CHECK(a.wall_ns == b.wall_ns);
        CHECK(a.exposed_comm_ns == b.exposed_comm_ns);
        CHECK(a.gpu_busy_ns == b.gpu_busy_ns);
        REQUIRE(a.events.size() == b.events.size());
        for (std::size_t i = 0; i < a.events.size(); ++i) {
          CHECK(a.events[i].start_ns == b.events[i].start_ns);
          CHECK(a.events[i].name == b.events[i].name);
        }
      }
    }
  }
}

namespace {

// One task of two phases: a kernel of `kernel_ns` isolated work, then a collective; the second
// task's kernel runs while the first task's collective is in flight.
// Two tasks of two phases: `first`, an all-to-all, then `second`.
opt::Plan two_task_plan(const opt::KernelWork& first = {"ns_gemm", 1e9, 0, 0},  // time set by the test's model
                        const opt::KernelWork& second = {"post", 0.0, 1, 0}) {
  opt::Plan plan;
  for (int t = 0; t < 2; ++t) {
    opt::GroupPlan g;
    g.rows = g.cols = 1024;
    opt::PhasePlan p0;
    p0.kernels = {first};
    p0.collective = {opt::CollectiveKind::all_to_all, "a2a_fwd", 1'000'000, 500'000};
    opt::PhasePlan p1;
    p1.kernels = {second};
    g.phases = {p0, p1};
    plan.groups.push_back(g);
  }
  return plan;
}

struct FixedTimer final : CollectiveTimer {
  DurationNs ns;
  explicit FixedTimer(DurationNs v) : ns(v) {}
  [[nodiscard]] DurationNs time_ns(const CollectiveRequest&) const override { return ns; }
};

}  // namespace

TEST_CASE("contention: kernels beside a collective run slower, by hand", "[step_program]") {
  // ns_gemm of 1e9 FLOPs at exactly 1e13 FLOP/s = 100 us; post negligible; collectives 60 us.
  auto config = default_kernel_model_config(hardware_preset("h200", "--hardware"));
  config.hardware.launch_gap_us = 0;
  config.TFLOPs_by_kernel["ns_gemm"] = 10.0;
  config.overlap_slowdown_by_kernel["ns_gemm"] = 2.0;
  const KernelModel model(config);
  const auto r = simulate_optimizer_step(two_task_plan(), model, FixedTimer(60'000));
  // Issue order A0 B0 A1 B1: A's GEMM [0, 100] alone; A's a2a [100, 160]; B's GEMM starts at 100,
  // runs at half speed while the a2a flies (30 us of work by 160), then 70 us at full speed -> 230.
  REQUIRE(r.events.size() == 6);
  CHECK(r.events[0].start_ns == 0);
  CHECK(r.events[0].duration_ns == 100'000);
  CHECK(r.events[1].name == "a2a_fwd");
  CHECK(r.events[1].start_ns == 100'000);
  CHECK(r.events[2].name == "ns_gemm");
  CHECK(r.events[2].start_ns == 100'000);
  CHECK(r.events[2].duration_ns == 130'000);
  // B's a2a follows its GEMM: [230, 290]; the GPU idles waiting for it -> exposed 60 us at the end
  CHECK(r.wall_ns >= 290'000);
  // Without slowdown the same program is the list schedule's.
  config.overlap_slowdown_by_kernel["ns_gemm"] = 1.0;
  const KernelModel flat(config);
  const auto a = simulate_optimizer_step(two_task_plan(), flat, FixedTimer(60'000));
  const auto b = test::list_schedule_optimizer_step(two_task_plan(), flat, FixedTimer(60'000));
  CHECK(a.wall_ns == b.wall_ns);
  CHECK(r.wall_ns > a.wall_ns);
}

TEST_CASE("the scheduler with every slowdown 1 equals the list schedule (oracle) on real plans", "[step_program]") {
  auto config = default_kernel_model_config(hardware_preset("h100-sxm", "--hardware"));
  config.overlap_slowdown_by_kernel["ns_gemm"] = 1.0;
  const KernelModel model(config);
  for (auto scope : {opt::Scope::local, opt::Scope::global, opt::Scope::global_capped}) {
    for (std::int64_t nodes : {1, 4}) {
      const auto plan = seed_plan(nodes * 8, scope);
      const SymmetricFabricTimer timer(fabric(static_cast<int>(nodes), 8, 25.0));
      StepProgramOptions options;
      options.host_launch_us = nodes == 4 ? 8.0 : 0.0;
      const auto a = simulate_optimizer_step(plan, model, timer, options);
      const auto b = test::list_schedule_optimizer_step(plan, model, timer, options);
      CHECK(a.wall_ns == b.wall_ns);
      CHECK(a.exposed_comm_ns == b.exposed_comm_ns);
      REQUIRE(a.events.size() == b.events.size());
      for (std::size_t i = 0; i < a.events.size(); ++i) CHECK(a.events[i].start_ns == b.events[i].start_ns);
      // and slowdown never makes the step shorter
      auto slow = config;
      slow.overlap_slowdown_by_kernel["ns_gemm"] = 1.9;
      slow.overlap_slowdown_by_kernel["post"] = 1.3;
      CHECK(simulate_optimizer_step(plan, KernelModel(slow), timer, options).wall_ns >= a.wall_ns);
    }
  }
}

TEST_CASE("contention: a collective beside a memory-bound kernel runs slower, by hand", "[step_program]") {
  // Two tasks, each a memory-bound kernel of 100 us, an all-to-all of 60 us, then a GEMM of 100 us.
  auto config = default_kernel_model_config(hardware_preset("h200", "--hardware"));
  config.hardware.launch_gap_us = 0;
  config.hardware.hbm_efficiency = 1.0;
  config.TFLOPs_by_kernel["ns_gemm"] = 10.0;  // 1e9 FLOPs = 100 us
  const KernelModel model(config);
  const auto bytes = static_cast<std::int64_t>(std::llround(100e-6 * config.hardware.hbm_GBps * 1e9));
  const opt::Plan plan = two_task_plan({"momentum", 0.0, bytes, 1}, {"ns_gemm", 1e9, 0, 1});
  StepProgramOptions options;
  options.collective_hbm_slowdown = 2.0;
  const auto r = simulate_optimizer_step(plan, model, FixedTimer(60'000), options);
  // Issue order A0 B0 A1 B1. A's kernel [0, 100]; A's a2a from 100 beside B's memory-bound kernel
  // [100, 200] at half speed (50 us of its 60 by 200), the rest alone -> [100, 210]. B's a2a waits
  // for it (one stream) and runs beside A's GEMM (compute-bound: full speed) -> [210, 270].
  REQUIRE(r.events.size() == 6);
  CHECK(r.events[0].duration_ns == 100'000);
  CHECK(r.events[1].name == "a2a_fwd");
  CHECK(r.events[1].start_ns == 100'000);
  CHECK(r.events[1].duration_ns == 110'000);
  CHECK(r.events[2].start_ns == 100'000);  // B's kernel: not slowed by the collective
  CHECK(r.events[2].duration_ns == 100'000);
  CHECK(r.events[3].start_ns == 210'000);  // B's a2a
  CHECK(r.events[3].duration_ns == 60'000);
  CHECK(r.events[4].start_ns == 210'000);  // A's GEMM after A's a2a
  CHECK(r.a2a_ns == 170'000);
  // Factor 1 is the plain schedule; below 1 is rejected.
  options.collective_hbm_slowdown = 1.0;
  CHECK(simulate_optimizer_step(plan, model, FixedTimer(60'000), options).a2a_ns == 120'000);
  CHECK(test::list_schedule_optimizer_step(plan, model, FixedTimer(60'000), options).a2a_ns == 120'000);
  options.collective_hbm_slowdown = 0.5;
  CHECK_THROWS_AS(simulate_optimizer_step(plan, model, FixedTimer(60'000), options), InputError);
  CHECK_THROWS_AS(lower_optimizer_step(plan, model, FixedTimer(60'000), options), InputError);
}

TEST_CASE("contention on real plans: every op between its isolated and its fully slowed time", "[step_program]") {
  // With slowdown s a kernel takes between d and s·d, a collective beside memory-bound kernels
  // between d and h·d (each within 1 ns of integer rounding); the lowering gives d.
  auto config = default_kernel_model_config(hardware_preset("h100-sxm", "--hardware"));
  config.overlap_slowdown_by_kernel["ns_gemm"] = 1.7;
  config.overlap_slowdown_by_kernel["post"] = 1.3;
  const KernelModel model(config);
  for (auto scope : {opt::Scope::local, opt::Scope::global, opt::Scope::global_capped}) {
    const auto plan = seed_plan(8, scope);
    const SymmetricFabricTimer timer(fabric(1, 8, 25.0));
    StepProgramOptions options;
    options.collective_hbm_slowdown = 1.5;
    const auto lowered = lower_optimizer_step(plan, model, timer, options);
    CHECK(lowered.contended());
    const auto r = schedule_optimizer_step(lowered);
    REQUIRE(r.events.size() == lowered.ops.size());
    int stretched = 0;
    for (std::size_t i = 0; i < r.events.size(); ++i) {
      const auto& op = lowered.ops[i];
      const double d = static_cast<double>(op.event.duration_ns);
      const double most = d * (op.event.stream == StreamKind::compute ? op.overlap_slowdown : 1.5);
      INFO(opt::to_string(scope) << " op " << i << " " << op.event.name);
      CHECK(static_cast<double>(r.events[i].duration_ns) >= d - 1);
      CHECK(static_cast<double>(r.events[i].duration_ns) <= most + 1);
      stretched += r.events[i].duration_ns > op.event.duration_ns + 1 ? 1 : 0;
    }
    CHECK(stretched > 0);
    CHECK(r.wall_ns >= simulate_optimizer_step(plan, h100(), timer).wall_ns);
    CHECK_THROWS_AS(test::list_schedule(lowered), std::logic_error);  // the oracle has no contention
  }
}
