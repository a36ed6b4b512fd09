#pragma once
// How long one collective of the training step takes on the fabric, for a uniform plan.
//
// Why a single duration per collective is exact here: every rank of a uniform plan issues the
// same collectives in the same order on its one collective stream (spec §1.7), so at any instant
// the fabric carries at most one collective, the same one on every rank. Its duration therefore
// depends only on its size and the fabric, never on the schedule — the step program asks once per
// collective and schedules streams with the answer (this is the "use symmetry" of DESIGN.md:
// one rank's timeline stands for all).
//
// SymmetricFabricTimer is the closed form of that one collective on a rail-optimized leaf/spine
// fat tree with max-min fair sharing (the same fabric topologies/ builds):
//  * all-to-all, w ranks, g per node, per-peer message m bytes, self-chunk a local copy:
//      intra = m·(g−1) / nvlink,  inter = m·(w−g) / nic · max(1, f_up·oversubscription)
//      t = max(intra, inter) + latency (NIC latency when w > g, else NVLink)
//    f_up = fraction of a rank's off-node flows that leave its leaf (rail layout: only the same
//    rail's GPUs on the same leaf stay inside it; node layout: every GPU of the leaf's other
//    nodes). Max-min on that fabric gives exactly this: every flow of a kind crosses one
//    bottleneck link shared only with flows of its kind (tests compare it with the engine).
//  * all-gather / reduce-scatter (NCCL ring): every rank receives (w−1) pieces of the per-rank
//    piece size over its slowest ring link (NIC when the ring leaves the node), one hop latency
//    per ring step: t = (w−1)·(piece / bw + latency).
//  * `alltoall_algbw_GBps` pins every all-to-all to size/algbw (nccl-tests algbw; size = bytes
//    sent per rank, self-chunk included) — the way to replay a measured cluster.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "sim/collective_model.hpp"
#include "sim/kernel_model.hpp"
#include "topologies/topology.hpp"

namespace dionsim::sim {

enum class StepCollective { all_to_all, all_gather, reduce_scatter };

struct CollectiveRequest {
  StepCollective kind = StepCollective::all_to_all;
  std::int64_t bytes_sent = 0;      // per rank, self-chunk included (all-gather: the input)
  std::int64_t bytes_per_peer = 0;  // one message (all-to-all chunk; ring piece for AG/RS)
};

// The NCCL algorithm and protocol a timer's answer stands for (empty when it has none).
struct CollectiveChoice {
  std::string algorithm;
  std::string protocol;
  std::string chosen_by;  // "nccl", a tuner plugin (CollectiveCost::chosen_by); empty for all-to-all
};

class CollectiveTimer {
 public:
  virtual ~CollectiveTimer() = default;
  [[nodiscard]] virtual DurationNs time_ns(const CollectiveRequest& request) const = 0;
  [[nodiscard]] virtual CollectiveChoice choice(const CollectiveRequest&) const { return {}; }
};

// The fabric as the step needs it (per GPU, per direction, GB = 1e9). Built from a topologies/
// FabricSpec or from explicit bandwidths.
struct StepFabric {
  std::string name;
  int nodes = 1;
  int gpus_per_node = 1;
  double nvlink_GBps = 0;  // effective (nominal × efficiency)
  double nvlink_latency_us = 0;
  double nic_GBps = 0;  // effective
  double nic_latency_us = 0;
  int nodes_per_leaf = 1;       // nodes sharing one leaf (per rail in the rail layout)
  bool rail_layout = true;      // rail-optimized NICs (GPU i of every node on leaf i); false = whole nodes per leaf
  double oversubscription = 1;  // leaf downlink / uplink capacity, >= 1
  std::optional<double> alltoall_algbw_GBps;  // pin all-to-alls (measured nccl-tests algbw)
};
// Throws UsageError naming the flag for non-positive sizes or bandwidths.
void validate(const StepFabric& fabric);

class SymmetricFabricTimer final : public CollectiveTimer {
 public:
  explicit SymmetricFabricTimer(StepFabric fabric);
  [[nodiscard]] DurationNs time_ns(const CollectiveRequest& request) const override;
  [[nodiscard]] const StepFabric& fabric() const { return fabric_; }
  // Fraction of a rank's off-node all-to-all flows that leave its leaf.
  [[nodiscard]] double leaf_exit_fraction() const;

 private:
  StepFabric fabric_;
};

// The StepFabric of a topologies/ FabricSpec at a size (effective bandwidths = nominal × efficiency).
[[nodiscard]] StepFabric step_fabric(const topo::FabricSpec& spec, int nodes, int gpus_per_node,
                                     std::optional<double> alltoall_algbw_GBps = std::nullopt);

// The collective model (sim/collective_model.hpp), the same one `dionsim collective` prints:
// each collective gets the algorithm and protocol NCCL would run and dionsim's time for it;
// all-to-alls are grouped p2p whose transfer runs through the max-min DES on the topology (fast
// mode: flow classes, any shape, the same time `collective` prints). `alltoall_algbw_GBps` pins
// all-to-alls as before.
// FSDP's all-gathers / reduce-scatters in `whatif`'s forward/backward are priced here too: a ring
// crosses the node's G NICs at once, as NCCL's does. Results are cached per (kind, bytes).
class FabricCollectiveTimer final : public CollectiveTimer {
 public:
  FabricCollectiveTimer(const topo::FabricSpec& spec, int nodes, int gpus_per_node,
                        std::optional<double> alltoall_algbw_GBps, ModelOptions options = {});
  [[nodiscard]] DurationNs time_ns(const CollectiveRequest& request) const override;
  [[nodiscard]] CollectiveChoice choice(const CollectiveRequest& request) const override;
  [[nodiscard]] const CollectiveModel& model() const { return model_; }
  // The model's call for a request: the op and the nccl-tests size.
  [[nodiscard]] std::pair<CollectiveOp, std::int64_t> model_call(const CollectiveRequest& request) const;

 private:
  struct Answer {
    DurationNs ns = 0;
    CollectiveChoice choice;
  };
  const Answer& answer(const CollectiveRequest& request) const;
  std::int64_t world_ = 0;  // ranks: nodes x GPUs per node
  SymmetricFabricTimer closed_form_;
  CollectiveModel model_;
  mutable std::map<std::pair<int, std::int64_t>, Answer> cache_;
};

// One call of the model in whatif's integer time: rounded up (never early), the one rounding
// FabricCollectiveTimer and the HSDP replica all-reduce share.
[[nodiscard]] DurationNs model_time_ns(const CollectiveCost& cost);

// HSDP's replica communicator: the world/G ranks that hold one shard index, one in each shard
// group of G consecutive ranks of a world of `nodes` hosts × `gpus_per_node`, as a fabric of its
// own: gpus_per_node/G of them share a host when G divides it (else one per host), and the NVLink
// domain holds domain/G of them (whole hosts; every one alone when G fills a domain). Every shard
// index runs its all-reduce at once on disjoint GPUs and NICs, so one communicator stands for all
// (exact on non-blocking fabrics). `collective --op allreduce --nodes N --gpus-per-node g` with
// this N and g on a fabric of this NVLink domain gives the same time.
struct ReplicaComm {
  topo::FabricSpec spec;  // gpus_per_host and gpus_per_nvlink_domain of the communicator
  int nodes = 1;          // hosts
  int gpus_per_node = 1;  // replicas per host
};
[[nodiscard]] ReplicaComm replica_comm(const topo::FabricSpec& fabric, int nodes, int gpus_per_node,
                                       std::int64_t shard_group);

}  // namespace dionsim::sim
