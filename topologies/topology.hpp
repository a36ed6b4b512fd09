#pragma once
// Cluster fabrics as Boost.Graph graphs: nodes of G GPUs on an NVSwitch (per-GPU NVLink
// bandwidth per direction), one NIC per GPU into a two-level leaf/spine fat tree with an
// oversubscription ratio, NICs attached rail-optimized (GPU i of every node on rail leaf i) or
// per node (whole nodes on one leaf). Every directed edge is a link with a capacity; routing is
// deterministic and minimal.
//
// The spine layer is modelled as one aggregate core: each leaf has one uplink and one downlink
// whose capacity is the leaf's total downlink capacity divided by the oversubscription ratio.
// With ECMP spreading flows over all spines this is the usual fluid approximation; it is exact
// for the uniform collectives dionsim simulates.
#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace dionsim::topo {

enum class Layout { rail, node };  // how NICs attach to leaves

// Per-GPU fabric parameters, independent of the cluster's size. Bandwidths are per direction.
struct FabricSpec {
  std::string name;               // preset name or topology file, for output
  double nvlink_GBps = 0;         // per GPU into the NVSwitch, GB = 1e9
  double nvlink_latency_us = 0;   // per message inside a node
  double nvlink_efficiency = 1;   // achievable fraction of nvlink_GBps, (0, 1]
  double nic_GBps = 0;            // per GPU (one NIC each)
  double nic_latency_us = 0;      // per message between nodes
  double nic_efficiency = 1;      // achievable fraction of nic_GBps, (0, 1]
  Layout layout = Layout::rail;
  int leaf_radix = 32;            // NIC ports per leaf switch (downlinks)
  double oversubscription = 1;    // leaf downlink / uplink capacity, >= 1 (1 = non-blocking)
};

// Names of the built-in presets, and the preset itself (throws UsageError for an unknown one,
// naming `flag`). Numbers and sources: docs/simulator.md and presets.cpp.
[[nodiscard]] std::vector<std::string> preset_names();
[[nodiscard]] FabricSpec preset(const std::string& name, const std::string& flag = "--fabric");

// Checks every field; throws InputError (or UsageError when `as_usage`) naming `where`.
void validate(const FabricSpec& spec, const std::string& where, bool as_usage);

enum class VertexKind { gpu, nvswitch, leaf, spine };
enum class LinkKind { nvlink_up, nvlink_down, nic_up, nic_down, leaf_up, leaf_down };
[[nodiscard]] const char* to_string(LinkKind kind);
[[nodiscard]] const char* to_string(Layout layout);

struct VertexProps {
  VertexKind kind = VertexKind::gpu;
  int index = 0;  // rank, node, leaf
};
struct EdgeProps {
  LinkKind kind = LinkKind::nvlink_up;
  double capacity_Bps = 0;  // effective: nominal x efficiency
  std::uint32_t id = 0;     // dense link id, 0 .. link_count()-1
};
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, VertexProps, EdgeProps>;

using LinkIndex = std::uint32_t;

class Topology {
 public:
  // nodes >= 1, gpus_per_node >= 1; spec validated (throws UsageError naming the flag context).
  Topology(const FabricSpec& spec, int nodes, int gpus_per_node);

  [[nodiscard]] const FabricSpec& spec() const { return spec_; }
  [[nodiscard]] int nodes() const { return nodes_; }
  [[nodiscard]] int gpus_per_node() const { return gpus_per_node_; }
  [[nodiscard]] int ranks() const { return nodes_ * gpus_per_node_; }
  [[nodiscard]] int leaves() const { return leaves_; }
  [[nodiscard]] int node_of(int rank) const { return rank / gpus_per_node_; }
  [[nodiscard]] int local_of(int rank) const { return rank % gpus_per_node_; }
  [[nodiscard]] int leaf_of(int rank) const;
  // Nodes attached to one leaf (per rail in the rail layout).
  [[nodiscard]] int nodes_per_leaf() const { return nodes_per_leaf_; }

  [[nodiscard]] const Graph& graph() const { return graph_; }
  [[nodiscard]] std::size_t link_count() const { return links_.size(); }
  [[nodiscard]] LinkKind link_kind(LinkIndex l) const { return links_[l].kind; }
  [[nodiscard]] double link_capacity_Bps(LinkIndex l) const { return links_[l].capacity_Bps; }

  // Links from src to dst in order (empty for src == dst: a local copy), at most four.
  [[nodiscard]] std::vector<LinkIndex> route(int src, int dst) const;
  // Latency in picoseconds a message from src to dst pays.
  [[nodiscard]] std::int64_t latency_ps(int src, int dst) const;

  // True when every leaf is attached to the same number of nodes: the fabric's automorphisms
  // then act transitively on ranks and on each link kind (what the fast collective path needs).
  [[nodiscard]] bool symmetric() const;

  // GraphViz; edges labelled with kind and GB/s.
  void write_dot(std::ostream& out) const;

 private:
  LinkIndex add_link(std::size_t from, std::size_t to, LinkKind kind, double capacity_Bps);

  FabricSpec spec_;
  int nodes_ = 0;
  int gpus_per_node_ = 0;
  int nodes_per_leaf_ = 0;
  int leaves_ = 0;
  Graph graph_;
  std::vector<EdgeProps> links_;  // by id
  std::vector<LinkIndex> nvlink_up_, nvlink_down_, nic_up_, nic_down_;  // by rank
  std::vector<LinkIndex> leaf_up_, leaf_down_;                          // by leaf
};

}  // namespace dionsim::topo
