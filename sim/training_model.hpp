#pragma once
// Training-step model around the optimizer: forward/backward compute and the FSDP2 collectives.
//
//  * compute: given in ms, or from model FLOPs and an MFU:  6 · params · tokens_per_gpu / (peak · mfu)
//    (params = the Dion2/NorDion2 matrices of the inventory; tokens per GPU per step);
//  * FSDP2 (Shard(0), bf16 compute, fp32 reduce — spec §6.1): per step two all-gathers of the bf16
//    parameters (forward, and backward after reshard_after_forward) and one reduce-scatter of fp32
//    gradients; per rank the all-gather input is 2·params/w bytes, the reduce-scatter input 4·params bytes;
//  * overlap: FSDP prefetches, so its collectives run on their own stream under the compute; only
//    what exceeds the compute is exposed: fwd_bwd_wall = max(compute, fsdp_comm).
//  * MFU of the whole step = 6 · params · tokens_per_gpu / (step_wall · peak).
#include <cstdint>
#include <optional>

#include "sim/kernel_model.hpp"

namespace dionsim::sim {

struct TrainingConfig {
  std::optional<double> fwd_bwd_ms;  // compute time given (wins over mfu)
  std::optional<double> mfu;         // (0, 1]: compute from model FLOPs
  std::int64_t params = 0;           // model parameters counted in the FLOPs and in FSDP
  std::int64_t tokens_per_gpu = 0;   // tokens per GPU per optimizer step
  std::int64_t world = 1;
  double peak_bf16_TFLOPs = 0.0;
};
// Throws UsageError: neither or both of fwd_bwd_ms/mfu, mfu outside (0, 1], non-positive sizes.
void validate(const TrainingConfig& config);

// Bytes per rank of the FSDP collectives of one step.
struct FsdpBytes {
  std::int64_t allgather_input_bytes = 0;      // per all-gather, per rank (bf16 shard)
  std::int64_t allgathers = 2;                 // forward + backward
  std::int64_t reducescatter_input_bytes = 0;  // per rank (fp32 full gradients)
};
[[nodiscard]] FsdpBytes fsdp_bytes(std::int64_t params, std::int64_t world);

[[nodiscard]] double model_flops_per_gpu(const TrainingConfig& config);  // 6 · params · tokens_per_gpu
[[nodiscard]] DurationNs fwd_bwd_compute_ns(const TrainingConfig& config);

struct FwdBwdResult {
  DurationNs compute_ns = 0;
  DurationNs fsdp_comm_ns = 0;     // all FSDP collectives back to back on their stream
  DurationNs wall_ns = 0;          // max(compute, fsdp comm)
  DurationNs fsdp_exposed_ns = 0;  // wall - compute
};
// fsdp_comm_ns: the time of the step's FSDP collectives on the fabric (the caller times them).
[[nodiscard]] FwdBwdResult fwd_bwd(const TrainingConfig& config, DurationNs fsdp_comm_ns);

// MFU in percent for a step of `step_wall_ns`.
[[nodiscard]] double mfu_pct(const TrainingConfig& config, DurationNs step_wall_ns);

}  // namespace dionsim::sim
