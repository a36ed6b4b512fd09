#pragma once
// A what-if result as a Perfetto / Chrome trace-event file (the events: sim/whatif_trace.hpp).
#include <string>

#include "sim/whatif.hpp"

namespace dionsim::analysis {

// Writes DIR/<trace_file_name(config)>: the ranks of `ranks_spec` (sim::trace_ranks) as processes,
// the streams as threads.
void write_whatif_trace(const sim::WhatifResult& r, const std::string& dir, const std::string& ranks_spec);

}  // namespace dionsim::analysis
