#pragma once
// Test oracle for the step scheduler (sim/step_program.hpp): the lowered step by one pass over
// the issue order, no engine. Both streams are FIFO and every dependency was issued earlier, so
// an op starts at the latest of its stream's previous end, its dependencies' ends and its host
// release. Exact without contention only: a contended step (some factor not 1) throws
// std::logic_error — there the tests use hand-computed cases and bounds instead.
#include "sim/step_program.hpp"

namespace dionsim::test {

[[nodiscard]] sim::OptimizerStepResult list_schedule(const sim::LoweredStep& step);

// Lowered and list-scheduled: the oracle's answer for simulate_optimizer_step's arguments.
[[nodiscard]] sim::OptimizerStepResult list_schedule_optimizer_step(const opt::Plan& plan,
                                                                    const sim::KernelModel& kernels,
                                                                    const sim::CollectiveTimer& collectives,
                                                                    const sim::StepProgramOptions& options = {});

}  // namespace dionsim::test
