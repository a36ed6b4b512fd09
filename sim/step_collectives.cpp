#include "sim/step_collectives.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "sim/collectives.hpp"

namespace dionsim::sim {

void validate(const StepFabric& f) {
  if (f.nodes < 1) {
    throw_bad_usage("--nodes", std::to_string(f.nodes), "a positive integer");
  }
  if (f.gpus_per_node < 1) {
    throw_bad_usage("--gpus-per-node", std::to_string(f.gpus_per_node), "a positive integer");
  }
  if (!(f.nvlink_GBps > 0.0)) {
    throw_bad_usage("--nvlink-GBps", std::to_string(f.nvlink_GBps), "a positive bandwidth in GB/s");
  }
  if (f.nodes > 1 && !(f.nic_GBps > 0.0)) {
    throw_bad_usage("--nic-GBps", std::to_string(f.nic_GBps), "a positive bandwidth in GB/s");
  }
  if (!(f.nvlink_latency_us >= 0.0) || !(f.nic_latency_us >= 0.0)) {
    throw_bad_usage("--latency-us", std::to_string(std::min(f.nvlink_latency_us, f.nic_latency_us)),
                    "a latency >= 0 µs");
  }
  if (f.nodes_per_leaf < 1) {
    throw_bad_usage("--fabric", std::to_string(f.nodes_per_leaf) + " nodes per leaf", "at least 1");
  }
  if (!(f.oversubscription >= 1.0)) {
    throw_bad_usage("--oversubscription", std::to_string(f.oversubscription), "a ratio >= 1");
  }
  if (f.alltoall_algbw_GBps && !(*f.alltoall_algbw_GBps > 0.0)) {
    throw_bad_usage("--alltoall-algbw-GBps", std::to_string(*f.alltoall_algbw_GBps), "a positive bandwidth in GB/s");
  }
}

SymmetricFabricTimer::SymmetricFabricTimer(StepFabric fabric) : fabric_(std::move(fabric)) { validate(fabric_); }

double SymmetricFabricTimer::leaf_exit_fraction() const {
  const std::int64_t g = fabric_.gpus_per_node;
  const std::int64_t w = g * fabric_.nodes;
  if (w == g) {
    return 0.0;
  }
  const std::int64_t same_leaf_nodes = std::min(fabric_.nodes_per_leaf, fabric_.nodes);
  // Off-node peers on the same leaf: rail layout, the same local index on the leaf's other nodes;
  // node layout, every GPU of the leaf's other nodes.
  const std::int64_t peers_per_node = fabric_.rail_layout ? 1 : g;
  return 1.0 - static_cast<double>((same_leaf_nodes - 1) * peers_per_node) / static_cast<double>(w - g);
}

DurationNs SymmetricFabricTimer::time_ns(const CollectiveRequest& r) const {
  const auto& f = fabric_;
  const std::int64_t g = f.gpus_per_node;
  const std::int64_t w = g * f.nodes;
  if (w <= 1 || r.bytes_sent <= 0) {
    return 0;  // one rank: the collective is a local copy (its HBM cost is in the kernels)
  }
  const double nv_Bps = f.nvlink_GBps * 1e9;
  const double nic_Bps = f.nic_GBps * 1e9;
  const bool multi_node = f.nodes > 1;
  const double latency_s = (multi_node ? f.nic_latency_us : f.nvlink_latency_us) * 1e-6;
  double seconds = 0.0;
  switch (r.kind) {
    case StepCollective::all_to_all: {
      if (f.alltoall_algbw_GBps) {
        seconds = static_cast<double>(r.bytes_sent) / (*f.alltoall_algbw_GBps * 1e9);
        break;
      }
      const double m = static_cast<double>(r.bytes_per_peer);
      const double intra = m * static_cast<double>(g - 1) / nv_Bps;
      const double inter = multi_node ? m * static_cast<double>(w - g) / nic_Bps *
                                            std::max(1.0, leaf_exit_fraction() * f.oversubscription)
                                      : 0.0;
      seconds = std::max(intra, inter) + latency_s;
      break;
    }
    case StepCollective::all_gather:
    case StepCollective::reduce_scatter: {
      // Ring: the slowest link of the ring is the NIC once it leaves the node. With
      // oversubscription the ring's cross-leaf hops share the uplink: one flow per rank of a
      // rail leaf crosses it only at the ring's leaf boundaries, so it is not the bottleneck.
      const double bw = multi_node ? std::min(nic_Bps, nv_Bps) : nv_Bps;
      const double piece = static_cast<double>(r.bytes_per_peer);
      seconds = static_cast<double>(w - 1) * (piece / bw + latency_s);
      break;
    }
  }
  return std::llround(seconds * 1e9);
}

StepFabric step_fabric(const topo::FabricSpec& spec, int nodes, int gpus_per_node,
                       std::optional<double> alltoall_algbw_GBps) {
  StepFabric f;
  f.name = spec.name;
  // The closed form's NVLink island is the NVLink domain (an NVL72 rack), not the host; a world
  // of whole domains (or within one) is what whatif accepts (issue 17).
  const int domain = std::min(nodes * gpus_per_node, topo::with_gpus_per_host(spec, gpus_per_node).gpus_per_nvlink_domain);
  f.nodes = nodes * gpus_per_node / domain;
  f.gpus_per_node = domain;
  f.nvlink_GBps = spec.nvlink_GBps * spec.nvlink_efficiency;
  f.nvlink_latency_us = spec.nvlink_latency_us;
  f.nic_GBps = spec.nic_GBps * spec.nic_efficiency;
  f.nic_latency_us = spec.nic_latency_us;
  f.rail_layout = spec.layout == topo::Layout::rail;
  f.nodes_per_leaf = std::max(1, (f.rail_layout ? spec.leaf_radix * gpus_per_node : spec.leaf_radix) / domain);
  f.oversubscription = spec.oversubscription;
  f.alltoall_algbw_GBps = alltoall_algbw_GBps;
  return f;
}


FabricCollectiveTimer::FabricCollectiveTimer(const topo::FabricSpec& spec, int nodes, int gpus_per_node,
                                             std::optional<double> alltoall_algbw_GBps, ModelOptions options)
    : world_(static_cast<std::int64_t>(nodes) * gpus_per_node),
      closed_form_(step_fabric(spec, nodes, gpus_per_node, alltoall_algbw_GBps)),
      model_(spec, nodes, gpus_per_node, options) {}

std::pair<CollectiveOp, std::int64_t> FabricCollectiveTimer::model_call(const CollectiveRequest& r) const {
  switch (r.kind) {
    case StepCollective::all_to_all: return {CollectiveOp::alltoall, r.bytes_sent};  // sent per rank, self-chunk included
    case StepCollective::all_gather: return {CollectiveOp::allgather, r.bytes_sent * world_};  // the output
    case StepCollective::reduce_scatter: return {CollectiveOp::reducescatter, r.bytes_sent};  // the input
  }
  return {CollectiveOp::alltoall, r.bytes_sent};
}

const FabricCollectiveTimer::Answer& FabricCollectiveTimer::answer(const CollectiveRequest& r) const {
  const auto key = std::make_pair(static_cast<int>(r.kind), r.bytes_sent);
  if (const auto it = cache_.find(key); it != cache_.end()) return it->second;
  Answer a;
  if (world_ <= 1 || r.bytes_sent <= 0) {
    a.ns = 0;
  } else if (r.kind == StepCollective::all_to_all && closed_form_.fabric().alltoall_algbw_GBps) {
    a.ns = closed_form_.time_ns(r);  // pinned to the measured algbw
    a.choice = {"p2p", "measured", ""};
  } else {
    const auto [op, bytes] = model_call(r);
    const CollectiveCost c = model_.cost(op, bytes);
    a.choice = {c.algorithm, c.protocol, c.chosen_by};
    a.ns = model_time_ns(c);  // round up: never early
  }
  return cache_.emplace(key, std::move(a)).first->second;
}

DurationNs FabricCollectiveTimer::time_ns(const CollectiveRequest& r) const { return answer(r).ns; }

CollectiveChoice FabricCollectiveTimer::choice(const CollectiveRequest& r) const { return answer(r).choice; }

DurationNs model_time_ns(const CollectiveCost& cost) { return static_cast<DurationNs>(std::ceil(cost.time_us * 1e3)); }

ReplicaComm replica_comm(const topo::FabricSpec& fabric, int nodes, int gpus_per_node, std::int64_t shard_group) {
  const topo::FabricSpec spec = topo::with_gpus_per_host(fabric, gpus_per_node);
  const std::int64_t g = shard_group;
  const std::int64_t world = static_cast<std::int64_t>(nodes) * gpus_per_node;
  if (g < 1 || world % g != 0 || (g % gpus_per_node != 0 && gpus_per_node % g != 0)) {
    throw std::invalid_argument("replica_comm: shard group " + std::to_string(g) + " neither whole hosts nor a divisor of one");
  }
  const std::int64_t per_host = g < gpus_per_node ? gpus_per_node / g : 1;
  const std::int64_t domain = spec.gpus_per_nvlink_domain;
  // A domain that G does not divide holds an uneven share of the replicas; NCCL's model counts
  // ranks per node as the communicator's average, the whole-host floor is that here.
  const std::int64_t per_domain = g < domain ? std::max(per_host, domain / g / per_host * per_host) : per_host;
  ReplicaComm c;
  c.spec = spec;
  c.spec.gpus_per_host = static_cast<int>(per_host);
  c.spec.gpus_per_nvlink_domain = static_cast<int>(per_domain);
  c.gpus_per_node = static_cast<int>(per_host);
  c.nodes = static_cast<int>(world / g / per_host);
  return c;
}

}  // namespace dionsim::sim
