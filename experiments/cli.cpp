#include "experiments/cli.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/parse.hpp"
#include "common/table.hpp"

namespace dionsim::cli {

Command::Command(std::string name, std::string usage, std::string summary)
    : name_(std::move(name)),
      usage_(std::move(usage)),
      summary_(std::move(summary)),
      specific_("Options"),
      shared_("Shared options") {
  shared_.add_options()
      ("help,h", "show this help and exit")
      ("json", po::bool_switch(&common_.json), "print machine-readable JSON on stdout instead of tables")
      ("db", po::value<std::string>(&common_.db)->value_name("FILE"), "also record the run in this SQLite database")
      ("seed", po::value<std::uint64_t>(&common_.seed)->default_value(0)->value_name("N"), "seed of every random stream")
      ("quiet,q", po::bool_switch(&common_.quiet), "no progress bars or logs on stderr")
      ("force", po::bool_switch(&common_.force), "with --db: re-run configurations that are already stored");
}

void Command::positional(const std::string& name, int max_count) { positional_.add(name.c_str(), max_count); }

void Command::offer_csv() {
  shared_.add_options()("csv", po::bool_switch(&common_.csv),
                        "print the --json result as CSV on stdout (same columns; README \"Output formats\")");
}

bool Command::parse(std::span<const std::string> args) {
  po::options_description all;
  all.add(specific_).add(shared_);
  std::vector<std::string> argv(args.begin(), args.end());
  try {
    po::store(po::command_line_parser(argv).options(all).positional(positional_).run(), vm_);
    if (vm_.count("help") != 0) {
      print_help(std::cout);
      return false;
    }
    po::notify(vm_);
  } catch (const po::unknown_option& e) {
    // "--flag -1" where --flag's value is optional (an implicit value): the value was read as an
    // option of its own. Name the flag and the form it takes, not only "unrecognised option '-1'".
    const std::string token = e.get_option_name();
    const auto at = std::find(argv.begin(), argv.end(), token);
    if (at != argv.begin() && at != argv.end() && (at - 1)->rfind("--", 0) == 0) {
      const std::string flag = *(at - 1);
      const auto* option = all.find_nothrow(flag.substr(2), false);
      if (option != nullptr && option->semantic()->min_tokens() == 0 && option->semantic()->max_tokens() > 0) {
        throw_bad_usage(flag, token, flag + "=VALUE: its value is optional, so it follows '=' (see 'dionsim " + name_ +
                                         " --help')");
      }
    }
    throw UsageError(name_ + ": " + e.what() + " (see 'dionsim " + name_ + " --help')");
  } catch (const po::error& e) {
    throw UsageError(name_ + ": " + e.what() + " (see 'dionsim " + name_ + " --help')");
  }
  if (common_.json && common_.csv) throw UsageError(name_ + ": --json and --csv are exclusive; give one of them");
  // Every numeric flag of every subcommand passes the one number rule (common/parse.hpp): boost
  // reads "inf", "nan", 1e300 and 1e-320 as doubles, which no flag means.
  for (const auto& [flag, value] : vm_) {
    double number = 0;
    if (const auto* d = boost::any_cast<double>(&value.value())) {
      number = *d;
    } else if (const auto* f = boost::any_cast<float>(&value.value())) {
      number = *f;
    } else {
      continue;
    }
    if (!number_problem(number).empty()) {
      char shown[64];
      std::snprintf(shown, sizeof shown, "%g", number);
      throw UsageError(describe_bad_value("--" + flag, "", shown, "a finite number, 0 or between 1e-15 and 1e15 in magnitude"));
    }
  }
  return true;
}

void Command::print_help(std::ostream& out) const {
  out << "usage: dionsim " << name_ << ' ' << usage_ << "\n\n" << summary_ << "\n\n" << specific_ << '\n' << shared_;
}

void print_json(const nlohmann::json& value) { std::cout << value.dump(2) << '\n'; }

void print_result(const CommonOptions& common, const nlohmann::json& value) {
  if (common.csv) {
    std::cout << to_csv(tables_from_json(value)) << std::flush;
  } else {
    print_json(value);
  }
}

void print_result(const CommonOptions& common, const nlohmann::json& value, std::span<const Table> csv_tables) {
  if (common.csv) {
    std::cout << to_csv(csv_tables) << std::flush;
  } else {
    print_json(value);
  }
}

void log(const CommonOptions& common, const std::string& message) {
  if (!common.quiet) std::cerr << "dionsim: " << message << '\n';
}

}  // namespace dionsim::cli
