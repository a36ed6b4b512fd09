#include "sim/training_model.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "optimizer/inventory.hpp"

namespace dionsim::sim {

void validate(const TrainingConfig& config) {
  if (config.fwd_bwd_ms.has_value() == config.mfu.has_value()) {
    throw_bad_usage("--fwd-bwd-ms/--mfu", config.fwd_bwd_ms ? "both" : "neither", "exactly one of them");
  }
  // <= 1e9 ms (11.6 days per step): simulated time is integer ns, and sums of such steps must
  // stay far inside int64 (1e300 stored exposed_comm_ms = -9.2e12).
  if (config.fwd_bwd_ms && !(*config.fwd_bwd_ms >= 0.0 && *config.fwd_bwd_ms <= 1e9)) {
    throw_bad_usage("--fwd-bwd-ms", std::to_string(*config.fwd_bwd_ms), "a number in [0, 1e9]");
  }
  if (config.mfu && !(*config.mfu > 0.0 && *config.mfu <= 1.0)) {
    throw_bad_usage("--mfu", std::to_string(*config.mfu), "a fraction in (0, 1] (e.g. 0.45)");
  }
  if (config.params <= 0) {
    throw_bad_usage("--model", std::to_string(config.params) + " parameters", "a model with parameters");
  }
  if (config.tokens_per_gpu <= 0) {
    throw_bad_usage("--tokens-per-gpu", std::to_string(config.tokens_per_gpu), "a positive integer");
  }
  if (config.world < 1) {
    throw_bad_usage("--nodes/--gpus-per-node", std::to_string(config.world), "a world of at least 1 GPU");
  }
  if (config.shard_group < 0 || (config.shard_group > 0 && config.world % config.shard_group != 0)) {
    throw_bad_usage("--shard-group", std::to_string(config.shard_group),
                    "a divisor of the world (" + std::to_string(config.world) + " GPUs)");
  }
  if (config.reduce_bytes != 2 && config.reduce_bytes != 4) {
    throw_bad_usage("--reduce-dtype", std::to_string(config.reduce_bytes) + " bytes", "fp32 or bf16");
  }
  if (config.layers < 0 || config.layers > opt::kMaxLayers) {
    throw_bad_usage("--layers", std::to_string(config.layers), "an integer in [1, " + std::to_string(opt::kMaxLayers) + "]");
  }
  if (!(std::isfinite(config.compute_overlap_slowdown) && config.compute_overlap_slowdown >= 1.0)) {
    throw_bad_usage("ns_gemm_overlap_slowdown", std::to_string(config.compute_overlap_slowdown), "a factor >= 1");
  }
  if (!(config.peak_bf16_TFLOPs > 0.0)) {
    throw_bad_usage("--hardware", std::to_string(config.peak_bf16_TFLOPs), "a GPU with a positive peak");
  }
}

FsdpBytes fsdp_bytes(const TrainingConfig& c) {
  FsdpBytes b;
  b.shard_ranks = c.shard_world();
  b.replicas = c.replicas();
  const std::int64_t units = std::max<std::int64_t>(1, c.layers);
  const std::int64_t layer_params = (c.params + units - 1) / units;
  const std::int64_t g = b.shard_ranks;
  const std::int64_t shard = (layer_params + g - 1) / g;  // FSDP2 pads to ceil(P / G) per rank
  if (g > 1) {
    b.allgather_input_bytes = shard * 2;                     // bf16 parameters
    b.reducescatter_input_bytes = shard * g * c.reduce_bytes;  // full gradients in the reduce dtype
  } else {
    b.allgathers = 0;  // unsharded: nothing is gathered
  }
  if (b.replicas > 1) b.allreduce_bytes = (g > 1 ? shard : layer_params) * c.reduce_bytes;
  return b;
}

FsdpBytes fsdp_bytes(std::int64_t params, std::int64_t world) {
  TrainingConfig c;
  c.params = params;
  c.world = std::max<std::int64_t>(1, world);
  return fsdp_bytes(c);
}

double model_flops_per_gpu(const TrainingConfig& config) {
  return 6.0 * static_cast<double>(config.params) * static_cast<double>(config.tokens_per_gpu);
}

DurationNs fwd_bwd_compute_ns(const TrainingConfig& config) {
  if (config.fwd_bwd_ms) {
    return std::llround(*config.fwd_bwd_ms * 1e6);
  }
  const double seconds = model_flops_per_gpu(config) / (config.peak_bf16_TFLOPs * 1e12 * *config.mfu);
  return std::llround(seconds * 1e9);
}

namespace {

// One collective on the communication stream, [begin, end).
struct Busy {
  DurationNs begin = 0, end = 0;
};

// When `work` ns of compute started at `start` ends, running `slowdown` times slower while a
// collective of `busy` (sorted, disjoint) is in flight. Every collective that can overlap it is
// issued before it starts (the next reduction waits for its end), so `busy` is complete here.
// Compute starts never go back in time, so `from` (the first collective that may still overlap)
// only moves forward: a step of L layers costs O(L), not O(L²).
DurationNs finish(const std::vector<Busy>& busy, std::size_t& from, DurationNs start, DurationNs work,
                  double slowdown) {
  if (slowdown == 1.0) return start + work;  // exact integer time without contention
  while (from < busy.size() && busy[from].end <= start) ++from;
  double t = static_cast<double>(start), left = static_cast<double>(work);
  for (std::size_t i = from; i < busy.size(); ++i) {
    const Busy& b = busy[i];
    if (static_cast<double>(b.end) <= t) continue;
    if (static_cast<double>(b.begin) > t) {
      const double free = static_cast<double>(b.begin) - t;
      if (left <= free) return std::llround(t + left);
      left -= free;
      t = static_cast<double>(b.begin);
    }
    const double span = static_cast<double>(b.end) - t;
    if (left * slowdown <= span) return std::llround(t + left * slowdown);
    left -= span / slowdown;
    t = static_cast<double>(b.end);
  }
  return std::llround(t + left);
}

}  // namespace

FwdBwdResult fwd_bwd(const TrainingConfig& config, const LayerCommNs& layer) {
  FwdBwdResult r;
  r.compute_ns = fwd_bwd_compute_ns(config);
  if (config.layers == 0) {  // whole-step bound: every collective hidden up to the compute
    r.fsdp_comm_ns = 2 * layer.allgather_ns + layer.reducescatter_ns + layer.allreduce_ns;
    r.replica_reduce_ns = layer.allreduce_ns;
    const std::vector<Busy> busy{{0, r.fsdp_comm_ns}};  // every collective back to back from the start
    std::size_t from = 0;
    r.wall_ns = std::max(r.fsdp_comm_ns, finish(busy, from, 0, r.compute_ns, config.compute_overlap_slowdown));
    r.fsdp_exposed_ns = r.wall_ns - r.compute_ns;
    return r;
  }
  const std::int64_t L = config.layers;
  // Forward 1/3, backward 2/3 of the compute, evenly per layer; the rounding remainder goes to
  // the last backward layer so that the compute sums exactly.
  const DurationNs fwd = r.compute_ns / 3 / L;
  const DurationNs bwd = (r.compute_ns - fwd * L) / L;
  const DurationNs last_bwd = r.compute_ns - fwd * L - bwd * (L - 1);
  const DurationNs ag = layer.allgather_ns, reduce = layer.reducescatter_ns + layer.allreduce_ns;
  const double slowdown = config.compute_overlap_slowdown;
  std::vector<Busy> busy;  // the communication stream's collectives, in issue order
  std::size_t from = 0;     // finish()'s cursor into busy
  DurationNs comm_free = 0, compute = 0;
  const auto issue = [&](DurationNs at, DurationNs length) {
    const DurationNs begin = std::max(comm_free, at);
    comm_free = begin + length;
    if (length > 0) busy.push_back({begin, comm_free});
    return comm_free;
  };
  // Forward: layer 0's all-gather first; layer i+1's is issued as layer i's forward starts.
  DurationNs gathered = issue(0, ag);  // when the current layer's parameters are there
  for (std::int64_t i = 0; i < L; ++i) {
    const DurationNs start = std::max(compute, gathered);
    if (i + 1 < L) gathered = issue(start, ag);
    compute = finish(busy, from, start, fwd, slowdown);
  }
  // Backward, last layer first. The last layer is not resharded after its forward (FSDP2
  // recipes keep it: it would be gathered again at once), so its backward starts at once; layer
  // i−1's all-gather is issued as layer i's backward starts.
  gathered = compute;
  for (std::int64_t i = L - 1; i >= 0; --i) {
    const DurationNs start = std::max(compute, gathered);
    if (i > 0) gathered = issue(start, ag);
    compute = finish(busy, from, start, i == 0 ? last_bwd : bwd, slowdown);
    issue(compute, reduce);  // this layer's gradients
  }
  r.fsdp_comm_ns = (2 * L - 1) * ag + L * reduce;
  r.replica_reduce_ns = L * layer.allreduce_ns;
  r.wall_ns = std::max(compute, comm_free);
  r.fsdp_exposed_ns = r.wall_ns - r.compute_ns;
  return r;
}

double mfu_pct(const TrainingConfig& config, DurationNs step_wall_ns) {
  if (step_wall_ns <= 0) {
    return 0.0;
  }
  return 100.0 * model_flops_per_gpu(config) /
         (static_cast<double>(step_wall_ns) * 1e-9 * config.peak_bf16_TFLOPs * 1e12);
}

}  // namespace dionsim::sim
