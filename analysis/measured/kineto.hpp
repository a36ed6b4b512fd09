#pragma once
// Reader for PyTorch-profiler (Kineto) Chrome-trace JSON, optionally gzipped, reduced to the
// metrics dionsim calibrates against: per rank and per optimizer step, how long the step took on
// the host and on the GPU, and how that time splits into Newton–Schulz GEMMs, the optimizer's
// all-to-alls and all-gathers, and the rest.
//
// Attribution rule (the one that matters): a GPU kernel belongs to the optimizer step whose
// `Optimizer.step#…` CPU annotation contains the *launch* of that kernel — the cuda_runtime /
// cuda_driver event with the same `correlation` id. Kernels run later than their launch (the GPU
// lags the host), so a window on the GPU timeline would misattribute them. Kineto's own
// `gpu_user_annotation` of the step is not used as the window: it covers only kernels of the
// annotation's stream and misses those launched from compiled graphs nested inside the step
// (measured on the shared traces: it starts 1.8 ms after the step's first kernel). Kernels whose
// launch event is missing fall back to the step whose CPU window contains the kernel's start.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace dionsim::analysis {

// What a kernel was doing, from its name, its NCCL collective args and where it was launched.
enum class KernelRole {
  ns_gemm,          // GEMM launched inside an optimizer step (Newton–Schulz)
  opt_alltoall,     // NCCL all-to-all inside an optimizer step
  opt_allgather,    // NCCL all-gather inside an optimizer step (capped norms, DDP path)
  opt_other,        // any other kernel of an optimizer step (norms, top-k, pack, post, …)
  fsdp_collective,  // NCCL all-gather / reduce-scatter / all-reduce outside the optimizer
  forward,          // launched inside a ProfilerStep#… but outside autograd and the optimizer
  backward,         // launched under an autograd::engine::evaluate_function CPU op
  other,            // everything else (data loading, random gradients of a benchmark, …)
};
[[nodiscard]] std::string_view to_string(KernelRole role);

// One GPU activity (cat "kernel", "gpu_memcpy" or "gpu_memset"). Times in integer ns on the
// trace's clock (Kineto writes µs with three decimals).
struct KernelEvent {
  std::string name;
  std::string category;     // kernel | gpu_memcpy | gpu_memset
  int device = 0;           // pid of the GPU lane
  std::int64_t stream = 0;  // tid of the GPU lane
  std::int64_t start_ns = 0;
  std::int64_t dur_ns = 0;
  std::int64_t launch_ns = -1;  // ts of the launching runtime call, -1 when not found
  bool is_gemm = false;
  std::string collective;       // NCCL "Collective name" (all_to_all, all_gather, …), "" if not NCCL
  std::int64_t in_nelems = 0;   // NCCL "In msg nelems" (per rank, self chunk included)
  std::int64_t out_nelems = 0;  // NCCL "Out msg nelems"
  int group_size = 0;           // NCCL "Group size"
  int dtype_bytes = 0;          // size of NCCL "dtype"
  std::int64_t gemm_flops = 0;  // 2·b·m·n·k from the launching aten op's Input Dims, 0 if unknown
  std::int64_t gemm_bytes = 0;  // bf16/fp32 bytes of A, B and C from the same op, 0 if unknown
  int step = -1;                // index of the optimizer step it belongs to, -1 outside
  KernelRole role = KernelRole::other;

  [[nodiscard]] std::int64_t end_ns() const { return start_ns + dur_ns; }
  [[nodiscard]] std::int64_t payload_bytes() const { return in_nelems * dtype_bytes; }
};

// One `Optimizer.step#…` annotation on the host.
struct StepWindow {
  std::string name;
  std::int64_t cpu_start_ns = 0;
  std::int64_t cpu_end_ns = 0;
};

struct KinetoTrace {
  std::string source;                       // file name (for messages)
  int rank = 0;                             // distributedInfo.rank, else the lowest GPU pid with kernels
  int world_size = 1;                       // distributedInfo.world_size, else 1
  std::string device_name;                  // deviceProperties[rank or 0].name, "" when absent
  std::vector<KernelEvent> kernels;         // sorted by start time
  std::vector<StepWindow> steps;            // sorted by start time
  std::int64_t kernels_without_launch = 0;  // fell back to the time-window rule
};

// Reads `path` (gzip detected by magic bytes). Throws IoError when it cannot be read and
// InputError naming the file when it is not JSON, has no traceEvents, or has no GPU kernels.
[[nodiscard]] KinetoTrace read_kineto_trace(const std::filesystem::path& path);
// Same from text already in memory; `source` names it in errors.
[[nodiscard]] KinetoTrace parse_kineto_trace(const std::string& json_text, const std::string& source);

// The measured metrics of one optimizer step on one rank (names as in the measurement CSV).
struct StepMetrics {
  int rank = 0;
  int step = 0;
  double opt_step_ms = 0;              // host annotation start → later of its end and the last kernel end
  double opt_cpu_span_ms = 0;          // duration of the host annotation
  double opt_gpu_window_ms = 0;        // first kernel start → last kernel end, over all streams
  double opt_gpu_ms = 0;               // union of kernel intervals (GPU busy on any stream)
  double opt_gpu_idle_pct = 0;         // 100 · (1 − busy / window)
  double a2a_ms = 0;                   // summed durations of the step's NCCL all-to-all kernels
  std::int64_t a2a_payload_bytes = 0;  // Σ In msg nelems × dtype size (bytes sent, self included)
  int a2a_count = 0;
  double allgather_ms = 0;
  std::int64_t allgather_bytes = 0;  // Σ input bytes per rank
  double gemm_ms = 0;                // Newton–Schulz GEMM kernel time (summed)
  int gemm_count = 0;
  double non_gemm_ms = 0;       // other non-NCCL kernel time of the step (summed)
  int kernel_count = 0;         // kernels (cat "kernel") launched in the step, NCCL included
  std::int64_t gemm_flops = 0;  // Σ FLOPs of the step's GEMMs whose shapes are known
};

// Per-step metrics of one trace, in step order. Empty when the trace has no optimizer step.
[[nodiscard]] std::vector<StepMetrics> reduce_steps(const KinetoTrace& trace);
// {"rank", "step", "opt_step_ms", …}: every field of StepMetrics under its own name.
[[nodiscard]] nlohmann::json to_json(const StepMetrics& metrics);

// One optimizer step seen from all ranks of a run (one trace per rank). A collective kernel's
// duration on a rank includes waiting for the peers that arrive later; the rank that arrives last
// waits least, so the shortest duration of the i-th all-to-all across ranks is its transfer time.
struct CrossRankStep {
  int step = 0;
  int ranks = 0;
  double opt_step_ms_max = 0;          // slowest rank's opt_step_ms
  double a2a_transfer_ms = 0;          // Σ over the step's all-to-alls of min over ranks of duration
  double a2a_wait_ms_max = 0;          // max over ranks of (its a2a_ms − a2a_transfer_ms)
  std::int64_t a2a_payload_bytes = 0;  // per rank (equal on every rank, checked)
  double a2a_algbw_GBps = 0;           // payload / transfer time (nccl-tests algbw, self chunk included)
};
// InputError when the traces disagree on the number of steps or all-to-alls per step, or repeat a rank.
[[nodiscard]] std::vector<CrossRankStep> reduce_across_ranks(const std::vector<KinetoTrace>& traces);

// Every all-to-all of one run (one trace per rank): step, index in launch order, bytes per rank
// (In msg nelems × dtype size) and transfer time = shortest duration over the ranks. Same checks.
struct AlltoallTransfer {
  int step = 0;
  int index = 0;
  std::int64_t bytes = 0;
  std::int64_t transfer_ns = 0;
};
[[nodiscard]] std::vector<AlltoallTransfer> alltoall_transfers(const std::vector<KinetoTrace>& traces);

// Splits traces into runs: traces whose GPU activity spans overlap in time were recorded together
// (the ranks of one run, on one host clock); disjoint spans are different runs. Sorted by rank.
[[nodiscard]] std::vector<std::vector<KinetoTrace>> group_into_runs(std::vector<KinetoTrace> traces);
[[nodiscard]] nlohmann::json to_json(const CrossRankStep& step);

// What `dionsim calibrate --dump-metrics` prints for traces: {"per_rank": [to_json(StepMetrics) +
// "file"], "across_ranks": [to_json(CrossRankStep) + "run"]} with the traces grouped into runs
// (group_into_runs; runs of one rank have no cross-rank rows). InputError naming the file when a
// trace has no optimizer step.
[[nodiscard]] nlohmann::json dump_metrics(const std::vector<KinetoTrace>& traces);

// Sum of kernel time (ms) and count per role over the whole trace (steps and outside).
struct RoleTotal {
  KernelRole role;
  int count = 0;
  double ms = 0;
};
[[nodiscard]] std::vector<RoleTotal> role_totals(const KinetoTrace& trace);

// Busy time of a set of [start, end) intervals: the length of their union.
[[nodiscard]] std::int64_t union_length_ns(std::vector<std::pair<std::int64_t, std::int64_t>> intervals);

// Element size of a PyTorch / NCCL dtype name as Kineto writes it ("BFloat16" → 2); 0 if unknown.
[[nodiscard]] int dtype_size_bytes(std::string_view dtype);

}  // namespace dionsim::analysis
