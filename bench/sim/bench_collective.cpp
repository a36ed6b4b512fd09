// Speed of the simulator on large all-to-alls (not a test): 128 x 8 = 1024 ranks must take
// <= 2 s on one core; 4096 and 8192 ranks are reported. Each configuration runs in its own
// child process so that its peak resident memory (getrusage ru_maxrss) is its own. The exact
// per-flow path is timed at smaller sizes as the baseline the symmetric fast path is compared to.
//
// usage: bench_collective [--exact-max-ranks N]   (default 1024)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sim/collective_model.hpp"
#include "sim/collectives.hpp"
#include "topologies/topology.hpp"

namespace {

using namespace dionsim;

struct Measure {
  double wall_s = 0;
  double sim_us = 0;
  double peak_MiB = 0;
  unsigned long long solver_flows = 0;
};

// Runs in a child; writes the measure through a pipe.
Measure run_child(int nodes, sim::Mode mode) {
  int fd[2];
  if (pipe(fd) != 0) std::abort();
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    const auto start = std::chrono::steady_clock::now();  // building the fabric counts too
    const topo::Topology t(topo::preset("h200-ndr400"), nodes, 8);
    sim::CollectiveSpec spec;
    spec.op = sim::CollectiveOp::alltoall;
    spec.bytes = 1LL << 30;
    const auto r = sim::simulate_collective(t, spec, mode);
    Measure m;
    m.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    m.sim_us = r.time.to_us();
    m.solver_flows = r.solver_flows;
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    m.peak_MiB = static_cast<double>(ru.ru_maxrss) / 1024.0;
    if (write(fd[1], &m, sizeof m) != static_cast<ssize_t>(sizeof m)) _exit(1);
    _exit(0);
  }
  close(fd[1]);
  Measure m;
  const ssize_t got = read(fd[0], &m, sizeof m);
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != static_cast<ssize_t>(sizeof m)) std::fprintf(stderr, "child for %d nodes failed\n", nodes);
  return m;
}

}  // namespace

// The collective model's calls at 1024 ranks (128 x 8 on h100-ndr400), each on a fresh model
// (no cache), in this process: what `collective` and `whatif` pay per call.
void model_calls() {
  std::printf("# collective model, 128 x 8 = 1024 ranks, h100-ndr400, fresh model per call\n");
  std::printf("# %-10s %6s %12s %10s %14s %12s\n", "op", "mode", "bytes", "wall_s", "simulated_us", "algo/proto");
  struct Case {
    sim::CollectiveOp op;
    sim::Mode mode;
    std::int64_t bytes;
  };
  for (const Case c : {Case{sim::CollectiveOp::alltoall, sim::Mode::fast, 8192},
                       Case{sim::CollectiveOp::alltoall, sim::Mode::fast, 1LL << 30},
                       Case{sim::CollectiveOp::allgather, sim::Mode::fast, 8192},
                       Case{sim::CollectiveOp::allgather, sim::Mode::fast, 1LL << 30},
                       Case{sim::CollectiveOp::alltoall, sim::Mode::exact, 1LL << 30}}) {
    const auto start = std::chrono::steady_clock::now();
    const sim::CollectiveModel model(topo::preset("h100-ndr400"), 128, 8);
    const auto cost = model.cost(c.op, c.bytes, {}, c.mode);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("  %-10s %6s %12lld %10.4f %14.2f %12s\n", sim::to_string(c.op), c.mode == sim::Mode::fast ? "fast" : "exact",
                static_cast<long long>(c.bytes), wall, cost.time_us, (cost.algorithm + "/" + cost.protocol).c_str());
    std::fflush(stdout);
  }
}

int main(int argc, char** argv) {
  int exact_max_ranks = 1024;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--exact-max-ranks") == 0 && i + 1 < argc) exact_max_ranks = std::atoi(argv[++i]);
  }
  model_calls();
  std::printf("# all-to-all, 1 GiB per rank, h200-ndr400 (rail, 32-port leaves), one core\n");
  std::printf("# %6s %6s %7s %10s %14s %10s %10s\n", "ranks", "mode", "flows", "wall_s", "simulated_us", "peak_MiB",
              "msgs/s");
  for (const int nodes : {16, 32, 64, 128, 512, 1024}) {
    for (const auto mode : {sim::Mode::exact, sim::Mode::fast}) {
      if (mode == sim::Mode::exact && nodes * 8 > exact_max_ranks) continue;
      const Measure m = run_child(nodes, mode);
      const double messages = static_cast<double>(nodes) * 8 * (nodes * 8 - 1);
      std::printf("  %6d %6s %7llu %10.4f %14.2f %10.1f %10.3g\n", nodes * 8, mode == sim::Mode::fast ? "fast" : "exact",
                  m.solver_flows, m.wall_s, m.sim_us, m.peak_MiB, messages / m.wall_s);
      std::fflush(stdout);
    }
  }
  return 0;
}
