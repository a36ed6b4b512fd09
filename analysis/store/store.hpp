#pragma once
// The results database: one SQLite file holding every run dionsim records (simulated or
// measured), its configuration and provenance, and its typed results. See docs/database.md.
//
//   auto db = Database::open("results/demo.db");              // creates or migrates; IoError if bad
//   const std::string hash = config_hash(config);
//   if (!force && db.has_run("whatif", hash)) continue;         // a sweep re-run resumes
//   auto record = RunRecord::begin("whatif", RunMode::simulated, config, seed);
//   record.metrics.push_back({.name = "step_wall_ms", .value = 812.5, .unit = "ms"});
//   db.store(record, force ? OnExisting::replace : OnExisting::keep);   // one transaction
//
// Guarantees: a run is stored whole or not at all (one IMMEDIATE transaction, WAL journal); several
// processes may write to one file at once (they queue on a busy timeout); a file that is not a
// dionsim database, is damaged (PRAGMA integrity_check), or comes from a newer schema is refused
// before anything is written and without creating files beside it (no -wal, no -shm); with
// OnExisting::skip the "already stored?" check runs inside the write transaction.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/store/store_provenance.hpp"  // git_revision, host_name, utc_now, config_hash
#include "analysis/store/store_schema.hpp"
#include "common/config_match.hpp"  // ConfigMatch: --where conditions
#include "common/error.hpp"  // IoError, InputError thrown here

namespace dionsim::analysis {

enum class RunMode { simulated, measured };
enum class RunStatus { ok, failed };
enum class OnExisting {
  keep,     // add this run beside any stored run of the same kind and config
  replace,  // delete stored runs of the same kind and config_hash (all their rows) first — --force
  skip,     // store nothing (return 0) when an ok run of the same kind and config_hash is stored;
            // checked inside the write transaction, so identical sweeps run at once store one run
};
enum class Access { read_write, read_only };

[[nodiscard]] std::string_view to_string(RunMode mode);
[[nodiscard]] std::string_view to_string(RunStatus status);
// "simulated" | "measured"; anything else throws InputError naming `where`.
[[nodiscard]] RunMode parse_run_mode(std::string_view text, std::string_view where = "mode");

// ---- typed result rows (units in the names; see docs/database.md for every column) ----------

// A scalar result: step_wall_ms, opt_wall_ms, a2a_payload_bytes, mfu_pct, deferred_fraction, …
struct MetricRow {
  std::string name;
  double value = 0;                                  // finite
  std::string unit;                                  // "ms", "bytes", "pct", "GBps", "" (dimensionless)
  std::optional<std::int64_t> rank = std::nullopt;   // absent: not per rank (e.g. the max over ranks)
  std::optional<std::int64_t> step = std::nullopt;   // absent: not per step (e.g. the median)
  nlohmann::json labels = nlohmann::json::object();  // any further key → value, e.g. {"scope": "local"}
  friend bool operator==(const MetricRow&, const MetricRow&) = default;
};

// One phase of the optimizer step on one rank (spec §1.7): a kernel or a collective.
struct PhaseRow {
  std::int64_t rank = 0;
  std::int64_t step = 0;
  std::optional<std::int64_t> megabatch;  // absent: not tied to a megabatch
  std::string phase;                      // "norm_allgather", "pack", "a2a_forward", "newton_schulz", …
  std::string kernel_class;               // "gemm", "norms", "select", "pack", "nccl_alltoall", …
  std::int64_t start_ns = 0;              // since the start of that step on that rank
  std::int64_t duration_ns = 0;           // ≥ 0
  std::int64_t bytes = 0;                 // bytes moved (collectives: sent by this rank)
  std::int64_t flops = 0;                 // floating-point operations (GEMMs), else 0
  friend bool operator==(const PhaseRow&, const PhaseRow&) = default;
};

// One nccl-tests style row (GB = 1e9; busbw = algbw × (n−1)/n for all-to-all and all-gather).
struct CollectiveRow {
  std::string op;          // "alltoall", "allgather", "reducescatter", …
  std::int64_t bytes = 0;  // nccl-tests "size": bytes of one rank's buffer
  std::int64_t world = 1;  // ranks taking part
  std::int64_t nodes = 1;
  double time_us = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  friend bool operator==(const CollectiveRow&, const CollectiveRow&) = default;
};

// global_capped deferral counters of one rank in one step of one trial (stats.json's per_rank).
struct DeferralRow {
  std::int64_t trial = 0;
  std::int64_t step = 0;
  std::int64_t rank = 0;
  std::int64_t winner_rows = 0;
  std::int64_t deferred_rows = 0;
  friend bool operator==(const DeferralRow&, const DeferralRow&) = default;
};

// Gradient row statistics of one shape group, one step and one rank's FSDP2 row shard (since v3):
// what `dionsim deferral --norms replay:DB` replays. Recorded by `dionsim step --db` (and by a
// measuring subcommand that records the same statistics of real gradients).
struct GradientRowStatsRow {
  std::int64_t step = 0;
  std::int64_t rows = 0;  // shape group: global rows R
  std::int64_t cols = 0;  // and columns C of each matrix
  std::int64_t world = 1;  // shards the rows were cut into: rank r holds rows [r*ceil(R/world), ...)
  std::int64_t rank = 0;
  std::int64_t row_count = 0;       // rows of this shard over all matrices of the group, >= 1
  double mean_l1 = 0;               // mean L1 norm of those gradient rows
  std::vector<double> quantiles;    // of (row L1 / mean_l1), at probabilities i/(n-1), i = 0..n-1, n >= 2
  friend bool operator==(const GradientRowStatsRow&, const GradientRowStatsRow&) = default;
};

// A measured kernel time by class and shape, for the simulator's kernel-time model.
// Shape key: GEMMs (m × k)·(k × n) batched `batch` times; row-wise kernels m = rows, n = cols, k = 0.
struct KernelTimingRow {
  std::string hardware;      // "H200", "H100", …
  std::string kernel_class;  // "gemm", "norms", "pack", …
  std::string dtype;         // "bf16", "fp32", …
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t batch = 1;
  double time_us = 0;  // per call (the median or mean of `samples` calls)
  std::int64_t samples = 1;
  friend bool operator==(const KernelTimingRow&, const KernelTimingRow&) = default;
};

// A named calibration: a JSON document with its own schema version.
struct CalibrationRow {
  std::string name;
  std::int64_t schema_version = 1;
  nlohmann::json body = nlohmann::json::object();
  std::string created_utc;  // filled with the store time when empty
  friend bool operator==(const CalibrationRow&, const CalibrationRow&) = default;
};

// Everything one run records. Build it with begin(), fill the vectors, hand it to Database::store.
struct RunRecord {
  std::string kind;  // the subcommand: whatif, deferral, measure, …
  RunMode mode = RunMode::simulated;
  nlohmann::json config = nlohmann::json::object();  // every input that affects the results
  std::uint64_t seed = 0;
  std::string git_revision;     // filled by begin() (and by store() when empty)
  std::string dionsim_version;  // idem
  std::string host;             // idem
  std::string started_utc;      // idem
  std::string finished_utc;     // filled by store() when empty
  RunStatus status = RunStatus::ok;
  std::string message;  // why a failed run failed; free text

  std::vector<MetricRow> metrics;
  std::vector<PhaseRow> phases;
  std::vector<CollectiveRow> collectives;
  std::vector<DeferralRow> deferral;
  std::vector<KernelTimingRow> kernel_timings;
  std::vector<CalibrationRow> calibrations;
  std::vector<GradientRowStatsRow> gradient_row_stats;

  // A record started now, on this host, from this build.
  [[nodiscard]] static RunRecord begin(std::string kind, RunMode mode, nlohmann::json config, std::uint64_t seed);
  friend bool operator==(const RunRecord&, const RunRecord&) = default;
};

// A stored run: its id and config hash beside the record. From find_runs() the row vectors are
// empty (header only); from load_run() they are complete.
struct StoredRun {
  std::int64_t id = 0;
  std::string config_hash;
  RunRecord record;
};

struct RunQuery {
  std::optional<std::string> kind;  // absent: any kind
  std::optional<RunMode> mode;      // absent: both modes
  std::vector<ConfigMatch> where;   // all must match
  bool include_failed = false;      // failed runs are normally invisible
};

// A metric together with the run it belongs to.
struct MetricResult {
  std::int64_t run_id = 0;
  std::string kind;
  RunMode mode = RunMode::simulated;
  nlohmann::json config;
  std::uint64_t seed = 0;
  MetricRow metric;
};

class Database {
 public:
  // Opens `path`, creating it (read_write only) when it does not exist or is empty, and applies
  // the missing migrations. Sets WAL, foreign keys and a busy timeout. Throws IoError (exit 4),
  // naming the file and what was expected, when the file is not SQLite, is damaged, is an SQLite
  // file of another application, or has a newer schema — in every case before writing anything.
  // read_only: the file must exist at the latest schema version; nothing is ever written.
  [[nodiscard]] static Database open(const std::string& path, Access access = Access::read_write);

  Database(Database&&) noexcept;
  Database& operator=(Database&&) noexcept;
  ~Database();

  [[nodiscard]] const std::string& path() const;
  [[nodiscard]] int schema_version() const;
  // The schema version the file had before open() migrated it (0 for a new file).
  [[nodiscard]] int opened_at_version() const;

  // Writes the run and all its rows in one transaction and returns its id. Validates the record
  // first (InputError, nothing written): kind [a-z][a-z0-9_-]*, config a JSON object, finite
  // values, non-negative sizes. Fills empty provenance fields (git revision, host, times).
  std::int64_t store(const RunRecord& record, OnExisting on_existing = OnExisting::keep);

  // True when a run of `kind` with this config hash is stored with status ok (failed runs are
  // retried). `config_hash` is config_hash(config).
  [[nodiscard]] bool has_run(std::string_view kind, std::string_view config_hash) const;
  // The git revision of the newest such run (nullopt when none): who priced what --db would skip.
  [[nodiscard]] std::optional<std::string> stored_revision(std::string_view kind, std::string_view config_hash) const;

  // Deletes a run and all its rows (one transaction). False when there was no such run.
  bool delete_run(std::int64_t id);

  // The whole run; IoError when there is no run with this id.
  [[nodiscard]] StoredRun load_run(std::int64_t id) const;

  // Run headers (no rows) matching the query, oldest first.
  [[nodiscard]] std::vector<StoredRun> find_runs(const RunQuery& query) const;

  // Metrics of the runs matching the query, by run then insertion order; `names` empty = all.
  // E.g. calibration's input: {.mode = RunMode::measured, .where = {ConfigMatch::parse("world=2")}}.
  [[nodiscard]] std::vector<MetricResult> metrics(const RunQuery& query, std::span<const std::string> names = {}) const;

  // Kernel timings of ok runs for this hardware and kernel class (dtype "" = any), sorted by
  // dtype, m, n, k, batch, then run id — ready for the kernel-time model to interpolate.
  [[nodiscard]] std::vector<KernelTimingRow> kernel_timings(std::string_view hardware, std::string_view kernel_class,
                                                            std::string_view dtype = "") const;

  // Gradient row statistics of a run, ordered as stored (run_id 0: of the newest ok run that has
  // any; empty when there is none).
  [[nodiscard]] std::vector<GradientRowStatsRow> gradient_row_stats(std::int64_t run_id = 0) const;
  // Id of the newest ok run with gradient row statistics, 0 when there is none.
  [[nodiscard]] std::int64_t newest_run_with_gradient_row_stats() const;

  // The most recently stored calibration of this name (from an ok run), if any.
  [[nodiscard]] std::optional<CalibrationRow> calibration(std::string_view name) const;
  // Names of all stored calibrations, sorted.
  [[nodiscard]] std::vector<std::string> calibration_names() const;

 private:
  struct Impl;
  explicit Database(std::unique_ptr<Impl> impl);
  static Database open_once(const std::string& path, Access access);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dionsim::analysis
