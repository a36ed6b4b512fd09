#include "sim/training_model.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.hpp"

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
  if (!(config.peak_bf16_TFLOPs > 0.0)) {
    throw_bad_usage("--hardware", std::to_string(config.peak_bf16_TFLOPs), "a GPU with a positive peak");
  }
}

FsdpBytes fsdp_bytes(std::int64_t params, std::int64_t world) {
  FsdpBytes b;
  if (world <= 1) {
    return {0, 0, 0};  // one GPU: nothing is sharded, nothing is gathered
  }
  const std::int64_t shard = (params + world - 1) / world;  // FSDP2 pads to ceil(P / w) per rank
  b.allgather_input_bytes = shard * 2;                      // bf16 parameters
  b.reducescatter_input_bytes = shard * world * 4;          // fp32 gradients (reduce in fp32)
  return b;
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

FwdBwdResult fwd_bwd(const TrainingConfig& config, DurationNs fsdp_comm_ns) {
  FwdBwdResult r;
  r.compute_ns = fwd_bwd_compute_ns(config);
  r.fsdp_comm_ns = fsdp_comm_ns;
  r.wall_ns = std::max(r.compute_ns, fsdp_comm_ns);
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
