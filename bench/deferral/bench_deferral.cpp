// Deferral study speed (issue 7): world 1024, seed-5120x8, 200 steps in under 10 s (reduced mode,
// the one that fits) and exact mode for gpt-1024x4 at world 2, 20 steps, in under 30 s; both with
// the default 2 threads. Wall time (UseRealTime) is what the bounds are about; the counters give
// the cost per simulated row-step so that exact and reduced can be compared in the same run.
#include <benchmark/benchmark.h>

#include "optimizer/deferral.hpp"

namespace {

using dionsim::opt::DeferralConfig;
using dionsim::opt::DeferralMode;

void BM_deferral(benchmark::State& state, const char* model, std::int64_t world, std::int64_t steps,
                 DeferralMode mode, bool pinned_c1) {
  DeferralConfig cfg;
  cfg.inventory = dionsim::opt::load_inventory(model);
  cfg.plan.world = world;
  cfg.steps = steps;
  cfg.mode = mode;
  if (pinned_c1) cfg.plan.capacity_factor = 1.0;
  dionsim::opt::DeferralSummary s;
  for (auto _ : state) {
    s = dionsim::opt::run_deferral(cfg);
    benchmark::DoNotOptimize(s.deferred_rows);
  }
  const double row_steps = static_cast<double>(s.packed_rows) * static_cast<double>(steps);
  state.counters["deferred_fraction"] = s.deferred_fraction;
  state.counters["row_steps"] = row_steps;
  state.counters["ns_per_row_step"] = s.wall_ms * 1e6 / row_steps;
}

BENCHMARK_CAPTURE(BM_deferral, seed_w1024_auto_200steps, "seed-5120x8", 1024, 200, DeferralMode::automatic, false)
    ->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);
BENCHMARK_CAPTURE(BM_deferral, seed_w1024_c1_200steps, "seed-5120x8", 1024, 200, DeferralMode::automatic, true)
    ->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);
BENCHMARK_CAPTURE(BM_deferral, gpt1024x4_w2_exact_20steps, "gpt-1024x4", 2, 20, DeferralMode::exact, false)
    ->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);
BENCHMARK_CAPTURE(BM_deferral, gpt1024x4_w2_reduced_20steps, "gpt-1024x4", 2, 20, DeferralMode::reduced, false)
    ->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();
