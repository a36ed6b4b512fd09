#pragma once
// dionsim's collective cost model: one answer per call, used by `dionsim collective`, by the
// step program of `whatif` (sim/step_collectives.hpp) and by `validate-collectives`.
//
// For every call it returns the algorithm and protocol NCCL would run and the time it takes:
//  * all-gather / reduce-scatter / all-reduce: the pair NCCL's tuning model picks
//    (sim/nccl_tuning.hpp; --algo / --proto restrict it as NCCL_ALGO / NCCL_PROTO do), priced
//    by dionsim's own physical form
//        t = base(algo, proto) + Σ hops (intra-node and inter-node, NCCL's per-protocol
//            hardware latencies) + bus bytes / (link-limited bandwidth × protocol efficiency)
//    where the bandwidth is the slowest of: the GPU's NVLink rate, the node's NICs, and the
//    protocol's per-channel ceiling (NCCL's published LL/LL128 caps), and NVLS's in-switch
//    reduction moves S·(1 + 1/G) per GPU instead of a ring's 2S·(G−1)/G;
//  * send/recv (cost(): nccl-tests' sendrecv, every rank r sending to r + 1 and receiving from
//    r - 1 in one group; its time is its slowest pair's, one inside an NVLink domain and one
//    across domains): the all-to-all's p2p rules below for a single peer (sendrecv());
//  * all-to-all: NCCL's grouped p2p. The latency part is a base plus rounds of at most
//    `p2p_concurrent_peers` peers (each round one hop of the slowest route kind) or, when larger,
//    the proxy's serial posting of every network message (NCCL's net overhead per message);
//    the bandwidth part is the max-min DES on the fabric (sim/collectives.hpp) with PXN routing
//    on rail-optimized fabrics (a message to another rail goes over NVLink to the local GPU of
//    the destination's rail first). Mode::fast uses the symmetric classes, Mode::exact one flow
//    per message; both give the same time. The protocol is NCCL's per peer: network peers
//    Simple (no LL buffers on p2p network connections), NVLink peers LL up to
//    nccl_p2p_ll_threshold_bytes. Inside one NVLink domain NCCL splits every peer's share over
//    p2p channels (nccl_p2p_plan); each channel's two-stage step pipeline (the sender's copy
//    into the peer's buffer, the receiver's copy out) adds one step at the channel's share of
//    the GPU's NVLink rate, and LL moves the bytes at no more than half NCCL's LL ring ceiling
//    (alltoall_protocol_floor_us).
// Sources of every constant: docs/simulator.md, "The collective model".
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

#include "sim/collectives.hpp"
#include "sim/nccl_tuning.hpp"
#include "topologies/topology.hpp"

namespace dionsim::sim {

// The measured rate of one NCCL p2p channel (ModelOptions::p2p_channel_GBps; the source is in
// collective_model.cpp).
inline constexpr double kP2pChannelGBps = 21.0;
// The fixed cost of one NVLS chunk step (ModelOptions::nvls_step_overhead_us; the source is in
// collective_model.cpp).
inline constexpr double kNvlsStepOverheadUs = 0.47;

// The size regimes of a call by its nccl-tests size (validate-collectives scores by them): latency-
// bound up to 64 KiB, bandwidth-bound from 64 MiB, the middle between.
inline constexpr std::int64_t kLatencyRegimeMaxBytes = std::int64_t{64} << 10;
inline constexpr std::int64_t kBandwidthRegimeMinBytes = std::int64_t{64} << 20;
[[nodiscard]] constexpr int size_regime_index(std::int64_t nccl_tests_bytes) {  // 0 latency, 1 middle, 2 bandwidth
  return nccl_tests_bytes <= kLatencyRegimeMaxBytes ? 0 : nccl_tests_bytes >= kBandwidthRegimeMinBytes ? 2 : 1;
}

// What the model needs beyond a FabricSpec, derived from it (see comm_shape()).
struct ModelOptions {
  double extra_hop_latency_us = 0;  // added to every hop (--latency-us); NCCL's constants alone by default
  bool pxn = true;                  // PXN routing of all-to-alls on rail-optimized fabrics
  int p2p_concurrent_peers = 16;    // NCCL p2p channels (32) / channels per peer (2)
  std::int64_t simple_buff_bytes = std::int64_t{4} << 20;  // NCCL_BUFFSIZE: Simple's buffer, NCCL_STEPS chunks
  // What `dionsim calibrate --nccl-tests` fits (analysis/calibration/collective_fit.hpp); the
  // defaults are the uncalibrated model.
  double call_overhead_us = 0;      // once per call (launch, group, proxy wake-up)
  double net_hop_extra_us = 0;      // on every inter-node step, after NCCL's / the fabric's step latency
  double nvlink_scale = 1;          // on NCCL's NVLink rate (nominal x nccl_nvlink_fraction), capped at nominal
  // The rate one p2p channel moves its parts at (GB/s): NCCL runs every part of a send on one
  // channel, one thread block, so a send split over k parts moves at no more than k times this.
  // Measured, not NCCL's: kP2pChannelGBps's source is in collective_model.cpp.
  double p2p_channel_GBps = kP2pChannelGBps;
  // What one NVLS chunk step costs beside its copy (us): NCCL's smaller chunks for smaller calls
  // run slower. Measured, not NCCL's: kNvlsStepOverheadUs's source is in collective_model.cpp.
  double nvls_step_overhead_us = kNvlsStepOverheadUs;
  // Every call's time times this factor of its size regime (size_regime_index): not a model
  // parameter but a stress test — `recommend` prices the pick and the runner-up with every call at
  // the published record's measured / modelled ends (analysis/calibration/published_intervals.hpp)
  // to say whether the pick survives the model's error. 1 = the model as it is; each in (0, 100].
  std::array<double, 3> time_factor_by_size_regime{1.0, 1.0, 1.0};
};

struct CollectiveCost {
  CollectiveOp op = CollectiveOp::allgather;
  std::string algorithm;  // ring | tree | nvls | nvlstree | pat | p2p (all-to-all, send/recv)
  std::string protocol;   // ll | ll128 | simple
  double time_us = 0;
  double latency_us = 0;  // the size-independent part
  double bandwidth_GBps = 0;  // algorithm bandwidth of the size-dependent part (0 when none)
  double pipeline_fill_us = 0;  // trees, NVLS, one-domain all-to-alls: the chunk pipeline's fill (in time_us)
  std::optional<NcclPrediction> nccl;  // NCCL's own model for the same call (not for all-to-all)
  // Who picked the pair: "nccl" (its tuning model), or the fabric's tuner plugin
  // (topo::to_string(TunerPlugin), sim/aws_ofi_tuner.hpp); empty for all-to-all.
  std::string chosen_by;
};

// The NCCL communicator view of a fabric at a size (`nodes` hosts of `gpus_per_node`): NVLink
// domains are NCCL's nodes, the architecture follows from the NVLink generation (3 Ampere,
// 4 Hopper, 5 Blackwell), every GPU has one NIC port per plane, NVLS where the NVSwitch
// multicasts (Hopper+).
[[nodiscard]] CommShape comm_shape(const topo::FabricSpec& spec, int nodes, int gpus_per_node);

// NVLS's rates (GB/s) for one call: of one pipeline step (a chunk and its step's cost), and of the
// whole call (every channel's steps, at least one per head).
struct NvlsRates {
  double step_GBps = 0;
  double call_GBps = 0;
};

class CollectiveModel {
 public:
  CollectiveModel(const topo::FabricSpec& spec, int nodes, int gpus_per_node, ModelOptions options = {});

  [[nodiscard]] const CommShape& shape() const { return shape_; }
  [[nodiscard]] const NcclTuningModel& nccl() const { return nccl_; }
  [[nodiscard]] int ranks() const { return shape_.ranks(); }

  // One call; `bytes` = nccl-tests size (all-gather: gathered output; reduce-scatter /
  // all-reduce: input; all-to-all: sent per rank, self-chunk included). Throws UsageError when
  // `allowed` leaves no enabled pair (naming --algo/--proto).
  [[nodiscard]] CollectiveCost cost(CollectiveOp op, std::int64_t bytes, const NcclChoice& allowed = {},
                                    Mode mode = Mode::fast) const;
  // dionsim's price of one given pair (nullopt where NCCL does not enable it).
  [[nodiscard]] std::optional<CollectiveCost> price(NcclFunc f, NcclAlgo a, NcclProto p, std::int64_t bytes) const;

  // The all-to-all's parts (tests and docs): latency, the DES's bandwidth time and the fill of
  // the p2p channels' step pipelines; and the protocol its p2p sends use.
  [[nodiscard]] double alltoall_latency_us(std::int64_t bytes) const;
  [[nodiscard]] double alltoall_transfer_us(std::int64_t bytes, Mode mode) const;
  [[nodiscard]] double alltoall_fill_us(std::int64_t bytes) const;
  // The transfer's floor set by the protocol's own rate (LL inside one NVLink domain; 0 else):
  // the all-to-all's transfer is the larger of this and the DES's.
  [[nodiscard]] double alltoall_protocol_floor_us(std::int64_t bytes) const;
  // The transfer's floor set by NCCL's p2p channels (Simple): each part of a send moves on one
  // channel at no more than one channel's copy rate, so a GPU sends at most active channels x
  // that rate (nccl_p2p_plan; the rate's source is in collective_model.cpp).
  [[nodiscard]] double alltoall_channel_floor_us(std::int64_t bytes) const;
  [[nodiscard]] NcclProto alltoall_protocol(std::int64_t bytes) const;
  // One p2p message of `bytes` from rank `src` to rank `dst` of this communicator (ncclSend /
  // ncclRecv in one group), priced as NCCL runs it: the peer's protocol (an NVLink peer LL up to
  // nccl_p2p_ll_threshold_bytes, a network peer Simple), a base and one hop, the DES's time for
  // the message on the fabric, at least its parts' channel copy rate (Simple) or LL's rate, and
  // inside one NVLink domain one step of the channels' pipeline. `duplex`: every GPU also
  // receives as much in the same call (nccl-tests' sendrecv), which halves LL's rate per GPU.
  // Throws UsageError for ranks outside the communicator.
  [[nodiscard]] CollectiveCost sendrecv(std::int64_t bytes, int src, int dst, Mode mode = Mode::fast,
                                        bool duplex = false) const;

 private:
  // The protocol of the sends to NVLink peers: LL up to nccl_p2p_ll_threshold_bytes per peer.
  [[nodiscard]] NcclProto alltoall_nvlink_protocol(std::int64_t bytes) const;
  // cost() before ModelOptions::time_factor_by_size_regime.
  [[nodiscard]] CollectiveCost modelled_cost(CollectiveOp op, std::int64_t bytes, const NcclChoice& allowed,
                                             Mode mode) const;
  topo::FabricSpec spec_;  // as the DES sees it: NCCL's NVLink rate, no per-message latency
  CommShape shape_;
  NcclTuningModel nccl_;
  ModelOptions options_;
  double spec_net_step_latency_us_ = 0;  // the fabric's own latency per network step (0: NCCL's constants)
  int hosts_;
  int gpus_per_node_;
  // The fabric for the all-to-all's DES, built on first use; transfer times cached per size.
  mutable std::mutex mutex_;
  mutable std::shared_ptr<const topo::Topology> topology_;
  mutable std::map<std::pair<int, std::int64_t>, double> transfer_cache_;
  // One message's DES time per (mode, bytes, src, dst).
  mutable std::map<std::tuple<int, std::int64_t, int, int>, double> message_cache_;
  [[nodiscard]] double message_transfer_us(std::int64_t bytes, int src, int dst, Mode mode) const;
  // Inside one NVLink domain, one more step of a p2p part's two-stage pipeline (the sender's copy
  // into the peer's buffer, the receiver's copy out), at the part's channel's share of the GPU's
  // NVLink when `channels` channels share it.
  [[nodiscard]] double p2p_step_fill_us(const NcclP2pPlan& plan, int channels) const;
  // One hop of a p2p message: NCCL's ring hop for the protocol over NVLink, the network step
  // (tree's with one rank per node: fully exposed) across domains.
  [[nodiscard]] double p2p_hop_us(bool network, NcclProto p) const;
  // One network step: the larger of NCCL's constant and the fabric's per-message latency (plus a
  // Simple completion); docs/simulator.md, "dionsim's price".
  [[nodiscard]] double network_hop_us(double nccl_hop_us, NcclProto p) const;
  // The fill of the chunk pipeline of trees and NVLS: (D - 1) chunk times, chunks as NCCL cuts
  // them (enqueue.cc calcCollChunking); 0 for rings and PAT.
  [[nodiscard]] double pipeline_fill_us(NcclAlgo a, NcclProto p, std::int64_t bytes, double algbw_GBps) const;
  // NVLS and NVLS Tree: the channels NCCL runs them on, its heads (the GPUs that reduce a slice
  // each), and the chunk it cuts a call of `bytes` into (enqueue.cc calcCollChunking).
  [[nodiscard]] int nvls_channels() const;
  [[nodiscard]] int nvls_heads() const;
  [[nodiscard]] std::int64_t nvls_chunk_bytes(NcclAlgo a, std::int64_t bytes) const;
  // NVLS's rates for a call of `bytes`, given the rate at NCCL's default chunk (where NCCL's NVLS
  // efficiency holds): every chunk step costs nvls_step_overhead_us beside its copy, a channel
  // copies no faster than one p2p channel, and it takes one step per head and loop.
  [[nodiscard]] NvlsRates nvls_rates(double rate_at_default_chunk_GBps, NcclAlgo a, std::int64_t bytes) const;
};

[[nodiscard]] NcclFunc to_nccl(CollectiveOp op);  // throws std::invalid_argument for all-to-all / p2p
// Whether NCCL_ALGO names a CollNet algorithm for `op` (CollNet/SHARP: not priced). NCCL_ALGO
// governs no p2p (all-to-all, send/recv), so for one any function's entry counts.
[[nodiscard]] bool names_collnet(const NcclChoice& choice, CollectiveOp op);

// NCCL's per-link NVLink rate over the nominal (topo.h): the achievable fraction of nvlink_GBps.
[[nodiscard]] double nccl_nvlink_fraction(GpuArch arch);

}  // namespace dionsim::sim
