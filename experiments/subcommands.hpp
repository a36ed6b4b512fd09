#pragma once
// One entry point per subcommand; each lives in its own thin file (options -> config -> library
// call -> output). `args` is everything after the subcommand's name.
#include <span>
#include <string>
#include <string_view>

namespace dionsim::cli {

using SubcommandMain = int (*)(std::span<const std::string> args);

struct Subcommand {
  std::string_view name;
  std::string_view summary;
  SubcommandMain run;
};

// The subcommands this build has, in the order `dionsim --help` lists them.
std::span<const Subcommand> subcommands();

}  // namespace dionsim::cli
