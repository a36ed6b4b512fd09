#include "step_oracle.hpp"

#include <algorithm>
#include <stdexcept>

namespace dionsim::test {

sim::OptimizerStepResult list_schedule(const sim::LoweredStep& step) {
  if (step.contended()) throw std::logic_error("list_schedule: the oracle has no contention");
  std::vector<sim::StepEvent> events;
  events.reserve(step.ops.size());
  std::vector<sim::DurationNs> end(step.ops.size(), 0);
  sim::DurationNs stream_free[2] = {0, 0};  // by StreamKind
  for (std::size_t i = 0; i < step.ops.size(); ++i) {
    const sim::StepOp& op = step.ops[i];
    sim::DurationNs& free = stream_free[op.event.stream == sim::StreamKind::compute ? 0 : 1];
    sim::DurationNs start = std::max(free, op.release_ns);
    for (const std::size_t d : op.deps) {
      if (d >= i) throw std::logic_error("list_schedule: a dependency issued later");
      start = std::max(start, end[d]);
    }
    end[i] = start + op.event.duration_ns;
    free = end[i];
    sim::StepEvent e = op.event;
    e.start_ns = start;
    events.push_back(std::move(e));
  }
  return sim::summarize_optimizer_step(step, std::move(events));
}

sim::OptimizerStepResult list_schedule_optimizer_step(const opt::Plan& plan, const sim::KernelModel& kernels,
                                                      const sim::CollectiveTimer& collectives,
                                                      const sim::StepProgramOptions& options) {
  return list_schedule(sim::lower_optimizer_step(plan, kernels, collectives, options));
}

}  // namespace dionsim::test
