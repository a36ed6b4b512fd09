#pragma once
// TEMPORARY (issue 15): the double-time contention loop of sim/step_program.cpp as it was before
// the one scheduler, verbatim, kept only to measure the new scheduler against it (difference
// and speed). Deleted in the next commit.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "common/error.hpp"
#include "sim/step_program.hpp"

namespace dionsim::sim::legacy {

inline StepCollective to_step(opt::CollectiveKind kind) {
  return kind == opt::CollectiveKind::all_gather ? StepCollective::all_gather : StepCollective::all_to_all;
}

inline DurationNs host_cost_ns(double host_launch_us, std::int64_t launches) {
  return std::llround(host_launch_us * 1e3 * static_cast<double>(launches));
}

// When the GPU may start an op the host issues at `host`: at once when the host runs ahead.
inline DurationNs release_ns(const StepProgramOptions& options, DurationNs host) { return options.host_ahead ? 0 : host; }

// Totals and exposure from the events (both schedulers fill `events` the same way).
inline void summarize(OptimizerStepResult& r, DurationNs host_end, const StepProgramOptions& options) {
  std::vector<std::pair<DurationNs, DurationNs>> compute_iv, comm_iv;
  DurationNs end = release_ns(options, host_end);
  for (const auto& e : r.events) {
    const DurationNs stop = e.start_ns + e.duration_ns;
    end = std::max(end, stop);
    if (e.duration_ns > 0) (e.stream == StreamKind::compute ? compute_iv : comm_iv).emplace_back(e.start_ns, stop);
  }
  r.wall_ns = end;
  r.host_issue_ns = host_end;
  r.exposed_comm_ns = uncovered_ns(comm_iv, compute_iv);
}

inline void add_kernel_totals(OptimizerStepResult& r, const StepEvent& e) {
  r.gpu_busy_ns += e.duration_ns;
  (e.name == "ns_gemm" ? r.ns_gemm_ns : r.non_gemm_ns) += e.duration_ns;
  r.launches += e.launches;
}

inline void add_collective_totals(OptimizerStepResult& r, const StepEvent& e, opt::CollectiveKind kind) {
  r.comm_ns += e.duration_ns;
  r.collectives += 1;
  r.launches += 1;
  if (kind == opt::CollectiveKind::all_to_all) {
    r.a2a_ns += e.duration_ns;
    r.a2a_bytes += e.bytes;
  } else {
    r.allgather_ns += e.duration_ns;
    r.allgather_bytes += e.bytes;
  }
}

inline KernelQuery query(const opt::GroupPlan& group, const opt::KernelWork& k) {
  const bool ns = k.kernel == "ns_gemm";
  return {k.kernel, k.gemm_flops, k.hbm_bytes, k.launches, ns ? group.ns_rows : 0, ns ? group.ns_cols : 0};
}

inline std::vector<int> phase_counts(const opt::Plan& plan) {
  std::vector<int> phases;
  for (const auto& g : plan.groups) phases.push_back(static_cast<int>(g.phases.size()));
  return phases;
}

inline OptimizerStepResult legacy_contention_schedule(const opt::Plan& plan, const KernelModel& kernels,
                                                       const CollectiveTimer& collectives,
                                                       const StepProgramOptions& options) {
  if (!(options.collective_hbm_slowdown >= 1.0 && std::isfinite(options.collective_hbm_slowdown))) {
    throw_bad_input("optimizer step", "collective_hbm_slowdown", std::to_string(options.collective_hbm_slowdown),
                    "a factor >= 1");
  }
  const auto order = async_runtime_order(phase_counts(plan), options.max_concurrent_tasks);
  struct CompOp {
    double work = 0, slowdown = 1;  // isolated ns; stretch while a collective runs
    bool memory_bound = false;      // no GEMM FLOPs: slows a collective beside it
    std::int64_t after_comm = -1;   // index into comm: the task's previous collective (first kernel of a phase)
    double release = 0;
    StepEvent event;
  };
  struct CommOp {
    double duration = 0;
    std::int64_t after_comp = -1;  // every compute op up to this index
    double release = 0;
    StepEvent event;
    opt::CollectiveKind kind = opt::CollectiveKind::none;
  };
  std::vector<CompOp> comp;
  std::vector<CommOp> comm;
  std::vector<std::int64_t> last_collective(plan.groups.size(), -1);
  DurationNs host = 0;
  for (const auto& [task, phase_index] : order) {
    const auto& group = plan.groups[static_cast<std::size_t>(task)];
    const auto& phase = group.phases[static_cast<std::size_t>(phase_index)];
    const std::int64_t prev = last_collective[static_cast<std::size_t>(task)];
    bool first = true;
    for (const auto& k : phase.kernels) {
      host += host_cost_ns(options.host_launch_us, k.launches);
      const DurationNs d = kernels.time_ns(query(group, k));
      comp.push_back({static_cast<double>(d), kernels.overlap_slowdown(k.kernel), k.gemm_flops <= 0.0, first ? prev : -1,
                      static_cast<double>(release_ns(options, host)),
                      {StreamKind::compute, k.kernel, task, phase_index, 0, d, k.hbm_bytes, k.gemm_flops, k.launches}});
      first = false;
    }
    const auto& c = phase.collective;
    if (c.kind == opt::CollectiveKind::none) continue;
    host += host_cost_ns(options.host_launch_us, 1);
    const DurationNs d = collectives.time_ns({to_step(c.kind), c.bytes_sent, c.bytes_per_peer});
    // FIFO on the one collective stream covers the task's previous collective.
    comm.push_back({static_cast<double>(d), static_cast<std::int64_t>(comp.size()) - 1,
                    static_cast<double>(release_ns(options, host)),
                    {StreamKind::collective, c.name, task, phase_index, 0, d, c.bytes_sent, 0.0, 1}, c.kind});
    last_collective[static_cast<std::size_t>(task)] = static_cast<std::int64_t>(comm.size()) - 1;
  }

  // Event by event: at most one kernel and one collective run at a time (two FIFO streams); while
  // both run, the kernel progresses at 1/its overlap slowdown and the collective, beside a
  // memory-bound kernel, at 1/collective_hbm_slowdown.
  std::vector<double> comp_end(comp.size(), -1), comm_end(comm.size(), -1), comp_start(comp.size()),
      comm_start(comm.size());
  std::size_t ci = 0, mi = 0;
  bool comp_busy = false, comm_busy = false;
  double t = 0, remaining = 0, comm_remaining = 0;
  const auto comp_ready = [&](const CompOp& op) { return op.after_comm < 0 || comm_end[op.after_comm] >= 0; };
  const auto comm_ready = [&](const CommOp& op) { return op.after_comp < 0 || comp_end[op.after_comp] >= 0; };
  while (ci < comp.size() || mi < comm.size()) {
    if (!comp_busy && ci < comp.size() && comp_ready(comp[ci]) && comp[ci].release <= t) {
      comp_busy = true;
      comp_start[ci] = t;
      remaining = comp[ci].work;
    }
    if (!comm_busy && mi < comm.size() && comm_ready(comm[mi]) && comm[mi].release <= t) {
      comm_busy = true;
      comm_start[mi] = t;
      comm_remaining = comm[mi].duration;
    }
    const double rate = comp_busy && comm_busy ? 1.0 / comp[ci].slowdown : 1.0;
    const double comm_rate =
        comp_busy && comm_busy && comp[ci].memory_bound ? 1.0 / options.collective_hbm_slowdown : 1.0;
    double next = std::numeric_limits<double>::infinity();
    if (comp_busy) next = std::min(next, t + remaining / rate);
    if (comm_busy) next = std::min(next, t + comm_remaining / comm_rate);
    if (!comp_busy && ci < comp.size() && comp_ready(comp[ci])) next = std::min(next, comp[ci].release);
    if (!comm_busy && mi < comm.size() && comm_ready(comm[mi])) next = std::min(next, comm[mi].release);
    if (!(next < std::numeric_limits<double>::infinity())) {
      throw std::logic_error("contention schedule: no op can run (dependency cycle)");
    }
    if (comp_busy) remaining -= (next - t) * rate;
    if (comm_busy) comm_remaining -= (next - t) * comm_rate;
    t = next;
    if (comp_busy && remaining <= 1e-6) {
      comp_end[ci++] = t;
      comp_busy = false;
    }
    if (comm_busy && comm_remaining <= 1e-6) {
      comm_end[mi++] = t;
      comm_busy = false;
    }
  }
  OptimizerStepResult r;
  for (std::size_t i = 0; i < comp.size(); ++i) {
    comp[i].event.start_ns = std::llround(comp_start[i]);
    comp[i].event.duration_ns = std::llround(comp_end[i]) - comp[i].event.start_ns;
    add_kernel_totals(r, comp[i].event);
  }
  for (std::size_t i = 0; i < comm.size(); ++i) {
    comm[i].event.start_ns = std::llround(comm_start[i]);
    comm[i].event.duration_ns = std::llround(comm_end[i]) - comm[i].event.start_ns;
    add_collective_totals(r, comm[i].event, comm[i].kind);
  }
  // Events in issue order, as the other schedulers give them.
  std::size_t a = 0, b = 0;
  for (const auto& [task, phase_index] : order) {
    const auto& phase = plan.groups[static_cast<std::size_t>(task)].phases[static_cast<std::size_t>(phase_index)];
    for (std::size_t k = 0; k < phase.kernels.size(); ++k) r.events.push_back(comp[a++].event);
    if (phase.collective.kind != opt::CollectiveKind::none) r.events.push_back(comm[b++].event);
  }
  summarize(r, host, options);
  return r;
}

}  // namespace dionsim::sim::legacy
