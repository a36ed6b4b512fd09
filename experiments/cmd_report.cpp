// dionsim report: sweep tables and plots of the what-if and deferral runs in a database, drawn by
// scripts/report.py (python3 + python3-matplotlib): OUT/report.html (self-contained), report.md,
// and the PNGs. Checks its inputs (--extrapolate's keys and values included), then runs the script;
// the script's usage, input and I/O exit codes (2, 3, 4) are passed on.
#include <spawn.h>
#include <sys/wait.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "analysis/store/store.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/parse.hpp"
#include "experiments/cli.hpp"
#include "optimizer/inventory.hpp"
#include "topologies/topology.hpp"
#include "topologies/topology_file.hpp"

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

constexpr const char* kExtrapolateKeys =
    "model=M, gpus-per-node=G, fabric=F, nic=GBps, nodes=A..B (fabric and nic repeatable, comma-separated)";

// --extrapolate model=M,gpus-per-node=G,fabric=F,fabric=F2,nic=50,nic=100,nodes=1..128 -> the JSON
// scripts/report.py reads. Every key and value is checked here, by the rules whatif applies.
nlohmann::json parse_extrapolate(const std::string& text) {
  const std::string flag = "--extrapolate";
  nlohmann::json out = nlohmann::json::object();
  for (const auto& item : split_list(text, flag)) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) throw_bad_usage(flag, item, std::string("key=value: ") + kExtrapolateKeys);
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    const std::string what = flag + " " + key;
    if ((key == "model" || key == "gpus-per-node" || key == "nodes") && out.contains(key == "gpus-per-node" ? "gpus_per_node" : key)) {
      throw_bad_usage(flag, item, key + " once");
    }
    if (key == "model") {
      try {
        (void)opt::load_inventory(value);
      } catch (const UsageError&) {
        throw_bad_usage(flag, item, "model=seed-5120x8, gpt-<h>x<L>, gpt-1b, gpt-14b or a .json inventory file");
      }
      out["model"] = value;
    } else if (key == "gpus-per-node") {
      const auto g = parse_int(value, what);
      if (g < 1 || g > 1024) throw_bad_usage(flag, item, "gpus-per-node=an integer in [1, 1024]");
      out["gpus_per_node"] = g;
    } else if (key == "fabric") {
      const bool is_file = value.find('/') != std::string::npos || value.ends_with(".toml");
      if (is_file) {
        (void)topo::load_topology_file(value);  // InputError naming the file and line
      } else {
        (void)topo::preset(value, what);
      }
      out["fabric"].push_back(value);
    } else if (key == "nic") {
      const double nic = parse_double(value, what);
      if (!(nic >= 0.001 && nic <= 1e6)) throw_bad_usage(flag, item, "nic=a bandwidth in [0.001, 1e6] GB/s");
      out["nic"].push_back(nic);
    } else if (key == "nodes") {
      const auto nodes = parse_int_list(value, what);
      for (const auto n : nodes) {
        if (n < 1 || n > 65536) throw_bad_usage(flag, item, "nodes=node counts in [1, 65536]");
      }
      out["nodes"] = nodes;
    } else {
      throw_bad_usage(flag, item, std::string("one of the keys ") + kExtrapolateKeys);
    }
  }
  // A topology file that names its GPUs per node must agree with gpus-per-node (whatif's rule).
  if (out.contains("fabric") && out.contains("gpus_per_node")) {
    for (const auto& f : out["fabric"]) {
      const std::string name = f.get<std::string>();
      if (name.find('/') == std::string::npos && !name.ends_with(".toml")) continue;
      const auto file = topo::load_topology_file(name);
      if (file.gpus_per_node && *file.gpus_per_node != out["gpus_per_node"].get<std::int64_t>()) {
        throw_bad_usage(flag, "gpus-per-node=" + out["gpus_per_node"].dump(), std::to_string(*file.gpus_per_node) + " as " + name + " says");
      }
    }
  }
  return out;
}

}  // namespace

int run_report(std::span<const std::string> args) {
  Command cmd("report", "--db FILE --out DIR [--extrapolate k=v,..] [--dump-series FILE]",
              "Tables and plots of the what-if and deferral runs in a database, a section per study: step and\n"
              "optimizer wall vs nodes, payload vs world, exposed communication vs bandwidth, deferral vs world and\n"
              "capacity factor, waiting times, the recommended c per world; each plot groups its lines by every key\n"
              "that varies and says what it held fixed. With a step-model calibration in the database: validation and\n"
              "an extrapolation study (--extrapolate; default: the database's what-if runs on the calibration's GPU).\n"
              "Writes DIR/report.html (self-contained), DIR/report.md and the PNGs (scripts/report.py, python3-matplotlib).");
  // Debian's interpreter first: python3-matplotlib is installed for it, not for a pyenv/venv python3.
  std::string out, extrapolate, dump_series, python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  std::string script = DIONSIM_REPORT_SCRIPT;
  double deferral_target = 1e-4;
  cmd.options().add_options()("out", po::value(&out)->required(), "output directory (created)")(
      "extrapolate", po::value(&extrapolate), kExtrapolateKeys)(
      "deferral-target", po::value(&deferral_target)->default_value(deferral_target, "1e-4"),
      "deferral target of the recommended capacity factor, in (0, 1)")(
      "dump-series", po::value(&dump_series), "also write every plotted series as JSON to this file")(
      "python", po::value(&python)->default_value(python), "the Python interpreter")(
      "script", po::value(&script)->default_value(script), "the report script");
  if (!cmd.parse(args)) return 0;
  const auto& common = cmd.common();
  if (common.db.empty()) throw_bad_usage("--db", "", "the database to report on");
  if (!(deferral_target > 0.0 && deferral_target < 1.0)) {
    throw_bad_usage("--deferral-target", std::to_string(deferral_target), "a number in (0, 1)");
  }
  const std::string extrapolate_json = extrapolate.empty() ? "" : parse_extrapolate(extrapolate).dump();
  if (!std::filesystem::exists(common.db)) throw IoError(common.db + ": no such database");
  if (!std::filesystem::exists(script)) throw_bad_usage("--script", script, "an existing scripts/report.py");
  {
    // Refuses a file that is not a dionsim database, and an empty one, before any plotting.
    const auto db = analysis::Database::open(common.db, analysis::Access::read_only);
    analysis::RunQuery whatif, deferral;
    whatif.kind = "whatif";
    deferral.kind = "deferral";
    if (db.find_runs(whatif).empty() && db.find_runs(deferral).empty()) {
      throw_bad_input(common.db, "runs", "no whatif or deferral runs", "a database written by `dionsim whatif --db` or `dionsim deferral --db`");
    }
  }
  require_output_folder(out, "--out");
  if (!dump_series.empty()) require_output_file(dump_series, "--dump-series", {common.db});
  // The script runs this executable for the extrapolation study of a stored calibration.
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<std::string> argv{python, script, "report", "--db", common.db, "--out", out, "--dionsim", self,
                                "--deferral-target", nlohmann::json(deferral_target).dump()};
  if (!extrapolate_json.empty()) argv.insert(argv.end(), {"--extrapolate", extrapolate_json});
  if (!dump_series.empty()) argv.insert(argv.end(), {"--dump-series", dump_series});
  const int rc = run_process(argv);
  if (rc == 2 || rc == 3 || rc == 4) return rc;  // the script named the problem on stderr
  if (rc != 0) throw IoError("scripts/report.py exited with " + std::to_string(rc));
  log(common, "report written to " + out + "/report.html");
  return 0;
}

}  // namespace dionsim::cli
