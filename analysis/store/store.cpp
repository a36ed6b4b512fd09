#include "analysis/store/store.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <system_error>
#include <thread>

#include "analysis/store/store_schema_internal.hpp"
#include "analysis/store/store_sqlite.hpp"
#include "common/error.hpp"
#include "common/json_input.hpp"

namespace dionsim::analysis {

namespace {

// Writers queue on each other for at most this long. A run's transaction takes milliseconds to
// seconds (it is written at the end of the run), so a minute covers any realistic pile-up.
constexpr int kBusyTimeoutMs = 60'000;

// ---------------------------------------------------------------------------------------------
// Inspecting a file before touching it.

enum class FileState { absent, empty, sqlite };

// What is at `path`, without opening it with SQLite. A file that exists and is not an SQLite 3
// database throws here, before SQLite could do anything to it.
FileState inspect_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || status.type() == fs::file_type::not_found) return FileState::absent;
  if (status.type() != fs::file_type::regular) {
    throw IoError(path + ": not a regular file, expected a dionsim results database (SQLite) or a new file name");
  }
  const auto size = fs::file_size(path, ec);
  if (ec) throw IoError(path + ": cannot read its size: " + ec.message());
  if (size == 0) return FileState::empty;
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) throw IoError(path + ": cannot open it for reading, expected a readable dionsim results database");
  std::array<char, 16> header{};
  in.read(header.data(), header.size());
  if (in.gcount() < static_cast<std::streamsize>(header.size())) {
    throw IoError(path + ": a file of " + std::to_string(size) +
                  " bytes is not an SQLite database, expected a dionsim results database or a new file name");
  }
  static constexpr std::string_view kMagic("SQLite format 3\0", 16);
  if (std::string_view(header.data(), header.size()) != kMagic) {
    std::string shown;
    for (const char c : header) shown.push_back(c >= 0x20 && c < 0x7f ? c : '.');
    throw IoError(describe_bad_value(path, "file header", shown,
                                     "'SQLite format 3' — a dionsim results database (or give a new file name)"));
  }
  return FileState::sqlite;
}

// What a read-only look at an SQLite file finds.
struct Identity {
  std::int64_t application_id = 0;
  std::int64_t version = 0;
  std::string tables;  // first few table names, comma-separated
  int table_count = 0;
  std::string check;  // PRAGMA integrity_check's first line: "ok" when intact
  std::vector<std::string> all_tables;
};

// file: URI of `path` with immutable=1: SQLite then takes no locks and creates no -wal or -shm
// beside the file, so looking at a file that is then refused leaves the folder as it was.
std::string immutable_uri(const std::string& path) {
  std::string uri = "file:";
  for (const char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      uri += buf;
    } else {
      uri += c;
    }
  }
  return uri + "?immutable=1";
}

// The tables each schema version has (store_schema.cpp's migrations); a file whose ids say
// dionsim but whose tables are missing is damaged and is refused before anything is written.
std::vector<std::string> tables_of_version(std::int64_t version) {
  std::vector<std::string> t{"runs", "metrics", "phases", "collectives", "deferral"};
  if (version >= 2) t.insert(t.end(), {"kernel_timings", "calibrations"});
  if (version >= 3) t.emplace_back("gradient_row_stats");
  return t;
}

// Reads the identity of an existing SQLite file through a read-only connection (nothing can be
// written through it). SQLite errors here mean the file is damaged: they are reported as such.
Identity read_identity(const std::string& path) {
  Identity id;
  const sqlite::Connection probe(immutable_uri(path), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
  sqlite3_busy_timeout(probe.handle(), kBusyTimeoutMs);
  try {
    id.application_id = probe.query_int("PRAGMA application_id");
    id.version = probe.query_int("PRAGMA user_version");
    sqlite::Statement list(probe, "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name LIMIT 6");
    while (list.step()) id.tables.append(id.table_count++ == 0 ? "" : ", ").append(list.column_text(0));
    sqlite::Statement all(probe, "SELECT name FROM sqlite_schema WHERE type = 'table'");
    while (all.step()) id.all_tables.emplace_back(all.column_text(0));
    // A damaged page or index anywhere fails here, before any write (quick_check passes files
    // whose indexes disagree with their tables). Cost: one pass over the file.
    id.check = probe.query_text("PRAGMA integrity_check(1)").value_or("no answer");
  } catch (const IoError&) {
    throw IoError(path + ": the file is damaged (SQLite: " + sqlite3_errmsg(probe.handle()) +
                  "), expected an intact dionsim results database");
  }
  return id;
}

// Refuses anything but a dionsim database this build can migrate or read. Returns the schema
// version, 0 for an SQLite file that is empty (no tables, no ids).
int check_identity(const std::string& path) {
  const Identity id = read_identity(path);
  if (id.application_id != kApplicationId) {
    if (id.application_id == 0 && id.version == 0 && id.table_count == 0) return 0;  // an empty SQLite file
    std::array<char, 16> id_text{};
    std::snprintf(id_text.data(), id_text.size(), "0x%08llx", static_cast<unsigned long long>(id.application_id));
    throw IoError(describe_bad_value(
        path, "SQLite application_id",
        std::string(id_text.data()) + (id.table_count > 0 ? ", tables: " + id.tables : ""),
        "0x44494f4e ('DION') — this SQLite file is not a dionsim results database; give another --db file"));
  }
  const int latest = latest_schema_version();
  if (id.version > latest) {
    throw IoError(
        describe_bad_value(path, "schema version (PRAGMA user_version)", std::to_string(id.version),
                           "at most " + std::to_string(latest) +
                               " — the file was written by a newer dionsim; use that version or another --db file"));
  }
  if (id.version < 1) {
    throw IoError(describe_bad_value(path, "schema version (PRAGMA user_version)", std::to_string(id.version),
                                     "1 to " + std::to_string(latest) + " — the dionsim database is damaged"));
  }
  for (const std::string& table : tables_of_version(id.version)) {
    if (std::find(id.all_tables.begin(), id.all_tables.end(), table) == id.all_tables.end()) {
      throw IoError(describe_bad_value(path, "table " + table, "missing",
                                       "the tables of schema version " + std::to_string(id.version) +
                                           " — the dionsim database is damaged; nothing was changed"));
    }
  }
  if (id.check != "ok") {
    throw IoError(path + ": the file is damaged (SQLite integrity check: " + id.check +
                  "), expected an intact dionsim results database");
  }
  return static_cast<int>(id.version);
}

// ---------------------------------------------------------------------------------------------
// Validating a record before the transaction starts.

void require(bool ok, const std::string& where, const std::string& field, const std::string& got,
             const std::string& expected) {
  if (!ok) throw_bad_input(where, field, got, expected);
}

std::string number_text(double value) {
  std::array<char, 32> text{};
  const auto result = std::to_chars(text.data(), text.data() + text.size(), value);
  return std::string(text.data(), result.ptr);
}

bool valid_kind(std::string_view kind) {
  if (kind.empty() || kind[0] < 'a' || kind[0] > 'z') return false;
  for (const char c : kind) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  }
  return true;
}

void validate(const RunRecord& record) {
  const std::string where = "run record '" + record.kind + "'";
  require(valid_kind(record.kind), where, "kind", record.kind, "a subcommand name matching [a-z][a-z0-9_-]*");
  require(record.config.is_object(), where, "config", canonical_json(record.config).substr(0, 60), "a JSON object");
  for (std::size_t i = 0; i < record.metrics.size(); ++i) {
    const MetricRow& m = record.metrics[i];
    const std::string field = "metrics[" + std::to_string(i) + "]";
    require(!m.name.empty(), where, field + ".name", "", "a metric name");
    require(std::isfinite(m.value), where, field + ".value (" + m.name + ")", number_text(m.value), "a finite number");
    require(m.labels.is_object(), where, field + ".labels", canonical_json(m.labels), "a JSON object");
  }
  for (std::size_t i = 0; i < record.phases.size(); ++i) {
    const PhaseRow& p = record.phases[i];
    const std::string field = "phases[" + std::to_string(i) + "]";
    require(!p.phase.empty(), where, field + ".phase", "", "a phase name");
    require(p.duration_ns >= 0, where, field + ".duration_ns", std::to_string(p.duration_ns), "≥ 0");
    require(p.bytes >= 0, where, field + ".bytes", std::to_string(p.bytes), "≥ 0");
    require(p.flops >= 0, where, field + ".flops", std::to_string(p.flops), "≥ 0");
  }
  for (std::size_t i = 0; i < record.collectives.size(); ++i) {
    const CollectiveRow& c = record.collectives[i];
    const std::string field = "collectives[" + std::to_string(i) + "]";
    require(!c.op.empty(), where, field + ".op", "", "a collective name");
    require(c.bytes >= 0, where, field + ".bytes", std::to_string(c.bytes), "≥ 0");
    require(c.world >= 1, where, field + ".world", std::to_string(c.world), "≥ 1");
    require(c.nodes >= 1, where, field + ".nodes", std::to_string(c.nodes), "≥ 1");
    require(std::isfinite(c.time_us) && c.time_us >= 0, where, field + ".time_us", number_text(c.time_us),
            "a finite number ≥ 0");
    require(std::isfinite(c.algbw_GBps), where, field + ".algbw_GBps", number_text(c.algbw_GBps), "a finite number");
    require(std::isfinite(c.busbw_GBps), where, field + ".busbw_GBps", number_text(c.busbw_GBps), "a finite number");
  }
  for (std::size_t i = 0; i < record.deferral.size(); ++i) {
    const DeferralRow& d = record.deferral[i];
    const std::string field = "deferral[" + std::to_string(i) + "]";
    require(d.winner_rows >= 0, where, field + ".winner_rows", std::to_string(d.winner_rows), "≥ 0");
    require(d.deferred_rows >= 0, where, field + ".deferred_rows", std::to_string(d.deferred_rows), "≥ 0");
  }
  for (std::size_t i = 0; i < record.gradient_row_stats.size(); ++i) {
    const GradientRowStatsRow& g = record.gradient_row_stats[i];
    const std::string field = "gradient_row_stats[" + std::to_string(i) + "]";
    require(g.step >= 0, where, field + ".step", std::to_string(g.step), "≥ 0");
    require(g.rows >= 1 && g.cols >= 1, where, field + ".rows/cols",
            std::to_string(g.rows) + "/" + std::to_string(g.cols), "both ≥ 1");
    require(g.world >= 1 && g.rank >= 0 && g.rank < g.world, where, field + ".rank/world",
            std::to_string(g.rank) + "/" + std::to_string(g.world), "0 ≤ rank < world");
    require(g.row_count >= 1, where, field + ".row_count", std::to_string(g.row_count), "≥ 1");
    require(std::isfinite(g.mean_l1) && g.mean_l1 >= 0, where, field + ".mean_l1", number_text(g.mean_l1),
            "a finite number ≥ 0");
    require(g.quantiles.size() >= 2, where, field + ".quantiles", std::to_string(g.quantiles.size()) + " values",
            "at least 2 values");
    for (const double q : g.quantiles) {
      require(std::isfinite(q) && q >= 0, where, field + ".quantiles", number_text(q), "finite numbers ≥ 0");
    }
  }
  for (std::size_t i = 0; i < record.kernel_timings.size(); ++i) {
    const KernelTimingRow& k = record.kernel_timings[i];
    const std::string field = "kernel_timings[" + std::to_string(i) + "]";
    require(!k.hardware.empty(), where, field + ".hardware", "", "a hardware name such as 'H200'");
    require(!k.kernel_class.empty(), where, field + ".kernel_class", "", "a kernel class");
    require(k.m >= 0 && k.n >= 0 && k.k >= 0, where, field + ".m/n/k",
            std::to_string(k.m) + "/" + std::to_string(k.n) + "/" + std::to_string(k.k), "all ≥ 0");
    require(k.batch >= 1, where, field + ".batch", std::to_string(k.batch), "≥ 1");
    require(std::isfinite(k.time_us) && k.time_us >= 0, where, field + ".time_us", number_text(k.time_us),
            "a finite number ≥ 0");
    require(k.samples >= 1, where, field + ".samples", std::to_string(k.samples), "≥ 1");
  }
  for (std::size_t i = 0; i < record.calibrations.size(); ++i) {
    const CalibrationRow& c = record.calibrations[i];
    const std::string field = "calibrations[" + std::to_string(i) + "]";
    require(!c.name.empty(), where, field + ".name", "", "a calibration name");
    require(c.schema_version >= 1, where, field + ".schema_version", std::to_string(c.schema_version), "≥ 1");
    require(c.body.is_object(), where, field + ".body", canonical_json(c.body).substr(0, 60), "a JSON object");
  }
}

RunStatus parse_status(const std::string& text) { return text == "ok" ? RunStatus::ok : RunStatus::failed; }

nlohmann::json parse_stored_json(const sqlite::Connection& connection, const std::string& text,
                                 std::string_view column) {
  try {
    return parse_json_input(text, connection.path() + ": " + std::string(column), /*allow_large=*/true);
  } catch (const InputError& e) {
    throw IoError(std::string(e.what()) + " (stored JSON)");
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::string_view to_string(RunMode mode) { return mode == RunMode::simulated ? "simulated" : "measured"; }

std::string_view to_string(RunStatus status) { return status == RunStatus::ok ? "ok" : "failed"; }

RunMode parse_run_mode(std::string_view text, std::string_view where) {
  if (text == "simulated") return RunMode::simulated;
  if (text == "measured") return RunMode::measured;
  throw_bad_input(where, "mode", text, "'simulated' or 'measured'");
}

RunRecord RunRecord::begin(std::string kind, RunMode mode, nlohmann::json config, std::uint64_t seed) {
  RunRecord record;
  record.kind = std::move(kind);
  record.mode = mode;
  record.config = std::move(config);
  record.seed = seed;
  record.git_revision = analysis::git_revision();
  record.dionsim_version = analysis::dionsim_version();
  record.host = host_name();
  record.started_utc = utc_now();
  return record;
}

// ---------------------------------------------------------------------------------------------

struct Database::Impl {
  sqlite::Connection connection;
  int opened_at_version = 0;
  Access access = Access::read_write;
};

Database::Database(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Database::Database(Database&&) noexcept = default;
Database& Database::operator=(Database&&) noexcept = default;
Database::~Database() = default;

Database Database::open(const std::string& path, Access access) {
  // Opening is idempotent (the migration re-reads the version under the write lock), so an
  // immediate SQLITE_BUSY — which SQLite returns without waiting in a few cases, e.g. while another
  // process switches a new file to WAL — is retried until the busy timeout has passed.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  while (true) {
    try {
      return open_once(path, access);
    } catch (const sqlite::BusyError&) {
      if (std::chrono::steady_clock::now() >= deadline) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

Database Database::open_once(const std::string& path, Access access) {
  const FileState state = inspect_file(path);
  if (access == Access::read_only && state != FileState::sqlite) {
    throw IoError(path + ": " + (state == FileState::absent ? "does not exist" : "is empty") +
                  ", expected an existing dionsim results database");
  }
  const int version = state == FileState::sqlite ? check_identity(path) : 0;
  if (access == Access::read_only) {
    if (version != latest_schema_version()) {
      throw IoError(describe_bad_value(path, "schema version", std::to_string(version),
                                       std::to_string(latest_schema_version()) +
                                           " to read it; open it once with a writing dionsim command to migrate it"));
    }
    auto impl = std::make_unique<Impl>(Impl{sqlite::Connection(path, SQLITE_OPEN_READONLY), version, access});
    sqlite3_busy_timeout(impl->connection.handle(), kBusyTimeoutMs);
    return Database(std::move(impl));
  }

  auto impl = std::make_unique<Impl>(
      Impl{sqlite::Connection(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE), version, access});
  const sqlite::Connection& connection = impl->connection;
  sqlite3_busy_timeout(connection.handle(), kBusyTimeoutMs);
  // WAL: readers never block the writer and a killed writer leaves only uncommitted frames,
  // which the next opener discards. Persistent in the file once set.
  const auto journal = connection.query_text("PRAGMA journal_mode = WAL");
  if (!journal || *journal != "wal") {
    throw IoError(path + ": cannot switch to WAL journaling (got '" + journal.value_or("") +
                  "'), expected a file on a local file system that supports shared memory");
  }
  connection.exec("PRAGMA foreign_keys = ON");
  impl->opened_at_version = detail::migrate(connection, latest_schema_version());
  return Database(std::move(impl));
}

const std::string& Database::path() const { return impl_->connection.path(); }

int Database::schema_version() const { return static_cast<int>(impl_->connection.query_int("PRAGMA user_version")); }

int Database::opened_at_version() const { return impl_->opened_at_version; }

std::int64_t Database::store(const RunRecord& record, OnExisting on_existing) {
  if (impl_->access == Access::read_only) throw IoError(path() + ": opened read-only, cannot store a run");
  validate(record);
  // Provenance the caller left empty is filled here (without copying the record's rows).
  const std::string now = utc_now();
  const auto or_default = [](const std::string& given, const std::string& fallback) {
    return given.empty() ? fallback : given;
  };
  const std::string revision = or_default(record.git_revision, git_revision());
  const std::string version = or_default(record.dionsim_version, dionsim_version());
  const std::string host = or_default(record.host, host_name());
  const std::string started = or_default(record.started_utc, now);
  const std::string finished = or_default(record.finished_utc, now);
  const std::string config_text = canonical_json(record.config);
  const std::string hash = sha256_hex(config_text);

  const sqlite::Connection& db = impl_->connection;
  sqlite::Transaction transaction(db);
  if (on_existing == OnExisting::skip) {
    // Under the write lock (BEGIN IMMEDIATE): a concurrent identical sweep either committed its
    // run before this check or waits for this transaction; never both store.
    sqlite::Statement stored(db,
                             "SELECT EXISTS (SELECT 1 FROM runs WHERE kind = ?1 AND config_hash = ?2 AND status = 'ok')");
    stored.bind(1, std::string_view(record.kind)).bind(2, std::string_view(hash));
    if (stored.step() && stored.column_int(0) != 0) return 0;  // the transaction rolls back: nothing written
  }
  if (on_existing == OnExisting::replace) {
    // ON DELETE CASCADE removes the replaced runs' rows in the same transaction.
    sqlite::Statement erase(db, "DELETE FROM runs WHERE kind = ?1 AND config_hash = ?2");
    erase.bind(1, std::string_view(record.kind)).bind(2, std::string_view(hash)).run();
  }
  sqlite::Statement insert_run(db,
                               "INSERT INTO runs (kind, mode, config_json, config_hash, seed, git_revision, "
                               "dionsim_version, host, started_utc, finished_utc, status, message) "
                               "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
  insert_run.bind(1, std::string_view(record.kind))
      .bind(2, to_string(record.mode))
      .bind(3, std::string_view(config_text))
      .bind(4, std::string_view(hash))
      .bind(5, static_cast<std::int64_t>(record.seed))  // two's complement: seeds ≥ 2^63 read back exactly
      .bind(6, std::string_view(revision))
      .bind(7, std::string_view(version))
      .bind(8, std::string_view(host))
      .bind(9, std::string_view(started))
      .bind(10, std::string_view(finished))
      .bind(11, to_string(record.status))
      .bind(12, std::string_view(record.message))
      .run();
  const std::int64_t run_id = sqlite3_last_insert_rowid(db.handle());

  if (!record.metrics.empty()) {
    sqlite::Statement insert(db,
                             "INSERT INTO metrics (run_id, name, value, unit, rank, step, labels_json) "
                             "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    for (const MetricRow& m : record.metrics) {
      insert.bind(1, run_id)
          .bind(2, std::string_view(m.name))
          .bind(3, m.value)
          .bind(4, std::string_view(m.unit))
          .bind(5, m.rank)
          .bind(6, m.step)
          .bind(7, std::string_view(canonical_json(m.labels)))
          .run();
    }
  }
  if (!record.phases.empty()) {
    sqlite::Statement insert(db,
                             "INSERT INTO phases (run_id, rank, step, megabatch, phase, kernel_class, start_ns, "
                             "duration_ns, bytes, flops) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
    for (const PhaseRow& p : record.phases) {
      insert.bind(1, run_id)
          .bind(2, p.rank)
          .bind(3, p.step)
          .bind(4, p.megabatch)
          .bind(5, std::string_view(p.phase))
          .bind(6, std::string_view(p.kernel_class))
          .bind(7, p.start_ns)
          .bind(8, p.duration_ns)
          .bind(9, p.bytes)
          .bind(10, p.flops)
          .run();
    }
  }
  if (!record.collectives.empty()) {
    sqlite::Statement insert(db,
                             "INSERT INTO collectives (run_id, op, bytes, world, nodes, time_us, algbw_GBps, "
                             "busbw_GBps) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    for (const CollectiveRow& c : record.collectives) {
      insert.bind(1, run_id)
          .bind(2, std::string_view(c.op))
          .bind(3, c.bytes)
          .bind(4, c.world)
          .bind(5, c.nodes)
          .bind(6, c.time_us)
          .bind(7, c.algbw_GBps)
          .bind(8, c.busbw_GBps)
          .run();
    }
  }
  if (!record.deferral.empty()) {
    sqlite::Statement insert(db,
                             "INSERT INTO deferral (run_id, trial, step, rank, winner_rows, deferred_rows) "
                             "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    for (const DeferralRow& d : record.deferral) {
      insert.bind(1, run_id)
          .bind(2, d.trial)
          .bind(3, d.step)
          .bind(4, d.rank)
          .bind(5, d.winner_rows)
          .bind(6, d.deferred_rows)
          .run();
    }
  }
  if (!record.gradient_row_stats.empty()) {
    sqlite::Statement insert(db,
                             "INSERT INTO gradient_row_stats (run_id, step, rows, cols, world, rank, row_count, "
                             "mean_l1, quantiles_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
    for (const GradientRowStatsRow& g : record.gradient_row_stats) {
      insert.bind(1, run_id)
          .bind(2, g.step)
          .bind(3, g.rows)
          .bind(4, g.cols)
          .bind(5, g.world)
          .bind(6, g.rank)
          .bind(7, g.row_count)
          .bind(8, g.mean_l1)
          .bind(9, std::string_view(nlohmann::json(g.quantiles).dump()))
          .run();
    }
  }
  if (!record.kernel_timings.empty()) {
    sqlite::Statement insert(db,
                             "INSERT INTO kernel_timings (run_id, hardware, kernel_class, dtype, m, n, k, batch, "
                             "time_us, samples) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
    for (const KernelTimingRow& k : record.kernel_timings) {
      insert.bind(1, run_id)
          .bind(2, std::string_view(k.hardware))
          .bind(3, std::string_view(k.kernel_class))
          .bind(4, std::string_view(k.dtype))
          .bind(5, k.m)
          .bind(6, k.n)
          .bind(7, k.k)
          .bind(8, k.batch)
          .bind(9, k.time_us)
          .bind(10, k.samples)
          .run();
    }
  }
  if (!record.calibrations.empty()) {
    sqlite::Statement insert(db,
                             "INSERT INTO calibrations (run_id, name, schema_version, body_json, created_utc) "
                             "VALUES (?1, ?2, ?3, ?4, ?5)");
    for (const CalibrationRow& c : record.calibrations) {
      insert.bind(1, run_id)
          .bind(2, std::string_view(c.name))
          .bind(3, c.schema_version)
          .bind(4, std::string_view(canonical_json(c.body)))
          .bind(5, std::string_view(c.created_utc.empty() ? finished : c.created_utc))
          .run();
    }
  }
  transaction.commit();
  return run_id;
}

bool Database::has_run(std::string_view kind, std::string_view config_hash) const {
  sqlite::Statement query(impl_->connection,
                          "SELECT EXISTS (SELECT 1 FROM runs WHERE kind = ?1 AND config_hash = ?2 AND status = 'ok')");
  query.bind(1, kind).bind(2, config_hash);
  return query.step() && query.column_int(0) != 0;
}

std::optional<std::string> Database::stored_revision(std::string_view kind, std::string_view config_hash) const {
  sqlite::Statement query(impl_->connection,
                          "SELECT git_revision FROM runs WHERE kind = ?1 AND config_hash = ?2 AND status = 'ok' "
                          "ORDER BY id DESC LIMIT 1");
  query.bind(1, kind).bind(2, config_hash);
  if (!query.step()) return std::nullopt;
  return query.column_text(0);
}

bool Database::delete_run(std::int64_t id) {
  if (impl_->access == Access::read_only) throw IoError(path() + ": opened read-only, cannot delete a run");
  const sqlite::Connection& db = impl_->connection;
  sqlite::Transaction transaction(db);
  sqlite::Statement erase(db, "DELETE FROM runs WHERE id = ?1");
  erase.bind(1, id).run();
  const bool deleted = sqlite3_changes(db.handle()) > 0;
  transaction.commit();
  return deleted;
}

namespace {

constexpr std::string_view kRunColumns =
    "SELECT id, kind, mode, config_json, config_hash, seed, git_revision, dionsim_version, host, started_utc, "
    "finished_utc, status, message FROM runs";

StoredRun read_run_header(const sqlite::Connection& db, const sqlite::Statement& row) {
  StoredRun run;
  run.id = row.column_int(0);
  run.record.kind = row.column_text(1);
  run.record.mode = parse_run_mode(row.column_text(2), db.path() + ": runs.mode");
  run.record.config = parse_stored_json(db, row.column_text(3), "runs.config_json");
  run.config_hash = row.column_text(4);
  run.record.seed = static_cast<std::uint64_t>(row.column_int(5));
  run.record.git_revision = row.column_text(6);
  run.record.dionsim_version = row.column_text(7);
  run.record.host = row.column_text(8);
  run.record.started_utc = row.column_text(9);
  run.record.finished_utc = row.column_text(10);
  run.record.status = parse_status(row.column_text(11));
  run.record.message = row.column_text(12);
  return run;
}

MetricRow read_metric(const sqlite::Connection& db, const sqlite::Statement& row, int first) {
  MetricRow m;
  m.name = row.column_text(first);
  m.value = row.column_double(first + 1);
  // dionsim stores finite values only (validate_record); an infinity written by another tool would
  // reach plots and fits as a number (scripts/fuzz_cli.py: a log axis of inf, a fit on inf).
  if (!std::isfinite(m.value)) {
    throw IoError(describe_bad_value(db.path() + ": metrics." + m.name, "value", number_text(m.value),
                                     "a finite number, as dionsim stores (the database was changed by another tool)"));
  }
  m.unit = row.column_text(first + 2);
  m.rank = row.column_optional_int(first + 3);
  m.step = row.column_optional_int(first + 4);
  m.labels = parse_stored_json(db, row.column_text(first + 5), "metrics.labels_json");
  return m;
}

std::vector<GradientRowStatsRow> read_gradient_row_stats(const sqlite::Connection& db, std::int64_t run_id) {
  sqlite::Statement select(db,
                           "SELECT step, rows, cols, world, rank, row_count, mean_l1, quantiles_json "
                           "FROM gradient_row_stats WHERE run_id = ?1 ORDER BY rowid");
  select.bind(1, run_id);
  std::vector<GradientRowStatsRow> rows;
  while (select.step()) {
    const nlohmann::json q = parse_stored_json(db, select.column_text(7), "gradient_row_stats.quantiles_json");
    if (!q.is_array()) throw IoError(db.path() + ": gradient_row_stats.quantiles_json: stored JSON is not an array");
    rows.push_back({select.column_int(0), select.column_int(1), select.column_int(2), select.column_int(3),
                    select.column_int(4), select.column_int(5), select.column_double(6),
                    q.get<std::vector<double>>()});
  }
  return rows;
}

}  // namespace

StoredRun Database::load_run(std::int64_t id) const {
  const sqlite::Connection& db = impl_->connection;
  // One read transaction: the run and its rows come from one snapshot.
  db.exec("BEGIN");
  struct EndRead {
    const sqlite::Connection& db;
    ~EndRead() { sqlite3_exec(db.handle(), "COMMIT", nullptr, nullptr, nullptr); }
  } end_read{db};

  sqlite::Statement header(db, std::string(kRunColumns) + " WHERE id = ?1");
  header.bind(1, id);
  if (!header.step()) throw IoError(path() + ": no run with id " + std::to_string(id));
  StoredRun run = read_run_header(db, header);
  RunRecord& r = run.record;

  sqlite::Statement metrics(
      db, "SELECT name, value, unit, rank, step, labels_json FROM metrics WHERE run_id = ?1 ORDER BY rowid");
  metrics.bind(1, id);
  while (metrics.step()) r.metrics.push_back(read_metric(db, metrics, 0));

  sqlite::Statement phases(db,
                           "SELECT rank, step, megabatch, phase, kernel_class, start_ns, duration_ns, bytes, flops "
                           "FROM phases WHERE run_id = ?1 ORDER BY rowid");
  phases.bind(1, id);
  while (phases.step()) {
    r.phases.push_back(PhaseRow{phases.column_int(0), phases.column_int(1), phases.column_optional_int(2),
                                phases.column_text(3), phases.column_text(4), phases.column_int(5),
                                phases.column_int(6), phases.column_int(7), phases.column_int(8)});
  }

  sqlite::Statement collectives(db,
                                "SELECT op, bytes, world, nodes, time_us, algbw_GBps, busbw_GBps FROM collectives "
                                "WHERE run_id = ?1 ORDER BY rowid");
  collectives.bind(1, id);
  while (collectives.step()) {
    r.collectives.push_back(CollectiveRow{
        collectives.column_text(0), collectives.column_int(1), collectives.column_int(2), collectives.column_int(3),
        collectives.column_double(4), collectives.column_double(5), collectives.column_double(6)});
  }

  sqlite::Statement deferral(db,
                             "SELECT trial, step, rank, winner_rows, deferred_rows FROM deferral WHERE run_id = ?1 "
                             "ORDER BY rowid");
  deferral.bind(1, id);
  while (deferral.step()) {
    r.deferral.push_back(DeferralRow{deferral.column_int(0), deferral.column_int(1), deferral.column_int(2),
                                     deferral.column_int(3), deferral.column_int(4)});
  }

  r.gradient_row_stats = read_gradient_row_stats(db, id);

  sqlite::Statement kernels(
      db,
      "SELECT hardware, kernel_class, dtype, m, n, k, batch, time_us, samples FROM kernel_timings "
      "WHERE run_id = ?1 ORDER BY rowid");
  kernels.bind(1, id);
  while (kernels.step()) {
    r.kernel_timings.push_back(KernelTimingRow{kernels.column_text(0), kernels.column_text(1), kernels.column_text(2),
                                               kernels.column_int(3), kernels.column_int(4), kernels.column_int(5),
                                               kernels.column_int(6), kernels.column_double(7), kernels.column_int(8)});
  }

  sqlite::Statement calibrations(db,
                                 "SELECT name, schema_version, body_json, created_utc FROM calibrations "
                                 "WHERE run_id = ?1 ORDER BY id");
  calibrations.bind(1, id);
  while (calibrations.step()) {
    r.calibrations.push_back(CalibrationRow{
        calibrations.column_text(0), calibrations.column_int(1),
        parse_stored_json(db, calibrations.column_text(2), "calibrations.body_json"), calibrations.column_text(3)});
  }
  return run;
}

std::vector<StoredRun> Database::find_runs(const RunQuery& query) const {
  const sqlite::Connection& db = impl_->connection;
  sqlite::Statement select(db, std::string(kRunColumns) +
                                   " WHERE (?1 IS NULL OR kind = ?1) AND (?2 IS NULL OR mode = ?2) "
                                   "AND (?3 OR status = 'ok') ORDER BY id");
  select.bind(1, query.kind);
  if (query.mode) {
    select.bind(2, to_string(*query.mode));
  } else {
    select.bind(2, std::nullopt);
  }
  select.bind(3, static_cast<std::int64_t>(query.include_failed ? 1 : 0));
  std::vector<StoredRun> runs;
  while (select.step()) {
    StoredRun run = read_run_header(db, select);
    bool keep = true;
    for (const ConfigMatch& condition : query.where) keep = keep && condition.matches(run.record.config);
    if (keep) runs.push_back(std::move(run));
  }
  return runs;
}

std::vector<MetricResult> Database::metrics(const RunQuery& query, std::span<const std::string> names) const {
  const sqlite::Connection& db = impl_->connection;
  db.exec("BEGIN");  // runs and their metrics from one snapshot
  struct EndRead {
    const sqlite::Connection& db;
    ~EndRead() { sqlite3_exec(db.handle(), "COMMIT", nullptr, nullptr, nullptr); }
  } end_read{db};
  const std::vector<StoredRun> runs = find_runs(query);
  std::vector<MetricResult> results;
  sqlite::Statement select(db,
                           "SELECT name, value, unit, rank, step, labels_json FROM metrics WHERE run_id = ?1 "
                           "ORDER BY rowid");
  for (const StoredRun& run : runs) {
    select.bind(1, run.id);
    while (select.step()) {
      MetricRow metric = read_metric(db, select, 0);
      if (!names.empty() && std::find(names.begin(), names.end(), metric.name) == names.end()) continue;
      results.push_back(MetricResult{run.id, run.record.kind, run.record.mode, run.record.config, run.record.seed,
                                     std::move(metric)});
    }
    select.reset();
  }
  return results;
}

std::vector<KernelTimingRow> Database::kernel_timings(std::string_view hardware, std::string_view kernel_class,
                                                      std::string_view dtype) const {
  sqlite::Statement select(impl_->connection,
                           "SELECT k.hardware, k.kernel_class, k.dtype, k.m, k.n, k.k, k.batch, k.time_us, k.samples "
                           "FROM kernel_timings k JOIN runs r ON r.id = k.run_id "
                           "WHERE k.hardware = ?1 AND k.kernel_class = ?2 AND (?3 = '' OR k.dtype = ?3) "
                           "AND r.status = 'ok' ORDER BY k.dtype, k.m, k.n, k.k, k.batch, k.run_id, k.rowid");
  select.bind(1, hardware).bind(2, kernel_class).bind(3, dtype);
  std::vector<KernelTimingRow> rows;
  while (select.step()) {
    rows.push_back(KernelTimingRow{select.column_text(0), select.column_text(1), select.column_text(2),
                                   select.column_int(3), select.column_int(4), select.column_int(5),
                                   select.column_int(6), select.column_double(7), select.column_int(8)});
  }
  return rows;
}

std::optional<CalibrationRow> Database::calibration(std::string_view name) const {
  const sqlite::Connection& db = impl_->connection;
  sqlite::Statement select(db,
                           "SELECT c.name, c.schema_version, c.body_json, c.created_utc FROM calibrations c "
                           "JOIN runs r ON r.id = c.run_id WHERE c.name = ?1 AND r.status = 'ok' "
                           "ORDER BY c.id DESC LIMIT 1");
  select.bind(1, name);
  if (!select.step()) return std::nullopt;
  return CalibrationRow{select.column_text(0), select.column_int(1),
                        parse_stored_json(db, select.column_text(2), "calibrations.body_json"), select.column_text(3)};
}

std::int64_t Database::newest_run_with_gradient_row_stats() const {
  sqlite::Statement select(impl_->connection,
                           "SELECT max(r.id) FROM runs r WHERE r.status = 'ok' AND "
                           "EXISTS (SELECT 1 FROM gradient_row_stats g WHERE g.run_id = r.id)");
  if (!select.step()) return 0;
  return select.column_optional_int(0).value_or(0);
}

std::vector<GradientRowStatsRow> Database::gradient_row_stats(std::int64_t run_id) const {
  if (run_id == 0) run_id = newest_run_with_gradient_row_stats();
  if (run_id == 0) return {};
  return read_gradient_row_stats(impl_->connection, run_id);
}

std::vector<std::string> Database::calibration_names() const {
  sqlite::Statement select(impl_->connection,
                           "SELECT DISTINCT c.name FROM calibrations c JOIN runs r ON r.id = c.run_id "
                           "WHERE r.status = 'ok' ORDER BY c.name");
  std::vector<std::string> names;
  while (select.step()) names.push_back(select.column_text(0));
  return names;
}

}  // namespace dionsim::analysis
