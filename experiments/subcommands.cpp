#include "experiments/subcommands.hpp"

#include <array>

namespace dionsim::cli {

// Declared here, defined one per file (cmd_<name>.cpp).
// (entries are added as the subcommands land)
int run_plan(std::span<const std::string> args);
int run_step(std::span<const std::string> args);
int run_measure(std::span<const std::string> args);

std::span<const Subcommand> subcommands() {
  static constexpr std::array<Subcommand, 3> table{{
      {"step", "CPU reference Dion2/NorDion2 on a numerics case folder (all ranks simulated)", run_step},
      {"plan", "optimizer plan: shape groups, k, B, routing, bytes and FLOPs per phase", run_plan},
      {"measure", "the CUDA/NCCL optimizer step or one collective on this machine's GPUs (CUDA builds)", run_measure},
  }};
  return table;
}

}  // namespace dionsim::cli
