#pragma once
// The Dion2 / NorDion2 step on GPUs for the sharded paths `local`, `global` and `global_capped`
// (packed, or routed to global by the plan), driven by the same plan as the CPU reference
// (optimizer/plan.hpp) and checked against it (tests/gpu). Per rank: one compute stream and the
// transport's communication stream; megabatches run as the reference's AsyncRuntime does (§1.7):
// up to `max_in_flight` tasks, each split into phases at its collectives; a phase waits for its
// task's previous collective with a device-side event wait — no host synchronization in step().
// With StreamMode::overlap the Newton-Schulz GEMMs stay on the compute stream while each in-flight
// megabatch's memory-bound kernels (momentum, selection, gather/scatter, pack, post) run on an
// auxiliary stream of their own, so they overlap other megabatches' NS; events order every kernel
// of a task after the one before it, so the results are those of the single-stream step. Measured
// on H200 it hides nothing (docs/gpu.md): the default is one compute stream.
// The unsharded paths (§3.4: `single` at world 1 or when not sharded, `ddp` for replicas with N > 1
// over a transport of world > 1) select on each replica along the plan's dimension (rows, or
// columns for Dion2 when R > C; the selected columns are orthogonalized in their wide form [k][R]).
// Every Newton-Schulz variant runs: Polar Express, the quintic and Gram NS (fp16).
// CUDA graphs: capture() records one whole step (one local rank) into a graph without running it;
// replay() launches it — one API call per step instead of hundreds of launches.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/ops.hpp"
#include "kernels/step_transport.hpp"
#include "optimizer/plan.hpp"
#include "optimizer/reference_step.hpp"

namespace dionsim::kernels {

struct CollectiveTiming {
  std::string name;          // norms_allgather, a2a_fwd, a2a_rev
  std::int64_t group = 0;
  std::int64_t bytes_sent = 0;  // per rank, self chunk included (= the plan's)
  double ms = 0;             // comm-stream interval from the collective's start to its end
};

struct StepTiming {
  double step_ms = 0;                        // compute stream: first kernel of the step to the last
  std::map<std::string, double> kernel_ms;   // per kernel class, summed over megabatches
  std::map<std::string, double> phase_ms;    // per "group<i>/P<p>" compute phase, and "ns_gemm/group<i>"
  std::vector<CollectiveTiming> collectives;
};

// single: every kernel on the compute stream. overlap: memory-bound kernels on per-task auxiliary
// streams (default priority). overlap_ns_first: the same with the NS (compute) stream at the
// device's highest priority, so GEMM blocks are scheduled before auxiliary ones; overlap_aux_first:
// the auxiliary streams at the highest priority instead.
enum class StreamMode { single, overlap, overlap_ns_first, overlap_aux_first };

// The Newton-Schulz input of a group on one rank: pr matrices of the selected rows (global: k_tot,
// gathered on the owner; local and capped: kw) by the columns.
struct NsInput {
  int batch;
  std::int64_t rows, cols;
};
[[nodiscard]] NsInput ns_input(const opt::GroupPlan& g);

class GpuOptimizer {
 public:
  GpuOptimizer(const opt::StepConfig& config, std::vector<opt::ParamSpec> params, StepTransport& transport,
               bool timing = false, int max_in_flight = 3, StreamMode streams = StreamMode::single,
               NsTuning ns_tuning = {});  // autotune: the first step synchronizes
  ~GpuOptimizer();
  GpuOptimizer(const GpuOptimizer&) = delete;
  GpuOptimizer& operator=(const GpuOptimizer&) = delete;

  // Full row-major [rows, cols] fp32 matrices per param; each local rank takes its FSDP2 rows.
  void set_weights(const std::vector<std::vector<float>>& full);
  void set_grads(const std::vector<std::vector<float>>& full);
  // Device-side pseudo-random gradients (and weights) for measurement (seed, step mixed in).
  void randomize_grads(std::uint64_t seed, float scale = 1.0F);
  void randomize_weights(std::uint64_t seed, float scale = 0.02F);

  void step();         // issues one optimizer step on every local rank; does not wait
  // Records one step into a CUDA graph on the compute stream (runs nothing; needs exactly one local
  // rank; after any autotuning, which synchronizes: run a step first). Timing marks are not captured:
  // after a replay last_timing() has the step's time (marks around the launch) and no kernel
  // classes. Replaces an earlier capture.
  void capture();
  void replay();       // launches the captured step (UsageError without a capture); does not wait
  [[nodiscard]] std::size_t graph_nodes() const;  // of the captured step
  // Per group, the GEMM FLOPs its NS executes per step on the first local rank (the layout used,
  // symmetric products counted as computed; kernels/ops.hpp NewtonSchulz::executed_flops).
  [[nodiscard]] std::vector<double> ns_executed_flops() const;
  void synchronize();  // host waits for every local rank's streams

  [[nodiscard]] std::vector<float> weight(std::size_t param) const;    // gathered (local ranks must cover the world)
  [[nodiscard]] std::vector<float> momentum(std::size_t param) const;
  [[nodiscard]] std::vector<std::vector<std::int64_t>> last_applied_rows() const;  // global rows per param
  [[nodiscard]] std::vector<opt::RankStepStats> last_stats() const;   // per local rank (CAPPED_STATS)
  [[nodiscard]] std::vector<StepTiming> last_timing() const;          // per local rank (timing = true)
  [[nodiscard]] const std::vector<opt::GroupPlan>& groups() const;
  // Per group, the symmetric-product layout its Newton-Schulz uses on the first local rank (with
  // autotuning, the one picked in the first step).
  [[nodiscard]] std::vector<NsLayout> ns_layouts() const;
  [[nodiscard]] const std::vector<std::vector<std::size_t>>& group_params() const;

  struct Impl;  // opaque (kernels/gpu_step.cpp)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dionsim::kernels
