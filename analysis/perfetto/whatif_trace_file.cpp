#include "analysis/perfetto/whatif_trace_file.hpp"

#include <filesystem>

#include "analysis/perfetto/perfetto.hpp"
#include "common/files.hpp"
#include "sim/whatif_trace.hpp"

namespace dionsim::analysis {

void write_whatif_trace(const sim::WhatifResult& r, const std::string& dir, const std::string& ranks_spec) {
  require_output_folder(dir, "--trace-out");
  TraceWriter out(std::filesystem::path(dir) / sim::trace_file_name(r.config));
  const auto events = sim::trace_events(r);
  for (auto rank : sim::trace_ranks(ranks_spec, r.config.world())) {
    const int pid = static_cast<int>(rank);
    out.process_name(pid, "rank " + std::to_string(rank));
    for (const auto& t : sim::trace_threads()) out.thread_name(pid, t.tid, t.name);
    for (const auto& e : events) {
      out.complete(pid, e.tid, e.name, e.category, TracePs::from_ns(e.start_ns), TracePs::from_ns(e.duration_ns),
                   e.args);
    }
  }
  out.close();
}

}  // namespace dionsim::analysis
