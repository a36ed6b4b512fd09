// dionsim: dispatches to a subcommand and is the only place errors become exit codes.
#include <filesystem>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "experiments/subcommands.hpp"

namespace {

void print_usage(std::ostream& out) {
  out << "usage: dionsim <subcommand> [options]    (dionsim <subcommand> --help for its options)\n\n"
         "Predicts what Dion2/NorDion2 selection scopes cost on clusters you don't have: an embedded\n"
         "real optimizer (CPU reference, CUDA+NCCL) and a discrete-event model of the fabric.\n\n"
         "subcommands:\n";
  for (const auto& sub : dionsim::cli::subcommands()) {
    out << "  " << sub.name << std::string(12 - std::min<std::size_t>(sub.name.size(), 11), ' ') << sub.summary << '\n';
  }
  out << "\nexit codes: 0 ok, 2 usage, 3 bad config or input file, 4 I/O or database, 5 CUDA/NCCL, 77 no device\n";
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_usage(std::cout);
    return args.empty() ? static_cast<int>(dionsim::ExitCode::usage) : 0;
  }
  if (args[0] == "--version") {
    std::cout << "dionsim " DIONSIM_VERSION "\n";
    return 0;
  }
  try {
    for (const auto& sub : dionsim::cli::subcommands()) {
      if (sub.name == args[0]) {
        return sub.run(std::span<const std::string>(args).subspan(1));
      }
    }
    throw dionsim::UsageError("unknown subcommand '" + args[0] + "' (see 'dionsim --help')");
  } catch (const dionsim::Error& e) {
    std::cerr << "dionsim: error: " << e.what() << '\n';
    return static_cast<int>(e.code());
  } catch (const std::bad_alloc&) {
    // Last resort (sizes that can be computed are refused before they are allocated).
    std::cerr << "dionsim: error: out of memory: the request needs more memory than this machine gives the process; "
                 "ask for fewer or smaller configurations\n";
    return static_cast<int>(dionsim::ExitCode::io);
  } catch (const std::filesystem::filesystem_error& e) {
    // Last resort for a path the system refuses inside a std::filesystem call (a name longer than
    // NAME_MAX, a component that is a file): an I/O error naming the path, never "internal".
    std::cerr << "dionsim: error: "
              << dionsim::describe_bad_value(e.path1().string(), "(path)", e.code().message(),
                                             "a path this system can open (each name at most 255 bytes)")
              << '\n';
    return static_cast<int>(dionsim::ExitCode::io);
  } catch (const std::exception& e) {
    std::cerr << "dionsim: internal error: " << e.what() << '\n';
    return 1;
  }
}
