#pragma once
// The one place where command lines are parsed: every subcommand builds a Command, adds its own
// options, and gets the shared ones (--json, --db, --seed, --quiet, --force, --help) for free.
#include <boost/program_options.hpp>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <vector>

namespace dionsim {
struct Table;
}

namespace dionsim::cli {

namespace po = boost::program_options;

struct CommonOptions {
  bool json = false;         // machine-readable results on stdout instead of tables
  bool csv = false;          // the --json result as CSV (subcommands that call Command::offer_csv)
  std::string db;            // also record the run in this SQLite file ("" = don't)
  std::uint64_t seed = 0;    // every random stream derives from it
  bool quiet = false;        // no progress bars or logs on stderr
  bool force = false;        // re-run configurations already stored in --db
  // --json or --csv: the result goes out through print_result, not as a text table.
  [[nodiscard]] bool machine() const { return json || csv; }
};

class Command {
 public:
  // usage: the synopsis after "dionsim NAME", summary: one paragraph shown by --help.
  Command(std::string name, std::string usage, std::string summary);

  po::options_description& options() { return specific_; }
  // Positional arguments, in order; max_count -1 = unlimited.
  void positional(const std::string& name, int max_count);
  // Adds --csv (the --json result as CSV tables) to the shared options; call before parse().
  void offer_csv();

  // Parses `args` (everything after the subcommand name). Returns false when --help was printed
  // and the caller should exit 0. Unknown options and bad values throw UsageError.
  bool parse(std::span<const std::string> args);

  [[nodiscard]] const po::variables_map& vm() const { return vm_; }
  [[nodiscard]] const CommonOptions& common() const { return common_; }
  [[nodiscard]] bool has(const std::string& option) const { return vm_.count(option) > 0 && !vm_[option].defaulted(); }
  void print_help(std::ostream& out) const;

 private:
  std::string name_;
  std::string usage_;
  std::string summary_;
  po::options_description specific_;
  po::options_description shared_;
  po::positional_options_description positional_;
  po::variables_map vm_;
  CommonOptions common_;
};

// Writes `value` to stdout as indented JSON followed by a newline.
void print_json(const nlohmann::json& value);
// The result of --json or --csv: `value` as JSON, or its tables (common/table.hpp) as CSV.
void print_result(const CommonOptions& common, const nlohmann::json& value);
// The same with the CSV's tables given (a result whose JSON nests its table in a map).
void print_result(const CommonOptions& common, const nlohmann::json& value, std::span<const Table> csv_tables);

// Logs to stderr unless quiet ("dionsim: " prefix).
void log(const CommonOptions& common, const std::string& message);

}  // namespace dionsim::cli
