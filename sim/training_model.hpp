#pragma once
// Training-step model around the optimizer: forward/backward compute and the FSDP2 / HSDP
// collectives, layer by layer.
//
//  * compute: given in ms, or from model FLOPs and an MFU:  6 · params · tokens_per_gpu / (peak · mfu)
//    (params = the Dion2/NorDion2 matrices of the inventory; tokens per GPU per step); forward is
//    1/3 of it (2·P·T FLOPs), backward 2/3 (4·P·T), split evenly over the model's layers;
//  * sharding (spec §6.1, Shard(0), bf16 compute): FSDP shards every layer over the world; HSDP
//    (`shard_group` G < world) shards over groups of G consecutive ranks and replicates across the
//    world / G groups. Per layer of P/L parameters and per rank: an all-gather of the bf16 shard
//    (2·⌈P/(L·G)⌉ bytes) before its forward and again before its backward (reshard_after_forward;
//    not the last layer, which FSDP2 recipes keep unsharded between its forward and backward),
//    a reduce-scatter of its gradients (G·⌈P/(L·G)⌉ · reduce bytes: fp32 = 4, bf16 = 2) after its
//    backward, and with HSDP an all-reduce of the reduced shard (⌈P/(L·G)⌉ · reduce bytes) across
//    the replicas (the rank with the same shard index in every group);
//  * overlap (FSDP2's implicit prefetch): the collectives run on one communication stream in
//    issue order beside the compute stream. Layer i+1's all-gather is issued when layer i's
//    forward starts; in the backward, layer i−1's all-gather when layer i's backward starts, and
//    layer i's reduce-scatter (+ all-reduce) when it ends. A layer's compute waits for its
//    all-gather; the step's forward/backward ends when the compute and the last reduction are
//    done. FSDP2 runs all-gathers and reduce-scatters on two streams; when both are
//    bandwidth-bound on the same links they share them, which one FIFO stream approximates.
//    layers = 0 (an inventory that gives none) keeps the whole-step bound instead: the FSDP
//    collectives of the whole model run back to back from the start under the compute,
//    fwd_bwd_wall = max(all-gathers + reductions, the compute's end) — optimistic, as with ideal
//    prefetch;
//  * contention: the compute runs `compute_overlap_slowdown` times slower while an FSDP
//    collective is in flight (NCCL's kernels take SMs and HBM bandwidth from the GEMMs beside
//    them — whatif passes the kernel model's GEMM-beside-a-collective slowdown, the one the
//    optimizer's NS GEMMs get; 1 = none, the default). So FSDP is never free under the compute:
//    a collective of length T costs T·(1 − 1/s) of compute time even when hidden.
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
  std::int64_t shard_group = 0;      // HSDP shard group G (divides world); 0 = FSDP over the world
  std::int64_t reduce_bytes = 4;     // gradient reduction dtype: 4 = fp32, 2 = bf16
  std::int64_t layers = 0;           // FSDP units (one per transformer layer); 0 = whole-step bound
  double peak_bf16_TFLOPs = 0.0;
  double compute_overlap_slowdown = 1.0;  // >= 1: compute this many times slower beside an FSDP collective
  [[nodiscard]] std::int64_t shard_world() const { return shard_group > 0 ? shard_group : world; }
  [[nodiscard]] std::int64_t replicas() const { return world / shard_world(); }
};
// Throws UsageError: neither or both of fwd_bwd_ms/mfu, mfu outside (0, 1], non-positive sizes,
// a shard group that does not divide the world, a reduce dtype other than fp32/bf16, layers < 0,
// a slowdown below 1 or not finite.
void validate(const TrainingConfig& config);

// Bytes per rank of one layer's collectives (the whole step: × layers; all-gathers twice).
struct FsdpBytes {
  std::int64_t allgather_input_bytes = 0;      // per all-gather, per rank (bf16 shard of one layer)
  std::int64_t allgathers = 2;                 // forward + backward, per layer (the last layer: 1)
  std::int64_t reducescatter_input_bytes = 0;  // per rank (one layer's full gradients in the reduce dtype)
  std::int64_t allreduce_bytes = 0;            // HSDP: per rank, the layer's reduced shard; 0 for FSDP
  std::int64_t shard_ranks = 1;                // G
  std::int64_t replicas = 1;                   // world / G
};
// One layer's bytes; `layers` 0 or 1 gives the whole model.
[[nodiscard]] FsdpBytes fsdp_bytes(const TrainingConfig& config);
// FSDP over `world` ranks, fp32 reduce, one unit (the earlier interface, kept for callers).
[[nodiscard]] FsdpBytes fsdp_bytes(std::int64_t params, std::int64_t world);

[[nodiscard]] double model_flops_per_gpu(const TrainingConfig& config);  // 6 · params · tokens_per_gpu
[[nodiscard]] DurationNs fwd_bwd_compute_ns(const TrainingConfig& config);

// One layer's collective times on the fabric (the caller times them: shard-group collectives on
// the shard group's fabric, the all-reduce on the replicas').
struct LayerCommNs {
  DurationNs allgather_ns = 0;
  DurationNs reducescatter_ns = 0;
  DurationNs allreduce_ns = 0;  // HSDP replica reduction
};

struct FwdBwdResult {
  DurationNs compute_ns = 0;
  DurationNs fsdp_comm_ns = 0;       // all FSDP collectives back to back on their stream
  DurationNs replica_reduce_ns = 0;  // of which the HSDP all-reduces
  DurationNs wall_ns = 0;            // end of the last backward reduction (or of the compute)
  DurationNs fsdp_exposed_ns = 0;    // wall - compute
};
[[nodiscard]] FwdBwdResult fwd_bwd(const TrainingConfig& config, const LayerCommNs& layer);

// MFU in percent for a step of `step_wall_ns`.
[[nodiscard]] double mfu_pct(const TrainingConfig& config, DurationNs step_wall_ns);

}  // namespace dionsim::sim
