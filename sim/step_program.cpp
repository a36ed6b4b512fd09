#include "sim/step_program.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "common/error.hpp"
#include "sim/engine.hpp"
#include "sim/streams.hpp"

namespace dionsim::sim {

double OptimizerStepResult::gpu_idle_pct(DurationNs window_ns) const {
  if (window_ns <= 0) {
    return 0.0;
  }
  return 100.0 * (1.0 - static_cast<double>(gpu_busy_ns) / static_cast<double>(window_ns));
}

std::vector<std::pair<int, int>> async_runtime_order(const std::vector<int>& phases_per_task,
                                                     int max_concurrent_tasks) {
  if (max_concurrent_tasks < 1) {
    throw_bad_input("step program", "max_concurrent_tasks", std::to_string(max_concurrent_tasks), "at least 1");
  }
  std::vector<std::pair<int, int>> order;
  std::vector<int> next_phase(phases_per_task.size(), 0);
  std::vector<int> active;
  std::size_t next_task = 0;
  while (next_task < phases_per_task.size() || !active.empty()) {
    std::vector<int> next_active;
    if (next_task < phases_per_task.size() && static_cast<int>(active.size()) < max_concurrent_tasks) {
      const int t = static_cast<int>(next_task++);
      order.emplace_back(t, next_phase[t]++);
      if (next_phase[t] < phases_per_task[t]) {
        next_active.push_back(t);  // newest first
      }
    }
    for (int t : active) {
      order.emplace_back(t, next_phase[t]++);
      if (next_phase[t] < phases_per_task[t]) {
        next_active.push_back(t);
      }
    }
    active = std::move(next_active);
  }
  return order;
}

DurationNs uncovered_ns(std::vector<std::pair<DurationNs, DurationNs>> busy,
                        std::vector<std::pair<DurationNs, DurationNs>> cover) {
  const auto merge = [](std::vector<std::pair<DurationNs, DurationNs>>& v) {
    std::sort(v.begin(), v.end());
    std::vector<std::pair<DurationNs, DurationNs>> out;
    for (const auto& iv : v) {
      if (iv.second <= iv.first) {
        continue;
      }
      if (!out.empty() && iv.first <= out.back().second) {
        out.back().second = std::max(out.back().second, iv.second);
      } else {
        out.push_back(iv);
      }
    }
    v = std::move(out);
  };
  merge(busy);
  merge(cover);
  DurationNs total = 0;
  std::size_t j = 0;
  for (const auto& [b0, b1] : busy) {
    DurationNs cur = b0;
    while (j < cover.size() && cover[j].second <= cur) {
      ++j;
    }
    for (std::size_t i = j; i < cover.size() && cover[i].first < b1; ++i) {
      if (cover[i].first > cur) {
        total += cover[i].first - cur;
      }
      cur = std::max(cur, cover[i].second);
      if (cur >= b1) {
        break;
      }
    }
    if (cur < b1) {
      total += b1 - cur;
    }
  }
  return total;
}

namespace {

StepCollective to_step(opt::CollectiveKind kind) {
  return kind == opt::CollectiveKind::all_gather ? StepCollective::all_gather : StepCollective::all_to_all;
}

DurationNs host_cost_ns(double host_launch_us, std::int64_t launches) {
  return std::llround(host_launch_us * 1e3 * static_cast<double>(launches));
}

// When the GPU may start an op the host issues at `host`: at once when the host runs ahead.
DurationNs release_ns(const StepProgramOptions& options, DurationNs host) { return options.host_ahead ? 0 : host; }

KernelQuery query(const opt::GroupPlan& group, const opt::KernelWork& k) {
  const bool ns = k.kernel == "ns_gemm";
  return {k.kernel, k.gemm_flops, k.hbm_bytes, k.launches, ns ? group.ns_rows : 0, ns ? group.ns_cols : 0};
}

// Picoseconds to the nearest nanosecond (every input is whole ns: exact without contention).
DurationNs to_ns(SimTime t) { return (t.count_ps() + 500) / 1000; }

}  // namespace

bool LoweredStep::contended() const {
  if (collective_hbm_slowdown != 1.0) return true;
  return std::any_of(ops.begin(), ops.end(), [](const StepOp& op) { return op.overlap_slowdown != 1.0; });
}

LoweredStep lower_optimizer_step(const opt::Plan& plan, const KernelModel& kernels, const CollectiveTimer& collectives,
                                 const StepProgramOptions& options) {
  if (!(options.collective_hbm_slowdown >= 1.0 && std::isfinite(options.collective_hbm_slowdown))) {
    throw_bad_input("optimizer step", "collective_hbm_slowdown", std::to_string(options.collective_hbm_slowdown),
                    "a factor >= 1");
  }
  std::vector<int> phases;
  for (const auto& g : plan.groups) phases.push_back(static_cast<int>(g.phases.size()));
  const auto order = async_runtime_order(phases, options.max_concurrent_tasks);
  LoweredStep step;
  step.collective_hbm_slowdown = options.collective_hbm_slowdown;
  std::vector<std::int64_t> last_collective(plan.groups.size(), -1);  // op index by task
  std::int64_t last_compute = -1;
  DurationNs host = 0;
  for (const auto& [task, phase_index] : order) {
    const auto& group = plan.groups[static_cast<std::size_t>(task)];
    const auto& phase = group.phases[static_cast<std::size_t>(phase_index)];
    const std::int64_t prev = last_collective[static_cast<std::size_t>(task)];
    bool first = true;
    for (const auto& k : phase.kernels) {
      host += host_cost_ns(options.host_launch_us, k.launches);
      StepOp op;
      op.event = {StreamKind::compute, k.kernel, task, phase_index, 0, kernels.time_ns(query(group, k)),
                  k.hbm_bytes, k.gemm_flops, k.launches};
      op.release_ns = release_ns(options, host);
      // The phase's first kernel stream-waits on the task's previous collective.
      if (first && prev >= 0) op.deps.push_back(static_cast<std::size_t>(prev));
      op.overlap_slowdown = kernels.overlap_slowdown(k.kernel);
      op.memory_bound = k.gemm_flops <= 0.0;
      first = false;
      last_compute = static_cast<std::int64_t>(step.ops.size());
      step.ops.push_back(std::move(op));
    }
    const auto& c = phase.collective;
    if (c.kind == opt::CollectiveKind::none) continue;
    host += host_cost_ns(options.host_launch_us, 1);
    StepOp op;
    op.event = {StreamKind::collective, c.name, task, phase_index, 0,
                collectives.time_ns({to_step(c.kind), c.bytes_sent, c.bytes_per_peer}), c.bytes_sent, 0.0, 1};
    op.collective = c.kind;
    op.release_ns = release_ns(options, host);
    // The collective waits for everything issued on the compute stream so far (an event recorded
    // there) and for its task's previous collective (stream order of the one collective stream).
    if (last_compute >= 0) op.deps.push_back(static_cast<std::size_t>(last_compute));
    if (prev >= 0) op.deps.push_back(static_cast<std::size_t>(prev));
    last_collective[static_cast<std::size_t>(task)] = static_cast<std::int64_t>(step.ops.size());
    step.ops.push_back(std::move(op));
  }
  step.host_issue_ns = host;
  step.host_release_ns = release_ns(options, host);
  return step;
}

OptimizerStepResult summarize_optimizer_step(const LoweredStep& step, std::vector<StepEvent> events) {
  if (events.size() != step.ops.size()) {
    throw std::logic_error("summarize_optimizer_step: one event per op expected");
  }
  OptimizerStepResult r;
  std::vector<std::pair<DurationNs, DurationNs>> compute_iv, comm_iv;
  DurationNs end = step.host_release_ns;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const StepEvent& e = events[i];
    const DurationNs stop = e.start_ns + e.duration_ns;
    end = std::max(end, stop);
    if (e.stream == StreamKind::compute) {
      r.gpu_busy_ns += e.duration_ns;
      (e.name == "ns_gemm" ? r.ns_gemm_ns : r.non_gemm_ns) += e.duration_ns;
      r.launches += e.launches;
      if (e.duration_ns > 0) compute_iv.emplace_back(e.start_ns, stop);
      continue;
    }
    r.comm_ns += e.duration_ns;
    r.collectives += 1;
    r.launches += 1;
    if (step.ops[i].collective == opt::CollectiveKind::all_to_all) {
      r.a2a_ns += e.duration_ns;
      r.a2a_bytes += e.bytes;
    } else {
      r.allgather_ns += e.duration_ns;
      r.allgather_bytes += e.bytes;
    }
    if (e.duration_ns > 0) comm_iv.emplace_back(e.start_ns, stop);
  }
  r.wall_ns = end;
  r.host_issue_ns = step.host_issue_ns;
  r.exposed_comm_ns = uncovered_ns(comm_iv, compute_iv);
  r.events = std::move(events);
  return r;
}

OptimizerStepResult schedule_optimizer_step(const LoweredStep& step) {
  Engine engine;
  StreamProgram program(engine, 1);  // rank 0 stands for every rank
  program.reserve(step.ops.size());
  std::vector<OpId> ids;
  ids.reserve(step.ops.size());
  std::vector<OpId> deps;
  for (const StepOp& op : step.ops) {
    deps.clear();
    for (const std::size_t d : op.deps) deps.push_back(ids[d]);
    const auto duration = SimTime::ns(op.event.duration_ns);
    const auto release = SimTime::ns(op.release_ns);
    if (op.event.stream == StreamKind::compute) {
      Contention c;
      c.slowdown_beside_comm = op.overlap_slowdown;
      c.memory_bound = op.memory_bound;
      ids.push_back(program.compute(0, duration, op.event.name, deps, release, c));
    } else {
      Contention c;
      c.slowdown_beside_memory_bound = step.collective_hbm_slowdown;
      ids.push_back(program.collective_timed(duration, static_cast<double>(op.event.bytes), op.event.name, deps,
                                             release, c));
    }
  }
  program.run();
  std::vector<StepEvent> events;
  events.reserve(step.ops.size());
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    const OpRecord& rec = program.op(ids[i]);
    StepEvent e = step.ops[i].event;
    e.start_ns = to_ns(rec.start);
    e.duration_ns = to_ns(rec.end) - e.start_ns;
    events.push_back(std::move(e));
  }
  return summarize_optimizer_step(step, std::move(events));
}

OptimizerStepResult simulate_optimizer_step(const opt::Plan& plan, const KernelModel& kernels,
                                            const CollectiveTimer& collectives, const StepProgramOptions& options) {
  return schedule_optimizer_step(lower_optimizer_step(plan, kernels, collectives, options));
}

}  // namespace dionsim::sim
