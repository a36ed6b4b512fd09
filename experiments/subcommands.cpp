#include "experiments/subcommands.hpp"

#include <array>

namespace dionsim::cli {

// Declared here, defined one per file (cmd_<name>.cpp).
// (entries are added as the subcommands land)

std::span<const Subcommand> subcommands() {
  static constexpr std::array<Subcommand, 0> table{};
  return table;
}

}  // namespace dionsim::cli
