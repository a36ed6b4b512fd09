#include "experiments/subcommands.hpp"

#include <array>

namespace dionsim::cli {

// Declared here, defined one per file (cmd_<name>.cpp).
int run_step(std::span<const std::string> args);
int run_plan(std::span<const std::string> args);
int run_collective(std::span<const std::string> args);
int run_whatif(std::span<const std::string> args);
int run_recommend(std::span<const std::string> args);
int run_deferral(std::span<const std::string> args);
int run_measure(std::span<const std::string> args);
int run_calibrate(std::span<const std::string> args);
int run_report(std::span<const std::string> args);
int run_validate(std::span<const std::string> args);
int run_validate_collectives(std::span<const std::string> args);
int run_export(std::span<const std::string> args);
int run_compare(std::span<const std::string> args);

std::span<const Subcommand> subcommands() {
  static constexpr std::array<Subcommand, 13> table{{
      {"step", "CPU reference Dion2/NorDion2 on a numerics case folder (all ranks simulated)", run_step},
      {"plan", "optimizer plan: shape groups, k, B, routing, bytes and FLOPs per phase", run_plan},
      {"collective", "simulate one collective on a fabric (nccl-tests style table)", run_collective},
      {"whatif", "predict training-step and optimizer time across scopes, nodes and fabrics", run_whatif},
      {"recommend", "per cluster size: the scope and capacity_factor with the shortest step under a deferral target", run_recommend},
      {"deferral", "simulate global_capped deferral with the real capped pack; recommend capacity_factor", run_deferral},
      {"measure", "run the CUDA+NCCL optimizer on this machine's GPUs and record measured timings", run_measure},
      {"calibrate", "fit fabric and kernel-time parameters to measured runs, traces or CSV", run_calibrate},
      {"validate", "leave-one-configuration-out: predicted vs measured, error per metric", run_validate},
      {"validate-collectives", "predict published nccl-tests rows per size regime beside NCCL's own model",
       run_validate_collectives},
      {"report", "render an HTML/Markdown report with plots from a results database", run_report},
      {"export", "a database's runs as CSV or JSON: one row per run and metric, every configuration key a column", run_export},
      {"compare", "two databases (or two --where selections) side by side: differences, interval overlap", run_compare},
  }};
  return table;
}

}  // namespace dionsim::cli
