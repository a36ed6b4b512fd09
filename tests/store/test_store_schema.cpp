// Migrations: from an empty file and from every earlier schema version to the latest.
#include <catch2/catch.hpp>
#include <string>

#include "analysis/store/store.hpp"
#include "common/error.hpp"
#include "store_test_util.hpp"

using namespace dionsim::analysis;
using dionsim::test::RawDb;
using dionsim::test::TempDir;

namespace {

// The schema as SQLite reports it: every table, index and view with its SQL, in name order.
std::string schema_of(const std::string& path) {
  RawDb raw(path);
  return raw.text(
      "SELECT group_concat(type || ' ' || name || ': ' || sql, char(10)) FROM "
      "(SELECT type, name, sql FROM sqlite_schema WHERE sql IS NOT NULL ORDER BY name)");
}

}  // namespace

TEST_CASE("migrations are numbered 1..N in order and N is the latest version", "[analysis][store]") {
  const auto all = migrations();
  REQUIRE(all.size() >= 2);
  for (std::size_t i = 0; i < all.size(); ++i) CHECK(all[i].version == static_cast<int>(i + 1));
  CHECK(latest_schema_version() == all.back().version);
}

TEST_CASE("a new file is created at the latest version with WAL foreign keys and the dionsim id", "[analysis][store]") {
  const TempDir dir;
  const std::string path = dir.file("new.db");
  {
    auto db = Database::open(path);
    CHECK(db.schema_version() == latest_schema_version());
    CHECK(db.opened_at_version() == 0);
  }
  RawDb raw(path);
  CHECK(raw.integer("PRAGMA user_version") == latest_schema_version());
  CHECK(raw.integer("PRAGMA application_id") == kApplicationId);
  CHECK(raw.text("PRAGMA journal_mode") == "wal");
  for (const char* table : {"runs", "metrics", "phases", "collectives", "deferral", "kernel_timings", "calibrations"}) {
    INFO(table);
    CHECK(raw.integer(std::string("SELECT count(*) FROM sqlite_schema WHERE type='table' AND name='") + table + "'") ==
          1);
  }
}

TEST_CASE("foreign keys are enforced on the store's connection - deleting a run deletes its rows",
          "[analysis][store]") {
  const TempDir dir;
  auto db = Database::open(dir.file("fk.db"));
  auto record = RunRecord::begin("whatif", RunMode::simulated, {{"nodes", 2}}, 1);
  record.metrics.push_back({.name = "step_wall_ms", .value = 10.0, .unit = "ms"});
  record.kernel_timings.push_back(
      {.hardware = "H200", .kernel_class = "gemm", .dtype = "bf16", .m = 1, .n = 1, .k = 1, .time_us = 1.0});
  const auto id = db.store(record);
  CHECK(db.delete_run(id));
  CHECK_FALSE(db.delete_run(id));
  RawDb raw(db.path());
  CHECK(raw.integer("SELECT count(*) FROM metrics") == 0);
  CHECK(raw.integer("SELECT count(*) FROM kernel_timings") == 0);
}

TEST_CASE("an existing empty (0-byte) file is initialised like a new one", "[analysis][store]") {
  const TempDir dir;
  const std::string path = dir.file("empty.db");
  dionsim::test::write_bytes(path, "");
  auto db = Database::open(path);
  CHECK(db.schema_version() == latest_schema_version());
  CHECK(db.opened_at_version() == 0);
}

TEST_CASE("migrating from every earlier version keeps the data and yields the same schema as a new file",
          "[analysis][store]") {
  const TempDir dir;
  const std::string fresh = dir.file("fresh.db");
  { auto db = Database::open(fresh); }
  const std::string expected_schema = schema_of(fresh);
  REQUIRE_FALSE(expected_schema.empty());

  for (int version = 1; version < latest_schema_version(); ++version) {
    DYNAMIC_SECTION("from version " << version) {
      const std::string path = dir.file("v" + std::to_string(version) + ".db");
      create_database_at_version(path, version);
      {
        RawDb raw(path);
        REQUIRE(raw.integer("PRAGMA user_version") == version);
        REQUIRE(raw.integer("PRAGMA application_id") == kApplicationId);
        // A run as a version-1 dionsim wrote it (v1 tables only).
        raw.exec(
            "INSERT INTO runs (id, kind, mode, config_json, config_hash, seed, git_revision, dionsim_version, host, "
            "started_utc, finished_utc, status) VALUES (7, 'whatif', 'simulated', '{\"nodes\":4}', '" +
            config_hash({{"nodes", 4}}) +
            "', 3, 'abc', '0.1.0', 'h', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:01.000Z', 'ok');"
            "INSERT INTO metrics (run_id, name, value, unit) VALUES (7, 'step_wall_ms', 123.5, 'ms');");
      }
      auto db = Database::open(path);
      CHECK(db.opened_at_version() == version);
      CHECK(db.schema_version() == latest_schema_version());
      CHECK(db.has_run("whatif", config_hash({{"nodes", 4}})));
      const StoredRun run = db.load_run(7);
      REQUIRE(run.record.metrics.size() == 1);
      CHECK(run.record.metrics[0].value == 123.5);
      CHECK(run.record.config == nlohmann::json{{"nodes", 4}});
      // The new tables work on the migrated file.
      auto record = RunRecord::begin("calibrate", RunMode::simulated, {{"fit", "seed"}}, 0);
      record.calibrations.push_back({.name = "h200", .schema_version = 1, .body = {{"nic_GBps", 50.0}}});
      db.store(record);
      REQUIRE(db.calibration("h200").has_value());
      auto rows = RunRecord::begin("step", RunMode::simulated, {{"case", "x"}}, 0);
      rows.gradient_row_stats.push_back({.step = 0, .rows = 8, .cols = 4, .world = 2, .rank = 0, .row_count = 4,
                                         .mean_l1 = 2.5, .quantiles = {0.5, 1.0, 1.5}});
      const std::int64_t id = db.store(rows);
      CHECK(db.gradient_row_stats(id) == rows.gradient_row_stats);
      CHECK(schema_of(path) == expected_schema);
    }
  }
}

TEST_CASE("reopening a current file migrates nothing and keeps its runs", "[analysis][store]") {
  const TempDir dir;
  const std::string path = dir.file("again.db");
  {
    auto db = Database::open(path);
    db.store(RunRecord::begin("step", RunMode::simulated, {{"a", 1}}, 0));
  }
  auto db = Database::open(path);
  CHECK(db.opened_at_version() == latest_schema_version());
  CHECK(db.find_runs({}).size() == 1);
}

TEST_CASE("create_database_at_version refuses versions out of range and non-empty files", "[analysis][store]") {
  const TempDir dir;
  CHECK_THROWS_AS(create_database_at_version(dir.file("a.db"), 0), dionsim::InputError);
  CHECK_THROWS_AS(create_database_at_version(dir.file("b.db"), latest_schema_version() + 1), dionsim::InputError);
  const std::string path = dir.file("c.db");
  create_database_at_version(path, 1);
  CHECK_THROWS_AS(create_database_at_version(path, 1), dionsim::IoError);
}
