// dionsim step: runs a numerics case folder through the CPU reference optimizer (a simulated world
// of W ranks in one process) and writes the weights and per-rank deferral counters.
// Logic: optimizer/numerics_case.hpp, optimizer/reference_step.hpp.
#include <chrono>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "common/error.hpp"
#include "common/files.hpp"
#include "experiments/cli.hpp"
#include "experiments/record.hpp"
#include "optimizer/numerics_case.hpp"

namespace dionsim::cli {

int run_step(std::span<const std::string> args) {
  Command cmd("step", "CASE_DIR --out OUT_DIR [--threads N] [--json]",
              "Runs case.json's steps on W0 and G<t> with the CPU reference Dion2/NorDion2 (every rank\n"
              "simulated, real all-gather and all-to-all bytes), writes OUT_DIR/W_<name>.npy and\n"
              "OUT_DIR/stats.json ({\"per_rank\": [[{deferred_rows, winner_rows} per step] per rank]}).");
  std::string case_dir, out_dir;
  int threads = 2;
  cmd.options().add_options()
      ("case", po::value(&case_dir)->required(), "case folder (positional)")
      ("out", po::value(&out_dir)->required(), "output folder (created if missing)")
      ("threads", po::value(&threads)->default_value(2), "worker threads (results do not depend on it)");
  cmd.positional("case", 1);
  if (!cmd.parse(args)) return 0;
  if (threads < 1) throw_bad_usage("--threads", std::to_string(threads), "an integer >= 1");
  // Before the run: an existing file here is refused by name (the folder is created when writing).
  if (std::filesystem::exists(out_dir) && !std::filesystem::is_directory(out_dir)) {
    throw_bad_usage("--out", out_dir, "an output folder, not an existing file");
  }
  const opt::NumericsCase c = opt::load_numerics_case(case_dir);
  Recorder recorder(cmd.common(), "step");
  const nlohmann::json run_config = recorder.enabled() ? analysis::step_config_json(c) : nlohmann::json::object();
  if (recorder.skip(run_config)) return 0;
  auto record = recorder.begin(run_config);
  log(cmd.common(), "step: " + case_dir + ": " + std::to_string(c.params.size()) + " params, world " +
                        std::to_string(c.config.plan.world) + ", " + std::to_string(c.steps) + " steps");
  const auto t0 = std::chrono::steady_clock::now();
  const auto optimizer = opt::run_numerics_case(c, threads);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  opt::write_numerics_outputs(out_dir, c, *optimizer);
  if (recorder.enabled()) {
    analysis::add_step_results(record, c, *optimizer, ms);
    recorder.store(record);
  }
  std::int64_t deferred = 0, winners = 0;
  for (const auto& rank : optimizer->stats()) {
    for (const auto& s : rank) {
      deferred += s.deferred_rows;
      winners += s.winner_rows;
    }
  }
  if (cmd.common().json) {
    nlohmann::json out = opt::stats_to_json(*optimizer);
    out["out_dir"] = out_dir;
    out["wall_ms"] = ms;
    print_json(out);
  } else {
    std::cout << "case " << case_dir << "  steps " << c.steps << "  world " << c.config.plan.world << "  wall_ms "
              << ms << "  deferred_rows " << deferred << "  winner_rows " << winners << "  -> " << out_dir << '\n';
  }
  return 0;
}

}  // namespace dionsim::cli
