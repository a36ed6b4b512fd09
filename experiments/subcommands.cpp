#include "experiments/subcommands.hpp"

#include <array>

namespace dionsim::cli {

// Declared here, defined one per file (cmd_<name>.cpp).
// (entries are added as the subcommands land)
int run_plan(std::span<const std::string> args);
int run_whatif(std::span<const std::string> args);
int run_report(std::span<const std::string> args);
int run_step(std::span<const std::string> args);
int run_collective(std::span<const std::string> args);
int run_calibrate(std::span<const std::string> args);

std::span<const Subcommand> subcommands() {
  static constexpr std::array<Subcommand, 6> table{{
      {"plan", "optimizer plan: shape groups, k, B, routing, bytes and FLOPs per phase", run_plan},
      {"whatif", "predicted training step per configuration of a sweep (scope, fraction, nodes, fabric)", run_whatif},
      {"report", "tables and plots (HTML, Markdown + PNG) of the what-if runs in a database", run_report},
      {"step", "CPU reference Dion2/NorDion2 on a numerics case folder (all ranks simulated)", run_step},
      {"collective", "simulate one collective on a fabric (nccl-tests style table)", run_collective},
      {"calibrate", "fit model parameters (with standard errors) to traces, measurement CSVs or anchors", run_calibrate},
  }};
  return table;
}

}  // namespace dionsim::cli
