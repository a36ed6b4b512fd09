#include "analysis/store/store_schema.hpp"

#include <sqlite3.h>

#include <array>

#include "analysis/store/store_schema_internal.hpp"
#include "analysis/store/store_sqlite.hpp"
#include "common/error.hpp"

namespace dionsim::analysis {

namespace {

// v1: runs and the result tables of the first subcommands. STRICT tables: SQLite enforces the
// column types (3.37+; Debian 12 ships 3.40). Units are in the column names.
constexpr std::string_view kV1 = R"sql(
CREATE TABLE runs (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused, even after --force deletes
  kind            TEXT NOT NULL CHECK (kind <> ''),
  mode            TEXT NOT NULL CHECK (mode IN ('simulated', 'measured')),
  config_json     TEXT NOT NULL CHECK (json_valid(config_json)),
  config_hash     TEXT NOT NULL CHECK (length(config_hash) = 64),
  seed            INTEGER NOT NULL,
  git_revision    TEXT NOT NULL,
  dionsim_version TEXT NOT NULL,
  host            TEXT NOT NULL,
  started_utc     TEXT NOT NULL,
  finished_utc    TEXT NOT NULL,
  status          TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
  message         TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX runs_by_config ON runs (kind, config_hash, status);

CREATE TABLE metrics (
  run_id      INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  name        TEXT NOT NULL CHECK (name <> ''),
  value       REAL NOT NULL,
  unit        TEXT NOT NULL,
  rank        INTEGER,
  step        INTEGER,
  labels_json TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(labels_json))
) STRICT;
CREATE INDEX metrics_by_run ON metrics (run_id);
CREATE INDEX metrics_by_name ON metrics (name);

CREATE TABLE phases (
  run_id       INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  rank         INTEGER NOT NULL,
  step         INTEGER NOT NULL,
  megabatch    INTEGER,
  phase        TEXT NOT NULL,
  kernel_class TEXT NOT NULL,
  start_ns     INTEGER NOT NULL,
  duration_ns  INTEGER NOT NULL CHECK (duration_ns >= 0),
  bytes        INTEGER NOT NULL CHECK (bytes >= 0),
  flops        INTEGER NOT NULL CHECK (flops >= 0)
) STRICT;
CREATE INDEX phases_by_run ON phases (run_id);

CREATE TABLE collectives (
  run_id     INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  op         TEXT NOT NULL,
  bytes      INTEGER NOT NULL CHECK (bytes >= 0),
  world      INTEGER NOT NULL CHECK (world >= 1),
  nodes      INTEGER NOT NULL CHECK (nodes >= 1),
  time_us    REAL NOT NULL CHECK (time_us >= 0),
  algbw_GBps REAL NOT NULL,
  busbw_GBps REAL NOT NULL
) STRICT;
CREATE INDEX collectives_by_run ON collectives (run_id);

CREATE TABLE deferral (
  run_id        INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  trial         INTEGER NOT NULL,
  step          INTEGER NOT NULL,
  rank          INTEGER NOT NULL,
  winner_rows   INTEGER NOT NULL CHECK (winner_rows >= 0),
  deferred_rows INTEGER NOT NULL CHECK (deferred_rows >= 0)
) STRICT;
CREATE INDEX deferral_by_run ON deferral (run_id);

-- Metrics with their run's identity, for ad-hoc sqlite3 queries.
CREATE VIEW run_metrics AS
  SELECT r.id AS run_id, r.kind, r.mode, r.status, r.config_json, r.seed, r.started_utc,
         m.name, m.value, m.unit, m.rank, m.step, m.labels_json
  FROM metrics m JOIN runs r ON r.id = m.run_id;
)sql";

// v2: what the kernel-time model and calibration need: measured kernel times by class and shape,
// and named calibrations (schema-versioned JSON documents).
constexpr std::string_view kV2 = R"sql(
CREATE TABLE kernel_timings (
  run_id       INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  hardware     TEXT NOT NULL CHECK (hardware <> ''),
  kernel_class TEXT NOT NULL CHECK (kernel_class <> ''),
  dtype        TEXT NOT NULL,
  m            INTEGER NOT NULL CHECK (m >= 0),
  n            INTEGER NOT NULL CHECK (n >= 0),
  k            INTEGER NOT NULL CHECK (k >= 0),
  batch        INTEGER NOT NULL CHECK (batch >= 1),
  time_us      REAL NOT NULL CHECK (time_us >= 0),
  samples      INTEGER NOT NULL CHECK (samples >= 1)
) STRICT;
CREATE INDEX kernel_timings_by_class ON kernel_timings (hardware, kernel_class, dtype, m, n, k, batch);
CREATE INDEX kernel_timings_by_run ON kernel_timings (run_id);

CREATE TABLE calibrations (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,  -- order of storing: the newest wins
  run_id         INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  name           TEXT NOT NULL CHECK (name <> ''),
  schema_version INTEGER NOT NULL CHECK (schema_version >= 1),
  body_json      TEXT NOT NULL CHECK (json_valid(body_json)),
  created_utc    TEXT NOT NULL
) STRICT;
CREATE INDEX calibrations_by_name ON calibrations (name, id);
CREATE INDEX calibrations_by_run ON calibrations (run_id);
)sql";

// v3: gradient row statistics per step, shape group and rank shard — what the deferral study's
// replay:DB stream draws gradient rows from (docs/database.md, docs/deferral.md).
constexpr std::string_view kV3 = R"sql(
CREATE TABLE gradient_row_stats (
  run_id         INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step           INTEGER NOT NULL CHECK (step >= 0),
  rows           INTEGER NOT NULL CHECK (rows >= 1),
  cols           INTEGER NOT NULL CHECK (cols >= 1),
  world          INTEGER NOT NULL CHECK (world >= 1),
  rank           INTEGER NOT NULL CHECK (rank >= 0 AND rank < world),
  row_count      INTEGER NOT NULL CHECK (row_count >= 1),
  mean_l1        REAL NOT NULL CHECK (mean_l1 >= 0),
  quantiles_json TEXT NOT NULL CHECK (json_valid(quantiles_json) AND json_array_length(quantiles_json) >= 2)
) STRICT;
CREATE INDEX gradient_row_stats_by_run ON gradient_row_stats (run_id);
)sql";

constexpr std::array<Migration, 3> kMigrations = {{
    {1, "runs, metrics, phases, collectives, deferral; view run_metrics", kV1},
    {2, "kernel_timings, calibrations", kV2},
    {3, "gradient_row_stats", kV3},
}};

}  // namespace

std::span<const Migration> migrations() { return kMigrations; }

int latest_schema_version() { return kMigrations.back().version; }

namespace detail {

int migrate(const sqlite::Connection& connection, int target_version) {
  // One transaction for all steps: a file is at its old version or the target, never between.
  // The version is re-read under the write lock: another process may have migrated meanwhile.
  sqlite::Transaction transaction(connection);
  const auto current = static_cast<int>(connection.query_int("PRAGMA user_version"));
  if (current >= target_version) return current;
  if (current == 0) {
    connection.exec("PRAGMA application_id = " + std::to_string(kApplicationId));
  }
  for (const Migration& migration : kMigrations) {
    if (migration.version <= current || migration.version > target_version) continue;
    connection.exec(migration.sql);
    connection.exec("PRAGMA user_version = " + std::to_string(migration.version));
  }
  transaction.commit();
  return current;
}

}  // namespace detail

void create_database_at_version(const std::string& path, int version) {
  if (version < 1 || version > latest_schema_version()) {
    throw_bad_input("create_database_at_version", "version", std::to_string(version),
                    "1 to " + std::to_string(latest_schema_version()));
  }
  sqlite::Connection connection(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (connection.query_int("PRAGMA user_version") != 0 ||
      connection.query_int("SELECT count(*) FROM sqlite_schema") != 0) {
    throw IoError(path + ": expected a new or empty file to create a schema-version-" + std::to_string(version) +
                  " database in");
  }
  connection.exec("PRAGMA journal_mode = WAL");
  detail::migrate(connection, version);
}

}  // namespace dionsim::analysis
