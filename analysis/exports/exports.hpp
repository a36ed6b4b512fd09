#pragma once
// A database's runs as tables a notebook reads directly: `dionsim export` (one row per run and
// metric, every configuration key a column) and `dionsim compare` (the same configurations of two
// selections side by side, differences and interval overlap). Reads through analysis/store only;
// the tables render as text, JSON and CSV through common/table. Formats: docs/database.md "Export".
#include <optional>
#include <string>
#include <vector>

#include "analysis/store/store.hpp"
#include "common/table.hpp"

namespace dionsim::analysis {

// Which runs: a kind (none = all), `--where key=value` conditions (dotted keys into the
// configuration; one key's values are alternatives, different keys must all match) and metric
// names (none = all). `db_label` names the database in messages.
struct RunSelection {
  std::optional<std::string> kind;
  std::vector<std::string> where;
  std::vector<std::string> metrics;
};

// The ok runs of `db` that `selection` selects (oldest first). UsageError (naming `flag`, the
// value and the keys the runs have) for a malformed condition or a key no run of the kind has;
// UsageError for a --kind no run has.
[[nodiscard]] std::vector<StoredRun> select_runs(const Database& db, const RunSelection& selection,
                                                 const std::string& flag = "--where");

// One row per run and metric: run_id, kind, mode, seed, every configuration key (dotted paths,
// sorted; a key that is also one of these column names is written config.<key>), metric, value,
// unit, rank, step and the metric's labels as label.<key>. Values are the stored doubles.
[[nodiscard]] Table export_table(const Database& db, const RunSelection& selection);

// One side of a comparison: a database and the runs selected in it.
struct CompareSide {
  const Database* db = nullptr;
  RunSelection selection;
};

struct Comparison {
  // kind, the shared configuration keys, metric, unit, a, b, diff (b − a), diff_pct (100·(b − a)/|a|,
  // null for a = 0), a_lo, a_hi, b_lo, b_hi (metrics <m>_lo/<m>_hi; empty when not stored), overlap
  // (whether [a_lo, a_hi] and [b_lo, b_hi] meet, a side without an interval counting as its point;
  // empty when neither side has one), run_a, run_b.
  Table table;
  std::vector<std::string> varying_keys;  // configuration keys whose value differs between matched rows
  int matched = 0, only_a = 0, only_b = 0;
  int superseded = 0;                     // older runs of a configuration stored again (the newest is used)
  std::vector<std::string> differing_keys;  // keys whose values never agree between A and B (why nothing matched)
  // Keys with one value on each side, different between them (fabric=A vs fabric=B and what it
  // implies): not used for pairing; (key, A's value, B's value) as written ("-" = absent).
  struct SideKey {
    std::string key, a, b;
  };
  std::vector<SideKey> side_keys;
};

// Matches A's and B's runs by kind and configuration without the keys in `ignore` (dotted paths;
// an object path ignores its leaves) and without the side keys (above), and compares every metric
// either side has.
[[nodiscard]] Comparison compare_runs(const CompareSide& a, const CompareSide& b, const std::vector<std::string>& ignore);

}  // namespace dionsim::analysis
