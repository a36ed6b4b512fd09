#pragma once
// Trace events of a what-if result for a Chrome trace-event file (analysis/perfetto/perfetto.hpp writes
// them; the file opens in ui.perfetto.dev): pid = rank, tid = stream (0 compute, 1 optimizer
// collectives, 2 FSDP collectives), one complete event per kernel class of a phase and per
// collective with bytes, FLOPs, launches, task and phase in args, and a parent event per stream
// spanning the optimizer step so that events nest per thread. Under the symmetry of a uniform plan
// every rank's timeline is the simulated one; the caller picks which ranks to write.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/whatif.hpp"

namespace dionsim::sim {

struct TraceThread {
  int tid = 0;
  std::string name;
};
[[nodiscard]] std::vector<TraceThread> trace_threads();

struct TraceEvent {
  int tid = 0;
  std::string name;
  std::string category;  // "compute", "kernel", "collective", "fsdp"
  DurationNs start_ns = 0;
  DurationNs duration_ns = 0;
  nlohmann::json args;
};
// One rank's events, parents before children, in start order per thread.
[[nodiscard]] std::vector<TraceEvent> trace_events(const WhatifResult& result);

// "all" -> every rank; "0,1,5" -> those (each < world); "" -> the first min(world, 4) ranks.
// Throws UsageError naming --trace-ranks.
[[nodiscard]] std::vector<std::int64_t> trace_ranks(const std::string& spec, std::int64_t world);

// A file name for the configuration's trace: "<scope>_f<fraction>[_c<cap>]_n<nodes>_<fabric>.json".
[[nodiscard]] std::string trace_file_name(const WhatifConfig& config);

}  // namespace dionsim::sim
