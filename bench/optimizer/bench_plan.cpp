// Plan construction cost: must stay far below 10 ms for gpt-14b at world 8192 (issue 3) because
// the simulator builds a plan per configuration of a sweep.
#include <benchmark/benchmark.h>

#include "optimizer/inventory.hpp"
#include "optimizer/plan.hpp"

namespace {

void BM_plan(benchmark::State& state, const char* model, dionsim::opt::Scope scope) {
  const auto inv = dionsim::opt::load_inventory(model);
  dionsim::opt::PlanConfig cfg;
  cfg.world = state.range(0);
  cfg.scope = scope;
  for (auto _ : state) {
    auto plan = dionsim::opt::make_plan(inv, cfg);
    benchmark::DoNotOptimize(plan.a2a_payload_bytes);
  }
}

BENCHMARK_CAPTURE(BM_plan, gpt14b_capped, "gpt-14b", dionsim::opt::Scope::global_capped)
    ->Arg(8)->Arg(8192)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_plan, gpt14b_global, "gpt-14b", dionsim::opt::Scope::global)
    ->Arg(8192)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_plan, seed_capped, "seed-5120x8", dionsim::opt::Scope::global_capped)
    ->Arg(16)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
