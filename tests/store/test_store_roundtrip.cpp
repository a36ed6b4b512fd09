// A run round-trips exactly; has_run / --force semantics; queries the later subcommands use.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>

#include "analysis/store/store.hpp"
#include "common/error.hpp"
#include "store_test_util.hpp"

using namespace dionsim::analysis;
using dionsim::ConfigMatch;  // common/config_match.hpp
using dionsim::test::RawDb;
using dionsim::test::TempDir;

namespace {

RunRecord full_record() {
  const auto config = nlohmann::json::parse(R"({"scope": "global_capped", "world": 16, "fraction": 0.25,
      "fabric": {"preset": "ndr400", "nic_GBps": 50.0}, "capacity_factor": null, "note": "ünïcode ✓"})");
  auto r = RunRecord::begin("measure", RunMode::measured, config, 0xfedcba9876543210ULL);  // seed ≥ 2^63
  r.metrics = {
      {.name = "opt_wall_ms", .value = 34.125, .unit = "ms"},
      {.name = "a2a_ms", .value = 1e-300, .unit = "ms", .rank = 3, .step = 7},
      {.name = "a2a_payload_bytes", .value = 3.5e9, .unit = "bytes", .rank = 0, .labels = {{"scope", "global_capped"}}},
      {.name = "mfu_pct", .value = -0.0, .unit = "pct", .step = 2},
  };
  r.phases = {
      {.rank = 0,
       .step = 1,
       .megabatch = 2,
       .phase = "newton_schulz",
       .kernel_class = "gemm",
       .start_ns = 1'000,
       .duration_ns = 250'000,
       .bytes = 0,
       .flops = 8'589'934'592'000},
      {.rank = 1,
       .step = 1,
       .megabatch = std::nullopt,
       .phase = "norm_allgather",
       .kernel_class = "nccl_allgather",
       .start_ns = 0,
       .duration_ns = 0,
       .bytes = 81'920,
       .flops = 0},
  };
  r.collectives = {{.op = "alltoall",
                    .bytes = 1 << 20,
                    .world = 16,
                    .nodes = 2,
                    .time_us = 210.5,
                    .algbw_GBps = 4.98,
                    .busbw_GBps = 4.67}};
  r.deferral = {{.trial = 0, .step = 0, .rank = 0, .winner_rows = 10, .deferred_rows = 0},
                {.trial = 1, .step = 5, .rank = 15, .winner_rows = 12, .deferred_rows = 3}};
  r.kernel_timings = {{.hardware = "H200",
                       .kernel_class = "gemm",
                       .dtype = "bf16",
                       .m = 5120,
                       .n = 5120,
                       .k = 1280,
                       .batch = 8,
                       .time_us = 95.25,
                       .samples = 10}};
  r.calibrations = {{.name = "h200-2gpu",
                     .schema_version = 3,
                     .body = {{"nvlink_eff", 0.8}},
                     .created_utc = "2026-11-30T00:00:00.000Z"}};
  r.gradient_row_stats = {{.step = 0, .rows = 32, .cols = 48, .world = 2, .rank = 1, .row_count = 64,
                           .mean_l1 = 38.25, .quantiles = {0.5, 0.875, 1.0, 1.125, 2.0}}};
  r.message = "ok with a note";
  return r;
}

}  // namespace

TEST_CASE("a run with every kind of row round-trips exactly", "[analysis][store]") {
  const TempDir dir;
  auto db = Database::open(dir.file("rt.db"));
  const RunRecord record = full_record();
  const auto id = db.store(record);
  const StoredRun back = db.load_run(id);
  CHECK(back.id == id);
  CHECK(back.config_hash == config_hash(record.config));
  CHECK(back.record.seed == 0xfedcba9876543210ULL);
  CHECK(back.record.metrics == record.metrics);
  CHECK(back.record.phases == record.phases);
  CHECK(back.record.collectives == record.collectives);
  CHECK(back.record.deferral == record.deferral);
  CHECK(back.record.kernel_timings == record.kernel_timings);
  CHECK(back.record.calibrations == record.calibrations);
  CHECK(back.record.gradient_row_stats == record.gradient_row_stats);
  CHECK(db.newest_run_with_gradient_row_stats() == id);
  CHECK(db.gradient_row_stats() == record.gradient_row_stats);
  CHECK(back.record.config == record.config);
  CHECK(back.record.finished_utc >= back.record.started_utc);  // filled by store(); ISO text sorts
  RunRecord expected = record;
  expected.finished_utc = back.record.finished_utc;
  CHECK(back.record == expected);

  // What sqlite3 users see: canonical config text and its hash, mode and status as words.
  RawDb raw(db.path());
  CHECK(
      raw.text("SELECT config_json FROM runs") ==
      R"({"capacity_factor":null,"fabric":{"nic_GBps":50.0,"preset":"ndr400"},"fraction":0.25,"note":"ünïcode ✓","scope":"global_capped","world":16})");
  CHECK(raw.text("SELECT config_hash FROM runs") == sha256_hex(raw.text("SELECT config_json FROM runs")));
  CHECK(raw.text("SELECT mode || '/' || status FROM runs") == "measured/ok");
  CHECK(raw.integer("SELECT count(*) FROM run_metrics WHERE kind = 'measure'") == 4);
  CHECK_THROWS_AS(db.load_run(id + 1), dionsim::IoError);
}

TEST_CASE("has_run - a stored configuration is skipped - --force replaces it - failed runs are retried",
          "[analysis][store]") {
  const TempDir dir;
  auto db = Database::open(dir.file("resume.db"));
  const nlohmann::json config = {{"nodes", 8}, {"scope", "local"}};
  const std::string hash = config_hash(config);
  CHECK_FALSE(db.has_run("whatif", hash));

  auto failed = RunRecord::begin("whatif", RunMode::simulated, config, 1);
  failed.status = RunStatus::failed;
  failed.message = "fabric solver diverged";
  db.store(failed);
  CHECK_FALSE(db.has_run("whatif", hash));  // a failed run does not count as done

  CHECK_FALSE(db.stored_revision("whatif", hash).has_value());  // nor is its revision reported

  auto first = RunRecord::begin("whatif", RunMode::simulated, config, 1);
  first.metrics.push_back({.name = "step_wall_ms", .value = 100.0, .unit = "ms"});
  first.git_revision = "0123abc";  // an older dionsim's run: --db's skip names it (Recorder::skip)
  const auto first_id = db.store(first);
  CHECK(db.has_run("whatif", hash));
  CHECK(db.stored_revision("whatif", hash) == std::optional<std::string>("0123abc"));
  CHECK_FALSE(db.stored_revision("deferral", hash).has_value());
  CHECK_FALSE(db.has_run("deferral", hash));                                            // other subcommand
  CHECK_FALSE(db.has_run("whatif", config_hash({{"nodes", 16}, {"scope", "local"}})));  // other config
  // Same configuration built in another key order: same hash, still stored.
  CHECK(db.has_run("whatif", config_hash(nlohmann::json::parse(R"({"scope":"local","nodes":8})"))));

  // keep: a second run beside the first (e.g. repeated measurements).
  db.store(first, OnExisting::keep);
  CHECK(db.find_runs({.kind = "whatif"}).size() == 2);
  CHECK(db.find_runs({.kind = "whatif", .include_failed = true}).size() == 3);

  // replace (--force): all earlier runs of that kind+config go, with their rows, in the same transaction.
  auto second = RunRecord::begin("whatif", RunMode::simulated, config, 1);
  second.metrics.push_back({.name = "step_wall_ms", .value = 90.0, .unit = "ms"});
  const auto second_id = db.store(second, OnExisting::replace);
  CHECK(second_id > first_id + 1);  // ids are never reused, even after the delete
  const auto runs = db.find_runs({.kind = "whatif", .include_failed = true});
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].id == second_id);
  RawDb raw(db.path());
  CHECK(raw.integer("SELECT count(*) FROM metrics") == 1);
  CHECK(raw.integer("SELECT value FROM metrics") == 90);
  CHECK(db.has_run("whatif", hash));
}

TEST_CASE("an invalid record is refused before anything is written", "[analysis][store]") {
  const TempDir dir;
  auto db = Database::open(dir.file("bad.db"));
  auto record = RunRecord::begin("whatif", RunMode::simulated, {{"nodes", 1}}, 0);
  record.metrics.push_back({.name = "ok", .value = 1.0, .unit = ""});
  record.metrics.push_back({.name = "mfu_pct", .value = std::nan(""), .unit = "pct"});
  try {
    db.store(record);
    FAIL("a NaN metric was stored");
  } catch (const dionsim::InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("metrics[1].value (mfu_pct): got 'nan', expected a finite number"));
  }
  auto bad_kind = RunRecord::begin("What If", RunMode::simulated, {{"nodes", 1}}, 0);
  CHECK_THROWS_AS(db.store(bad_kind), dionsim::InputError);
  auto bad_config = RunRecord::begin("whatif", RunMode::simulated, nlohmann::json::array({1, 2}), 0);
  CHECK_THROWS_AS(db.store(bad_config), dionsim::InputError);
  auto bad_phase = RunRecord::begin("whatif", RunMode::simulated, {{"nodes", 1}}, 0);
  bad_phase.phases.push_back({.phase = "pack", .kernel_class = "pack", .duration_ns = -5});
  CHECK_THROWS_AS(db.store(bad_phase), dionsim::InputError);
  auto bad_timing = RunRecord::begin("measure", RunMode::measured, {{"nodes", 1}}, 0);
  bad_timing.kernel_timings.push_back({.hardware = "H200", .kernel_class = "gemm", .batch = 0, .time_us = 1});
  CHECK_THROWS_AS(db.store(bad_timing), dionsim::InputError);
  auto bad_rows = RunRecord::begin("step", RunMode::simulated, {{"nodes", 1}}, 0);
  bad_rows.gradient_row_stats.push_back({.rows = 4, .cols = 4, .world = 2, .rank = 2, .row_count = 2, .mean_l1 = 1,
                                         .quantiles = {1.0, 1.0}});
  CHECK_THROWS_AS(db.store(bad_rows), dionsim::InputError);  // rank outside the world
  bad_rows.gradient_row_stats[0].rank = 1;
  bad_rows.gradient_row_stats[0].quantiles = {1.0};
  CHECK_THROWS_AS(db.store(bad_rows), dionsim::InputError);  // one quantile is no distribution
  CHECK(db.find_runs({.include_failed = true}).empty());
  RawDb raw(db.path());
  CHECK(raw.integer("SELECT count(*) FROM metrics") == 0);
}

TEST_CASE("ConfigMatch - key=value against numbers strings booleans null and nested keys", "[analysis][store]") {
  const auto config = nlohmann::json::parse(
      R"({"world": 2, "fraction": 0.25, "scope": "global", "bf16": true, "cf": null, "fabric": {"nic_GBps": 50}, "nodes": [1, 2]})");
  CHECK(ConfigMatch::parse("world=2").matches(config));
  CHECK(ConfigMatch::parse("world=2.0").matches(config));
  CHECK_FALSE(ConfigMatch::parse("world=4").matches(config));
  CHECK(ConfigMatch::parse("fraction=0.25").matches(config));
  CHECK_FALSE(ConfigMatch::parse("fraction=0.250001").matches(config));
  CHECK_FALSE(ConfigMatch::parse("fraction=quarter").matches(config));
  CHECK(ConfigMatch::parse("scope=global").matches(config));
  CHECK_FALSE(ConfigMatch::parse("scope=global_capped").matches(config));
  CHECK(ConfigMatch::parse("bf16=true").matches(config));
  CHECK_FALSE(ConfigMatch::parse("bf16=1").matches(config));
  CHECK(ConfigMatch::parse("cf=null").matches(config));
  CHECK(ConfigMatch::parse("fabric.nic_GBps=50").matches(config));
  CHECK_FALSE(ConfigMatch::parse("fabric.latency_us=1").matches(config));
  CHECK_FALSE(ConfigMatch::parse("scope.x=1").matches(config));
  CHECK(ConfigMatch::parse("nodes=[1,2]").matches(config));
  CHECK(ConfigMatch::parse("scope=").key == "scope");
  CHECK_THROWS_AS(ConfigMatch::parse("world"), dionsim::UsageError);
  CHECK_THROWS_AS(ConfigMatch::parse("=2"), dionsim::UsageError);
}

TEST_CASE("metrics() - measured runs selected by config key=value with their configs", "[analysis][store]") {
  const TempDir dir;
  auto db = Database::open(dir.file("q.db"));
  for (const int world : {2, 4}) {
    for (const auto mode : {RunMode::measured, RunMode::simulated}) {
      auto r = RunRecord::begin(mode == RunMode::measured ? "measure" : "whatif", mode,
                                {{"world", world}, {"scope", "global"}}, 0);
      r.metrics.push_back(
          {.name = "opt_wall_ms", .value = 10.0 * world + (mode == RunMode::measured ? 1 : 0), .unit = "ms"});
      r.metrics.push_back({.name = "a2a_ms", .value = 1.0 * world, .unit = "ms", .rank = 0});
      db.store(r);
    }
  }
  const auto rows = db.metrics({.mode = RunMode::measured, .where = {ConfigMatch::parse("world=2")}});
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].metric.name == "opt_wall_ms");
  CHECK(rows[0].metric.value == 21.0);
  CHECK(rows[0].kind == "measure");
  CHECK(rows[0].config["world"] == 2);
  CHECK(rows[1].metric.rank == 0);
  const std::vector<std::string> names = {"opt_wall_ms"};
  const auto walls = db.metrics({.mode = RunMode::measured}, names);
  REQUIRE(walls.size() == 2);
  CHECK(walls[1].metric.value == 41.0);
  CHECK(db.metrics({.kind = "whatif", .where = {ConfigMatch::parse("scope=local")}}).empty());
  CHECK(db.metrics({}).size() == 8);
}

TEST_CASE("kernel_timings by hardware and class sorted by shape - failed runs ignored", "[analysis][store]") {
  const TempDir dir;
  auto db = Database::open(dir.file("k.db"));
  auto r = RunRecord::begin("measure", RunMode::measured, {{"run", 1}}, 0);
  r.kernel_timings = {
      {.hardware = "H200", .kernel_class = "gemm", .dtype = "bf16", .m = 5120, .n = 5120, .k = 2560, .time_us = 180},
      {.hardware = "H200", .kernel_class = "gemm", .dtype = "bf16", .m = 2560, .n = 5120, .k = 1280, .time_us = 50},
      {.hardware = "H200", .kernel_class = "norms", .dtype = "fp32", .m = 5120, .n = 5120, .time_us = 12},
      {.hardware = "H100", .kernel_class = "gemm", .dtype = "bf16", .m = 2560, .n = 5120, .k = 1280, .time_us = 80},
      {.hardware = "H200", .kernel_class = "gemm", .dtype = "fp32", .m = 64, .n = 64, .k = 64, .time_us = 3},
  };
  db.store(r);
  auto failed = RunRecord::begin("measure", RunMode::measured, {{"run", 2}}, 0);
  failed.status = RunStatus::failed;
  failed.kernel_timings = {
      {.hardware = "H200", .kernel_class = "gemm", .dtype = "bf16", .m = 1, .n = 1, .k = 1, .time_us = 1}};
  db.store(failed);

  const auto bf16 = db.kernel_timings("H200", "gemm", "bf16");
  REQUIRE(bf16.size() == 2);
  CHECK(bf16[0].m == 2560);
  CHECK(bf16[0].time_us == 50);
  CHECK(bf16[1].m == 5120);
  CHECK(db.kernel_timings("H200", "gemm").size() == 3);
  CHECK(db.kernel_timings("H200", "gemm")[0].dtype == "bf16");
  CHECK(db.kernel_timings("H100", "gemm").size() == 1);
  CHECK(db.kernel_timings("H200", "pack").empty());
}

TEST_CASE("calibration by name returns the newest - names are listed", "[analysis][store]") {
  const TempDir dir;
  auto db = Database::open(dir.file("c.db"));
  CHECK_FALSE(db.calibration("seed").has_value());
  for (const double nic : {40.0, 45.0}) {
    auto r = RunRecord::begin("calibrate", RunMode::simulated, {{"input", "seed"}, {"nic", nic}}, 0);
    r.calibrations.push_back({.name = "seed", .schema_version = 1, .body = {{"nic_GBps", nic}}});
    db.store(r);
  }
  auto other = RunRecord::begin("calibrate", RunMode::simulated, {{"input", "h200"}}, 0);
  other.calibrations.push_back({.name = "h200", .schema_version = 2, .body = {{"nvlink_eff", 0.9}}});
  db.store(other);
  const auto seed = db.calibration("seed");
  REQUIRE(seed.has_value());
  CHECK(seed->body["nic_GBps"] == 45.0);
  CHECK_FALSE(seed->created_utc.empty());
  CHECK(db.calibration("h200")->schema_version == 2);
  CHECK(db.calibration_names() == std::vector<std::string>{"h200", "seed"});
}

TEST_CASE("read-only access reads but never writes and needs an existing current file", "[analysis][store]") {
  const TempDir dir;
  const std::string path = dir.file("ro.db");
  CHECK_THROWS_AS(Database::open(path, Access::read_only), dionsim::IoError);
  CHECK_FALSE(std::filesystem::exists(path));
  { Database::open(path).store(RunRecord::begin("step", RunMode::simulated, {{"a", 1}}, 0)); }
  auto db = Database::open(path, Access::read_only);
  CHECK(db.find_runs({}).size() == 1);
  CHECK_THROWS_AS(db.store(RunRecord::begin("step", RunMode::simulated, {{"a", 2}}, 0)), dionsim::IoError);

  const std::string old = dir.file("old.db");
  create_database_at_version(old, 1);
  CHECK_THROWS_WITH(Database::open(old, Access::read_only), Catch::Contains("migrate"));
}

TEST_CASE("a stored metric another tool set to infinity is refused on reading, naming the metric", "[analysis][store]") {
  // scripts/fuzz_cli.py: `UPDATE metrics SET value = 9e999` reached report's log axes and calibrate's fit.
  const TempDir dir;
  std::int64_t id = 0;
  {
    auto db = Database::open(dir.file("inf.db"));
    auto record = RunRecord::begin("whatif", RunMode::simulated, {{"nodes", 1}}, 0);
    record.metrics.push_back({.name = "step_wall_ms", .value = 1.0, .unit = "ms"});
    id = db.store(record);
  }
  RawDb(dir.file("inf.db")).exec("UPDATE metrics SET value = 9e999");
  const auto db = Database::open(dir.file("inf.db"), Access::read_only);
  CHECK_THROWS_WITH(db.load_run(id), Catch::Contains("inf.db: metrics.step_wall_ms: value: got 'inf', expected a finite number"));
}
