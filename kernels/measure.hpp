#pragma once
// `dionsim measure` (step mode): the real GPU optimizer step on this machine's GPUs with seeded
// random gradients on FSDP-style row shards; warm-up, then N timed steps with CUDA events around
// the step on every rank's compute stream. Reports per step the slowest rank's step time, per
// kernel class and per collective the CUDA-event times (median over the timed steps, rank 0),
// the collective bytes (= the plan's) and the CAPPED_STATS deferral counters.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/gpu_step.hpp"
#include "optimizer/reference_step.hpp"

namespace dionsim::kernels {

struct MeasureConfig {
  std::string model = "gpt-5120x8";
  opt::StepConfig step;  // step.plan.world = GPUs used (one process drives them all)
  int steps = 10;
  int warmup = 3;
  std::uint64_t seed = 0;
  int max_in_flight = 3;
  // Stream layout of the step (kernels/gpu_step.hpp). The environment variable DIONSIM_GPU_STREAMS
  // (single | overlap | ns_first | aux_first) overrides it: a diagnostic for A/B measurements.
  StreamMode streams = StreamMode::single;
  // cuBLASLt autotuning of the NS GEMMs (GpuOptimizer's ns_autotune): tuned in the first warm-up
  // step, so only with --warmup >= 1 (measured on H200: -0.5 to -0.6 ms per step, docs/gpu.md).
  // DIONSIM_NS_AUTOTUNE=0|1 overrides it (a diagnostic, like DIONSIM_GPU_STREAMS; 1 needs a warm-up).
  bool ns_autotune = true;
  // Layout of the NS symmetric products without autotuning (NewtonSchulz::set_symmetric_layout).
  // DIONSIM_NS_LAYOUT=blocks|tiles:ROWS overrides it (a diagnostic).
  NsLayout ns_layout = kDefaultNsLayout;
  // After the eager timed steps: capture one step into a CUDA graph, replay it once untimed, then
  // `steps` timed replays (opt_step_ms is then the replay's; the eager times stay in eager_*).
  bool cuda_graph = false;
};

// "single", "overlap", "ns_first", "aux_first".
[[nodiscard]] const char* to_string(StreamMode m);
// "blocks", "tiles:ROWS" (the DIONSIM_NS_LAYOUT syntax).
[[nodiscard]] std::string to_string(NsLayout l);

struct MeasuredCollective {
  std::string name;
  std::int64_t group = 0;
  std::int64_t bytes_sent = 0;  // per rank, self chunk included
  double median_ms = 0;         // rank 0
};

struct MeasureResult {
  std::vector<double> step_ms;               // per timed step: slowest rank
  double median_step_ms = 0;
  std::map<std::string, double> kernel_ms;   // median per step, rank 0, summed over megabatches
  std::vector<MeasuredCollective> collectives;
  std::int64_t a2a_payload_bytes = 0;        // plan: fwd + rev sent per rank per step
  std::int64_t norms_allgather_bytes = 0;
  double ns_flops_per_rank = 0;              // plan (nominal GEMM FLOPs)
  std::int64_t winner_rows = 0, deferred_rows = 0;  // summed over ranks and timed steps
  std::vector<opt::GroupPlan> groups;
  std::string device_name;
  int gpus = 0;
  int ranks_per_node = 0;  // GPUs per node of the measured world (recorded as gpus_per_node)
  int rank = 0;  // this process's rank (0 when one process drives every GPU)
  StreamMode streams = StreamMode::single;  // the layout used (after DIONSIM_GPU_STREAMS)
  bool ns_autotune = false;                 // after DIONSIM_NS_AUTOTUNE
  NsLayout ns_layout;                       // after DIONSIM_NS_LAYOUT
  std::vector<NsLayout> ns_layouts_used;    // per group: the layout its NS ran with (autotuned: picked)
  std::vector<double> ns_group_ms;          // per group: NS kernel time per step (median, rank 0)
  std::vector<double> ns_group_flops;       // per group: GEMM FLOPs the NS executes (rank 0)
  // Host time per step: wall time of issuing one step (GpuOptimizer::step(), or replay() with
  // --cuda-graph), median over the timed steps — the CPU span; the GPU runs behind it.
  std::vector<double> host_ms;              // per timed step of the reported mode
  double median_host_ms = 0;
  // With cuda_graph: the eager steps' medians (step on the GPU, host span) and the graph's size.
  double eager_step_ms = 0, eager_host_ms = 0;
  std::size_t graph_nodes = 0;
};

// The ranks this process drives (launch::select_launch decides): under an MPI launch the single
// rank MPI gives (NCCL id by MPI_Bcast); else, when the torchrun-style environment is set
// (WORLD_SIZE), the single rank given by RANK / LOCAL_RANK, the NCCL id coming from rank 0 over TCP
// at MASTER_ADDR:MASTER_PORT; else one per local GPU (ncclCommInitAll), `gpus` of them (0 = all).
std::vector<Communicator> make_communicators(int gpus);

// Validates (UsageError) and runs over `comms` (cfg.step.plan.world must equal their world size).
MeasureResult run_measure(const MeasureConfig& cfg, std::vector<Communicator>& comms);

// `dionsim measure --json` (step mode): the configuration, the device, per-step times, per kernel
// class and per collective times, and the summary metrics ({"metric", "value", "unit"} objects).
[[nodiscard]] nlohmann::json to_json(const MeasureConfig& c, const MeasureResult& r);

}  // namespace dionsim::kernels
