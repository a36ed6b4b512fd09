// dionsim export: a database's runs as one table, one row per run and metric with every
// configuration key a column, as CSV or JSON (docs/database.md "Export"). Logic: analysis/exports.
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "analysis/exports/exports.hpp"
#include "analysis/store/store.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/table.hpp"
#include "experiments/cli.hpp"

namespace dionsim::cli {

int run_export(std::span<const std::string> args) {
  Command cmd("export", "--db FILE [--format csv|json] [--kind K] [--where KEY=VALUE …] [--metric NAME …] [--out FILE]",
              "Writes the runs of a results database as one table: one row per run and metric, with the run's id,\n"
              "kind, mode and seed, every configuration key (dotted paths, e.g. fabric.nic_GBps), the metric's\n"
              "name, value (the stored double, printed so that it reads back exactly), unit, rank, step and labels.\n"
              "pandas: pd.read_csv(FILE). Nothing is written to the database.");
  std::string format = "csv", out;
  std::string kind;
  analysis::RunSelection selection;
  cmd.options().add_options()
      ("format", po::value(&format)->default_value(format), "csv | json (an array of flat objects, the same columns)")
      ("kind", po::value(&kind)->value_name("K"), "only runs of this kind (whatif, deferral, collective, measure, …)")
      ("where", po::value(&selection.where)->value_name("KEY=VALUE"),
       "select runs by a configuration key (repeatable; one key's values are alternatives, different keys must all match)")
      ("metric", po::value(&selection.metrics)->value_name("NAME"), "only these metrics (repeatable)")
      ("out", po::value(&out)->value_name("FILE"), "write to this file (atomically) instead of stdout");
  if (!cmd.parse(args)) return 0;
  const auto& common = cmd.common();
  if (common.db.empty()) throw_bad_usage("--db", "", "the results database to export");
  if (common.json && cmd.has("format") && format != "json") throw UsageError("export: --json and --format " + format + " disagree");
  if (common.json) format = "json";  // --json as shorthand
  if (format != "csv" && format != "json") throw_bad_usage("--format", format, "csv or json");
  if (!kind.empty()) selection.kind = kind;
  if (!out.empty()) require_output_file(out, "--out", {common.db});
  const auto db = analysis::Database::open(common.db, analysis::Access::read_only);
  const Table table = analysis::export_table(db, selection);
  const std::string text = format == "csv" ? to_csv(std::span<const Table>(&table, 1)) : table.to_json().dump(2) + "\n";
  if (out.empty()) {
    std::cout << text << std::flush;
  } else {
    write_file_atomically(out, text);
  }
  log(common, "export: " + std::to_string(table.rows.size()) + " rows (run x metric) from " + common.db +
                  (out.empty() ? "" : " to " + out));
  return 0;
}

}  // namespace dionsim::cli
