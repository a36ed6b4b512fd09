#pragma once
// Checks for the programs mpirun starts (no Catch2 across processes): every rank counts its own
// failures and prints the first ten; the program's exit code tells mpirun (and ctest) about them.
#include <cstdio>
#include <string>

namespace dionsim::testing {

inline int failures = 0;
inline int my_rank = -1;

inline void expect(bool ok, const std::string& what) {
  if (!ok && failures++ < 10) std::fprintf(stderr, "FAIL rank %d: %s\n", my_rank, what.c_str());
}

}  // namespace dionsim::testing
