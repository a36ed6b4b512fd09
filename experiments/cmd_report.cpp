// dionsim report: sweep tables and plots of the what-if runs in a database, drawn by
// scripts/report.py (python3 + python3-matplotlib): OUT/report.html (self-contained), report.md,
// and the PNGs. Checks its inputs, then runs the script; the script's exit code is passed on.
#include <spawn.h>
#include <sys/wait.h>

#include <filesystem>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include "analysis/store/store.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "experiments/cli.hpp"

extern char** environ;

namespace dionsim::cli {

namespace {

int run_process(const std::vector<std::string>& argv) {
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, cargv[0], nullptr, nullptr, cargv.data(), environ) != 0) {
    throw IoError(argv[0] + ": cannot run it (install python3 and python3-matplotlib: scripts/install-deps.sh)");
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) {
    throw IoError(argv[0] + ": the report script did not finish");
  }
  return WEXITSTATUS(status);
}

}  // namespace

int run_report(std::span<const std::string> args) {
  Command cmd("report", "--db FILE --out DIR",
              "Tables and plots of the what-if runs in a database: step and optimizer wall vs nodes per scope,\n"
              "payload vs world size, exposed communication vs bandwidth. Writes DIR/report.html (self-contained),\n"
              "DIR/report.md and the PNGs, drawn by scripts/report.py with python3-matplotlib.");
  // Debian's interpreter first: python3-matplotlib is installed for it, not for a pyenv/venv python3.
  std::string out, python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  std::string script = DIONSIM_REPORT_SCRIPT;
  cmd.options().add_options()("out", po::value(&out)->required(), "output directory (created)")(
      "python", po::value(&python)->default_value(python), "the Python interpreter")(
      "script", po::value(&script)->default_value(script), "the report script");
  if (!cmd.parse(args)) return 0;
  const auto& common = cmd.common();
  if (common.db.empty()) throw_bad_usage("--db", "", "the database to report on");
  if (!std::filesystem::exists(common.db)) throw IoError(common.db + ": no such database");
  if (!std::filesystem::exists(script)) throw_bad_usage("--script", script, "an existing scripts/report.py");
  {
    // Refuses a file that is not a dionsim database, and an empty one, before any plotting.
    const auto db = analysis::Database::open(common.db, analysis::Access::read_only);
    analysis::RunQuery q;
    q.kind = "whatif";
    if (db.find_runs(q).empty()) {
      throw_bad_input(common.db, "runs", "no whatif runs", "a database written by `dionsim whatif --db`");
    }
  }
  require_output_folder(out, "--out");
  // The script runs this executable for the extrapolation study of a stored calibration.
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const int rc = run_process({python, script, "report", "--db", common.db, "--out", out, "--dionsim", self});
  if (rc != 0) throw IoError("scripts/report.py exited with " + std::to_string(rc));
  log(common, "report written to " + out + "/report.html");
  return 0;
}

}  // namespace dionsim::cli
