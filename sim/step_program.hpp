#pragma once
// The optimizer step of one rank, built from the optimizer's plan and scheduled on two in-order
// streams (spec §1.7, DESIGN.md "What the simulator must represent"):
//
//  * tasks = the plan's shape groups (megabatches) in plan order; each task is its phases, a phase
//    = compute kernels then the collective that ends it;
//  * host issue order = AsyncRuntime(max_concurrent_tasks = 3): each round admits one new task
//    (running its phase 0) and then runs the next phase of every task active before the round;
//  * compute stream (in order): a phase's kernels wait for the task's previous collective
//    (stream-wait, not a host block); collective stream (in order, one per rank): a collective
//    starts when its phase's last kernel has finished and the previous collective has ended;
//  * optionally a host launch cost per kernel and collective: nothing starts before the host has
//    issued it (a synchronized opt.step puts every launch on the critical path — the thread's 60 vs
//    117 launches); 0 = the host runs ahead of the GPU (a live training step).
//
// The program runs on the event engine (sim/streams.hpp StreamProgram, one rank: all ranks of a
// uniform plan behave alike) with collectives as timed ops whose durations come from a
// CollectiveTimer (one duration per collective is exact for a uniform plan: see
// step_collectives.hpp). Because both streams are FIFO and every dependency was issued earlier,
// one pass over the issue order gives the same times; list_schedule_optimizer_step does that
// and the tests require both to agree to the nanosecond.
#include <cstdint>
#include <string>
#include <vector>

#include "optimizer/plan.hpp"
#include "sim/kernel_model.hpp"
#include "sim/step_collectives.hpp"

namespace dionsim::sim {

enum class StreamKind { compute, collective };

// One interval on a stream: a kernel class of a phase, or a collective.
struct StepEvent {
  StreamKind stream = StreamKind::compute;
  std::string name;  // kernel class or collective name
  int task = 0;      // shape group index
  int phase = 0;
  DurationNs start_ns = 0;
  DurationNs duration_ns = 0;
  std::int64_t bytes = 0;  // collective: bytes sent per rank; kernel: HBM bytes
  double flops = 0.0;      // kernel: GEMM FLOPs
  std::int64_t launches = 0;
};

struct StepProgramOptions {
  double host_launch_us = 0.0;  // host time per launch (kernels and collectives); 0 = hidden
  // The host issues the step while the GPU is still busy with earlier work (steady-state
  // training): launches cost host time (host_issue_ns, the CPU span) but gate nothing on the GPU.
  bool host_ahead = false;
  int max_concurrent_tasks = 3;
  // A collective progresses this many times slower while a memory-bound kernel (no GEMM FLOPs)
  // runs on the compute stream: NCCL's copy kernels read and write HBM, and a kernel that
  // saturates HBM starves them (the seed thread's 1-node trace: all-to-all kernels 0.66 ms alone,
  // 1.02–1.33 ms beside the full-momentum kernels, same bytes). Meant for collectives bound by
  // NVLink, i.e. within one node; 1 = no effect.
  double collective_hbm_slowdown = 1.0;
};

struct OptimizerStepResult {
  DurationNs wall_ns = 0;      // first issue to last event end
  DurationNs gpu_busy_ns = 0;  // compute stream busy
  DurationNs ns_gemm_ns = 0;
  DurationNs non_gemm_ns = 0;
  DurationNs a2a_ns = 0;           // sum of all-to-all durations
  DurationNs allgather_ns = 0;     // norms / DDP all-gathers
  DurationNs comm_ns = 0;          // collective stream busy
  DurationNs exposed_comm_ns = 0;  // a collective in flight while the compute stream idles
  DurationNs host_issue_ns = 0;    // host time to issue the step (launches × host_launch_us); 0 = hidden
  std::int64_t a2a_bytes = 0;      // sent per rank (fwd + rev)
  std::int64_t allgather_bytes = 0;
  std::int64_t launches = 0;
  std::int64_t collectives = 0;
  [[nodiscard]] double gpu_idle_pct() const { return gpu_idle_pct(wall_ns); }
  // The same busy time seen in a longer window (a rank that waited for the others).
  [[nodiscard]] double gpu_idle_pct(DurationNs window_ns) const;
  std::vector<StepEvent> events;  // both streams, in start order per stream
};

// Simulates one optimizer step of `plan` on the engine. Throws InputError when
// max_concurrent_tasks < 1.
[[nodiscard]] OptimizerStepResult simulate_optimizer_step(const opt::Plan& plan, const KernelModel& kernels,
                                                          const CollectiveTimer& collectives,
                                                          const StepProgramOptions& options = {});
// With contention (kernels.models_contention()): a kernel of a class with an overlap slowdown s
// runs s times slower while a collective is in flight on its GPU; collectives keep their
// durations. Rates change at every collective start and end, so this is simulated event by event
// on the two streams (same issue order and dependencies); simulate_optimizer_step uses it when the
// kernel model has slowdowns. With every slowdown 1 it equals the list schedule (tests).
[[nodiscard]] OptimizerStepResult contention_schedule_optimizer_step(const opt::Plan& plan, const KernelModel& kernels,
                                                                     const CollectiveTimer& collectives,
                                                                     const StepProgramOptions& options = {});
// The same step by one pass over the issue order (no engine): the cross-check.
[[nodiscard]] OptimizerStepResult list_schedule_optimizer_step(const opt::Plan& plan, const KernelModel& kernels,
                                                               const CollectiveTimer& collectives,
                                                               const StepProgramOptions& options = {});

// The host issue order of §1.7 for tasks with the given phase counts: (task, phase) pairs.
[[nodiscard]] std::vector<std::pair<int, int>> async_runtime_order(const std::vector<int>& phases_per_task,
                                                                   int max_concurrent_tasks);

// Total time in [0, horizon) covered by `busy` but not by `cover` (both sorted disjoint or not).
[[nodiscard]] DurationNs uncovered_ns(std::vector<std::pair<DurationNs, DurationNs>> busy,
                                      std::vector<std::pair<DurationNs, DurationNs>> cover);

}  // namespace dionsim::sim
