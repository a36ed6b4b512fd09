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
// One lowering, one scheduler. lower_optimizer_step turns the plan into ops in host issue order
// (stream, isolated duration, host release time, dependencies, contention factors);
// schedule_optimizer_step runs them on the event engine (sim/streams.hpp StreamProgram, one rank:
// all ranks of a uniform plan behave alike) in integer time, collectives as timed ops whose
// durations come from a CollectiveTimer (one duration per collective is exact for a uniform
// plan: see step_collectives.hpp). Contention is part of that one scheduler, as rate-modulated
// ops (StreamProgram's Contention): a kernel of a class with an overlap slowdown s runs s times
// slower while a collective is in flight on its GPU, and a collective runs
// collective_hbm_slowdown times slower beside a memory-bound kernel (no GEMM FLOPs); the rates
// change at every op start and end. Because both streams are FIFO and every dependency was
// issued earlier, without contention one pass over the lowered ops gives the same times: the
// tests' oracle (tests/whatif/step_oracle.hpp) does that and the tests require both to agree to
// the nanosecond.
//
// Next (docs/simulator.md "Streams"): collectives as flows on the fabric (StreamProgram::
// collective) instead of one fixed duration each, so that FSDP/HSDP traffic and per-layer
// prefetch share the links with the optimizer's all-to-all; the lowering stays, the op of a
// collective changes from timed to flows.
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

// One op of the lowered step: a kernel class of a phase, or a collective.
struct StepOp {
  StepEvent event;  // start_ns 0; duration_ns = the isolated duration
  opt::CollectiveKind collective = opt::CollectiveKind::none;  // none: a kernel
  DurationNs release_ns = 0;      // the GPU may not start it earlier (host issue; 0 with host_ahead)
  std::vector<std::size_t> deps;  // earlier ops it waits for, beyond its stream's previous op
  double overlap_slowdown = 1.0;  // kernel: this many times slower while a collective is in flight
  bool memory_bound = false;      // kernel without GEMM FLOPs: slows a collective beside it
};

// The plan as ops in host issue order; each stream runs its own ops in this order.
struct LoweredStep {
  std::vector<StepOp> ops;
  DurationNs host_issue_ns = 0;    // host time to issue everything (0 = hidden)
  DurationNs host_release_ns = 0;  // when the GPU has the last launch (0 with host_ahead)
  double collective_hbm_slowdown = 1.0;
  [[nodiscard]] bool contended() const;  // some factor is not 1
};

// Throws InputError when max_concurrent_tasks < 1 or collective_hbm_slowdown is not a finite
// factor >= 1.
[[nodiscard]] LoweredStep lower_optimizer_step(const opt::Plan& plan, const KernelModel& kernels,
                                               const CollectiveTimer& collectives,
                                               const StepProgramOptions& options = {});
// The production scheduler: the lowered step on the event engine, contention included.
[[nodiscard]] OptimizerStepResult schedule_optimizer_step(const LoweredStep& step);
// Both together: simulates one optimizer step of `plan`.
[[nodiscard]] OptimizerStepResult simulate_optimizer_step(const opt::Plan& plan, const KernelModel& kernels,
                                                          const CollectiveTimer& collectives,
                                                          const StepProgramOptions& options = {});
// Totals, wall and exposure of a scheduled step: events[i] is step.ops[i]'s event with its start
// and scheduled duration (any scheduler: the engine's, the tests' oracle).
[[nodiscard]] OptimizerStepResult summarize_optimizer_step(const LoweredStep& step, std::vector<StepEvent> events);

// The host issue order of §1.7 for tasks with the given phase counts: (task, phase) pairs.
[[nodiscard]] std::vector<std::pair<int, int>> async_runtime_order(const std::vector<int>& phases_per_task,
                                                                   int max_concurrent_tasks);

// Total time in [0, horizon) covered by `busy` but not by `cover` (both sorted disjoint or not).
[[nodiscard]] DurationNs uncovered_ns(std::vector<std::pair<DurationNs, DurationNs>> busy,
                                      std::vector<std::pair<DurationNs, DurationNs>> cover);

}  // namespace dionsim::sim
