#include "experiments/subcommands.hpp"

#include <array>

namespace dionsim::cli {

// Declared here, defined one per file (cmd_<name>.cpp).
// (entries are added as the subcommands land)
int run_collective(std::span<const std::string> args);

std::span<const Subcommand> subcommands() {
  static constexpr std::array<Subcommand, 1> table{{
      {"collective", "simulate one collective on a fabric (nccl-tests style table)", run_collective},
  }};
  return table;
}

}  // namespace dionsim::cli
