// dionsim compare: the same configurations of two databases (or of two --where selections of one)
// side by side, every metric with its difference and, where intervals are stored (<m>_lo, <m>_hi),
// whether they overlap. Logic: analysis/exports.
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "analysis/exports/exports.hpp"
#include "analysis/store/store.hpp"
#include "common/error.hpp"
#include "common/table.hpp"
#include "experiments/cli.hpp"

namespace dionsim::cli {

namespace {

std::string list(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

int run_compare(std::span<const std::string> args) {
  Command cmd("compare", "A.db B.db [--where KEY=VALUE …] | --db DB --where KEY=VALUE --vs KEY=VALUE  [--kind K] "
                         "[--metric NAME …] [--ignore KEY …] [--json | --csv]",
              "Pairs the runs of A and B that have the same kind and configuration (the newest run of each) and\n"
              "prints every metric side by side: a, b, diff = b - a, diff_pct = 100 (b - a) / |a| and, where the\n"
              "metrics <m>_lo and <m>_hi are stored, whether the intervals overlap. With --db, A is the runs\n"
              "--where selects and B those --vs selects. A key with one value on each side and a different one on\n"
              "each (fabric=A vs fabric=B, and what the fabric implies) is what the sides are, not used for pairing.");
  std::vector<std::string> dbs, where, vs, ignore;
  std::string kind;
  std::vector<std::string> metrics;
  cmd.options().add_options()
      ("databases", po::value(&dbs), "A.db B.db (positional)")
      ("where", po::value(&where)->value_name("KEY=VALUE"), "select runs (both sides; with --db: side A); repeatable")
      ("vs", po::value(&vs)->value_name("KEY=VALUE"), "with --db: select side B; repeatable")
      ("kind", po::value(&kind)->value_name("K"), "only runs of this kind")
      ("metric", po::value(&metrics)->value_name("NAME"), "only these metrics (repeatable)")
      ("ignore", po::value(&ignore)->value_name("KEY"), "pair configurations without this key (repeatable), e.g. calibration");
  cmd.positional("databases", -1);
  cmd.offer_csv();
  if (!cmd.parse(args)) return 0;
  const auto& common = cmd.common();
  const bool one_db = !common.db.empty();
  if (one_db ? !dbs.empty() : dbs.size() != 2)
    throw UsageError("compare: give two databases (compare A.db B.db) or one with two selections (compare --db DB --where "
                     "KEY=VALUE --vs KEY=VALUE)");
  if (one_db && (where.empty() || vs.empty())) throw UsageError("compare --db: give both --where (side A) and --vs (side B)");
  if (!one_db && !vs.empty()) throw_bad_usage("--vs", vs.front(), "--db DB with --where (two selections of one database)");
  const auto db_a = analysis::Database::open(one_db ? common.db : dbs[0], analysis::Access::read_only);
  std::optional<analysis::Database> db_b;
  if (!one_db) db_b = analysis::Database::open(dbs[1], analysis::Access::read_only);
  analysis::CompareSide a{&db_a, {kind.empty() ? std::nullopt : std::optional(kind), where, metrics}};
  analysis::CompareSide b{db_b ? &*db_b : &db_a, {a.selection.kind, one_db ? vs : where, metrics}};
  for (const auto& v : vs)
    if (v.find('=') == std::string::npos || v.front() == '=') throw_bad_usage("--vs", v, "key=value, e.g. fabric=p5-efa");
  const auto result = analysis::compare_runs(a, b, ignore);
  const std::string label_a = one_db ? "where " + list(where) : dbs[0];
  const std::string label_b = one_db ? "where " + list(vs) : dbs[1];
  log(common, "compare: " + std::to_string(result.matched) + " configurations in both; " + std::to_string(result.only_a) +
                  " only in A (" + label_a + "), " + std::to_string(result.only_b) + " only in B (" + label_b + ")" +
                  (result.superseded ? "; " + std::to_string(result.superseded) + " older runs of a configuration ignored" : ""));
  std::string sides;
  for (const auto& k : result.side_keys) sides += (sides.empty() ? "" : ", ") + k.key + " " + k.a + " vs " + k.b;
  if (!sides.empty()) log(common, "compare: the sides differ in (not used for pairing): " + sides);
  if (result.matched == 0 && !result.differing_keys.empty()) {
    log(common, "compare: no configuration matched; keys whose values never agree between A and B: " +
                    list(result.differing_keys) + " (--ignore KEY pairs without a key)");
  }
  if (common.machine()) {
    print_result(common, result.table.to_json(), std::span<const Table>(&result.table, 1));
    return 0;
  }
  // The text table: the configuration keys that vary, the metric and the comparison.
  std::vector<std::string> columns;
  std::set<std::string> kinds;
  for (const auto& row : result.table.rows) kinds.insert(row[0].get<std::string>());
  if (kinds.size() > 1) columns.push_back("kind");
  columns.insert(columns.end(), result.varying_keys.begin(), result.varying_keys.end());
  for (const char* c : {"metric", "unit", "a", "b", "diff", "diff_pct"}) columns.emplace_back(c);
  for (const char* c : {"rank", "step", "overlap"}) {
    const std::size_t i = result.table.column(c);
    for (const auto& row : result.table.rows) {
      if (!row[i].is_null()) {
        columns.emplace_back(c);
        break;
      }
    }
  }
  std::cout << "# A = " << label_a << ", B = " << label_b << (sides.empty() ? "" : "; " + sides)
            << "; diff = b - a, diff_pct = 100 (b - a) / |a|\n"
            << to_text(result.table, columns);
  return 0;
}

}  // namespace dionsim::cli
