// What-if speed (issue 5): the demo sweep (3 scopes x 1..64 nodes x {NDR400, EFA} = 42
// configurations, budget 1 min) and one 1024-GPU what-if of seed-5120x8 (budget 5 s), each
// against a baseline measured in the same run: the plan alone for the same configurations, so
// the ratio shows what the step program and the fabric simulation add.
// The step scheduler (issue 15): one calibrated optimizer step (every kernel beside a collective
// rate-modulated) against the same step with the slowdowns off, both on the one scheduler. Measured
// once against the double-time contention loop it replaced, before that was deleted (commit
// 5f8db69): 3.0-3.4x its time, 8.5 vs 2.9 us (docs/simulator.md "Streams").
#include <benchmark/benchmark.h>

#include "calibrated_step.hpp"

#include "optimizer/inventory.hpp"
#include "sim/whatif.hpp"
#include "topologies/topology.hpp"

namespace {

using namespace dionsim;

sim::WhatifStudy demo_study() {
  sim::WhatifStudy s;
  s.base.model = "seed-5120x8";
  s.base.plan.optimizer = opt::OptimizerKind::nordion2;
  s.base.plan.ns = opt::NsKind::gram;
  s.base.fwd_bwd_ms = 456.6;
  s.base.gpus_per_node = 8;
  s.scopes = {opt::Scope::local, opt::Scope::global, opt::Scope::global_capped};
  s.fractions = {0.25};
  s.capacity_factors = {std::nullopt};
  s.nodes = {1, 2, 4, 8, 16, 32, 64};
  s.fabrics = {topo::preset("h100-ndr400"), topo::preset("p5-efa")};
  return s;
}

const sim::KernelModel& kernels() {
  static const sim::KernelModel model(sim::default_kernel_model_config(sim::hardware_preset("h100-sxm", "bench")));
  return model;
}

void BM_DemoSweep(benchmark::State& state) {
  const auto inventory = opt::seed_5120x8();
  const auto configs = sim::expand(demo_study());
  for (auto _ : state) {
    for (const auto& c : configs) benchmark::DoNotOptimize(sim::run_whatif(c, inventory, kernels()).step_wall_ns);
  }
  state.counters["configs"] = static_cast<double>(configs.size());
}
BENCHMARK(BM_DemoSweep)->Unit(benchmark::kMillisecond);

void BM_DemoSweepPlansOnly(benchmark::State& state) {  // baseline: the plans of the same sweep
  const auto inventory = opt::seed_5120x8();
  const auto configs = sim::expand(demo_study());
  for (auto _ : state) {
    for (const auto& c : configs) {
      benchmark::DoNotOptimize(opt::make_plan(inventory, c.plan_config()).a2a_payload_bytes);
    }
  }
}
BENCHMARK(BM_DemoSweepPlansOnly)->Unit(benchmark::kMillisecond);

void BM_Whatif1024(benchmark::State& state) {
  auto study = demo_study();
  study.nodes = {128};  // 128 x 8 = 1024 GPUs
  study.fabrics = {topo::preset("h100-ndr400")};
  study.scopes = {static_cast<opt::Scope>(state.range(0))};
  const auto config = sim::expand(study).front();
  const auto inventory = opt::seed_5120x8();
  for (auto _ : state) benchmark::DoNotOptimize(sim::run_whatif(config, inventory, kernels()).step_wall_ns);
  state.SetLabel(std::string(opt::to_string(config.plan.scope)) + " w=1024");
}
BENCHMARK(BM_Whatif1024)->DenseRange(0, 2)->Unit(benchmark::kMillisecond);

// Arg 0: global on 2 x 8 (the 2-node seed run, whatif_step_calibration); 1: global_capped on
// 1 x 8 with collective_hbm_slowdown 1.4 (both contention effects).
dionsim::bench::CalibratedStep bench_step(std::int64_t arg) {
  static const auto cal = dionsim::bench::seed_calibration();
  return arg == 0 ? dionsim::bench::calibrated_step(cal, opt::Scope::global, 2, 8, 1.0, true)
                  : dionsim::bench::calibrated_step(cal, opt::Scope::global_capped, 1, 8, 1.4, true);
}

void BM_CalibratedStep(benchmark::State& state) {
  const auto s = bench_step(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(sim::simulate_optimizer_step(s.plan, *s.kernels, *s.timer, s.options).wall_ns);
  }
}
BENCHMARK(BM_CalibratedStep)->DenseRange(0, 1)->Unit(benchmark::kMicrosecond);

void BM_CalibratedStepNoContention(benchmark::State& state) {  // baseline: slowdowns off, same scheduler
  auto s = bench_step(state.range(0));
  auto config = s.kernels->config();
  config.overlap_slowdown_by_kernel.clear();
  const sim::KernelModel flat(config);
  s.options.collective_hbm_slowdown = 1.0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(sim::simulate_optimizer_step(s.plan, flat, *s.timer, s.options).wall_ns);
  }
}
BENCHMARK(BM_CalibratedStepNoContention)->DenseRange(0, 1)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
