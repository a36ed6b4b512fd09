#include "experiments/subcommands.hpp"

#include <array>

namespace dionsim::cli {

// Declared here, defined one per file (cmd_<name>.cpp).
// (entries are added as the subcommands land)
int run_calibrate(std::span<const std::string> args);

std::span<const Subcommand> subcommands() {
  static constexpr std::array<Subcommand, 1> table{{
      {"calibrate", "fit model parameters (with standard errors) to traces, measurement CSVs or anchors", run_calibrate},
  }};
  return table;
}

}  // namespace dionsim::cli
