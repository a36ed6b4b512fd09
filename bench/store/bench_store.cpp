// How fast the results store records runs: one transaction per run, so the cost is a fixed
// per-transaction part (WAL append + fsync) plus a per-row part. The per-row rate is reported
// as items/s; BM_StoreEmptyRun is the fixed-cost baseline measured in the same process.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "analysis/store/store.hpp"

using namespace dionsim::analysis;

namespace {

struct TempDb {
  std::string dir;
  std::string path;
  TempDb() {
    std::string pattern = (std::filesystem::temp_directory_path() / "dionsim-bench-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir = pattern;
    path = dir + "/bench.db";
  }
  ~TempDb() { std::filesystem::remove_all(dir); }
};

RunRecord run_with_metrics(std::int64_t rows, std::int64_t index) {
  auto r = RunRecord::begin("whatif", RunMode::simulated, {{"index", index}, {"scope", "global_capped"}}, 0);
  r.metrics.reserve(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) {
    r.metrics.push_back(
        {.name = "a2a_ms", .value = 0.5 * static_cast<double>(i), .unit = "ms", .rank = i % 64, .step = i / 64});
  }
  return r;
}

RunRecord run_with_phases(std::int64_t rows, std::int64_t index) {
  auto r = RunRecord::begin("measure", RunMode::measured, {{"index", index}}, 0);
  r.phases.reserve(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) {
    r.phases.push_back({.rank = i % 8,
                        .step = i / 64,
                        .megabatch = i % 3,
                        .phase = "newton_schulz",
                        .kernel_class = "gemm",
                        .start_ns = i * 1000,
                        .duration_ns = 900,
                        .bytes = 0,
                        .flops = 1 << 30});
  }
  return r;
}

void BM_StoreEmptyRun(benchmark::State& state) {
  TempDb tmp;
  auto db = Database::open(tmp.path);
  std::int64_t index = 0;
  for (auto _ : state) db.store(run_with_metrics(0, index++));
}

void BM_StoreMetrics(benchmark::State& state) {
  TempDb tmp;
  auto db = Database::open(tmp.path);
  std::int64_t index = 0;
  const auto record = run_with_metrics(state.range(0), 0);
  for (auto _ : state) {
    state.PauseTiming();
    auto r = record;
    r.config["index"] = index++;
    state.ResumeTiming();
    db.store(r);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_StorePhases(benchmark::State& state) {
  TempDb tmp;
  auto db = Database::open(tmp.path);
  std::int64_t index = 0;
  const auto record = run_with_phases(state.range(0), 0);
  for (auto _ : state) {
    state.PauseTiming();
    auto r = record;
    r.config["index"] = index++;
    state.ResumeTiming();
    db.store(r);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

// A sweep's resume check against a database already holding 2 000 runs (each stored in its own
// transaction, as a sweep does: the set-up takes ~10 s).
void BM_HasRun(benchmark::State& state) {
  TempDb tmp;
  auto db = Database::open(tmp.path);
  for (std::int64_t i = 0; i < 2'000; ++i) db.store(run_with_metrics(0, i));
  std::int64_t i = 0;
  for (auto _ : state) {
    const nlohmann::json config = {{"index", (i++ * 7919) % 4'000}, {"scope", "global_capped"}};
    benchmark::DoNotOptimize(db.has_run("whatif", config_hash(config)));
  }
}

// Opening an existing database: header check, identity, quick_check, pragmas.
void BM_OpenExisting(benchmark::State& state) {
  TempDb tmp;
  {
    auto db = Database::open(tmp.path);
    for (std::int64_t i = 0; i < 100; ++i) db.store(run_with_metrics(1000, i));
  }
  for (auto _ : state) benchmark::DoNotOptimize(Database::open(tmp.path).schema_version());
}

}  // namespace

BENCHMARK(BM_StoreEmptyRun)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StoreMetrics)->Arg(1'000)->Arg(100'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StorePhases)->Arg(1'000)->Arg(100'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_HasRun)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_OpenExisting)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
