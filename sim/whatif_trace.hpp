#pragma once
// Chrome trace-event JSON of a what-if result (opens in ui.perfetto.dev and chrome://tracing):
// pid = rank, tid = stream (0 compute, 1 optimizer collectives, 2 FSDP collectives), one complete
// event ("ph": "X", ts/dur in µs) per kernel class of a phase and per collective, with bytes,
// FLOPs, launches, task and phase in "args"; a parent event per stream spans the forward/backward
// and the optimizer step so that events nest per thread. Under the symmetry of a uniform plan
// every rank's timeline is the simulated one; `ranks` picks which ranks are written.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "sim/whatif.hpp"

namespace dionsim::sim {

[[nodiscard]] nlohmann::json chrome_trace(const WhatifResult& result, const std::vector<std::int64_t>& ranks);

// "all" -> every rank; "0,1,5" -> those (each < world); default "" -> the first min(world, 4)
// ranks. Throws UsageError naming --trace-ranks.
[[nodiscard]] std::vector<std::int64_t> trace_ranks(const std::string& spec, std::int64_t world);

// A file name for the configuration's trace: "<scope>_f<fraction>_c<cap>_n<nodes>_<fabric>.json".
[[nodiscard]] std::string trace_file_name(const WhatifConfig& config);

}  // namespace dionsim::sim
