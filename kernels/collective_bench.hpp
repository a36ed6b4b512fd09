#pragma once
// nccl-tests-style measurement of the optimizer's collectives on this machine's fabric: for each
// size, warm-up then timed iterations with CUDA events on every rank's communication stream, the
// slowest rank's mean time, algbw = bytes / time, busbw = algbw * (n-1)/n (both for all-to-all and
// all-gather, GB = 1e9), and #wrong from a device-side check of the received pattern.
#include <cstddef>
#include <string>
#include <vector>

#include "kernels/transport.hpp"

namespace dionsim::kernels {

enum class CollectiveOp { alltoall, allgather };

struct CollectiveBenchConfig {
  CollectiveOp op = CollectiveOp::alltoall;
  std::size_t min_bytes = 1 << 20;   // -b: total bytes per rank (nccl-tests "size")
  std::size_t max_bytes = 1 << 28;   // -e
  int factor = 2;                    // -f: multiplication factor between sizes
  int warmup = 5;
  int iters = 20;
};

struct CollectiveRow {
  std::size_t bytes = 0;   // per rank: all-to-all send buffer, all-gather receive buffer
  std::size_t count = 0;   // bf16 elements in that buffer
  double time_us = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  long long wrong = 0;
};

// Validates the sizes (UsageError in nccl-tests' words) before any device work.
void validate(const CollectiveBenchConfig& cfg, int world);
// Runs the sweep over communicators this process drives (all of them: init_local; or the single
// one of init_from_env, in which case every process must call it and all get the same rows).
std::vector<CollectiveRow> run_collective_bench(const CollectiveBenchConfig& cfg, std::vector<Communicator>& comms);

std::string to_string(CollectiveOp op);

}  // namespace dionsim::kernels
