#pragma once
// Cluster fabrics as Boost.Graph graphs. Three things are separate:
//  * the host (a server or compute tray): `gpus_per_host` GPUs; its NICs attach to the network;
//  * the NVLink domain: `gpus_per_nvlink_domain` GPUs on one non-blocking NVSwitch fabric (per-GPU
//    NVLink bandwidth per direction) — one host on HGX, 18 trays of 4 on an NVL72 rack;
//  * the scale-out network (InfiniBand, RoCE or EFA): one NIC port per GPU (a host's NICs divided
//    over its GPUs) into a two-level leaf/spine fat tree with an oversubscription ratio, NICs
//    attached rail-optimized (GPU i of every host on rail leaf i) or per host (whole hosts on one
//    leaf), optionally split over several identical planes.
// Every directed edge is a link with a capacity; routing is deterministic and minimal: inside an
// NVLink domain over NVLink only, between domains over the NICs.
//
// The spine layer is modelled as one aggregate core: each leaf has one uplink and one downlink
// whose capacity is the leaf's total downlink capacity divided by the oversubscription ratio.
// With ECMP spreading flows over all spines this is the usual fluid approximation; it is exact
// for the uniform collectives dionsim simulates. A multi-plane network (each NIC split into
// `planes` ports of nic/planes, one per plane, planes identical) carries 1/planes of every flow on
// each plane; max-min on identical disjoint planes is the single plane scaled, so the graph has
// one plane whose leaves take `leaf_radix` ports — the radix of a switch at the plane's speed.
#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace dionsim::topo {

enum class Layout { rail, node };  // how NICs attach to leaves: rail-optimized, or whole hosts per leaf
enum class Network { infiniband, roce, efa };  // the scale-out network's kind

// The NCCL tuner plugin the fabric's software stack loads (sim/aws_ofi_tuner.hpp): none (NCCL's own
// choice), or aws-ofi-nccl's region tuner of p5 / p5e, of p5en, of p6-b200 or of p6-b300.
enum class TunerPlugin { none, aws_ofi_p5, aws_ofi_p5en, aws_ofi_p6, aws_ofi_p6_b300 };
[[nodiscard]] const char* to_string(TunerPlugin t);

// Per-GPU fabric parameters, independent of the cluster's size. Bandwidths are per direction.
struct FabricSpec {
  std::string name;                 // preset name or topology file, for output
  int gpus_per_host = 8;            // GPUs of one server / compute tray (rails in the rail layout)
  int gpus_per_nvlink_domain = 8;   // GPUs on one NVSwitch fabric; a multiple of gpus_per_host
  int nvlink_generation = 4;        // 3 (A100), 4 (H100/H200), 5 (B200/B300/GB200/GB300); output only
  double nvlink_GBps = 0;           // per GPU into the NVSwitch fabric, GB = 1e9
  double nvlink_latency_us = 0;     // per message inside an NVLink domain
  double nvlink_efficiency = 1;     // achievable fraction of nvlink_GBps, (0, 1]
  Network network = Network::infiniband;
  std::string nic;                  // e.g. "ConnectX-7 NDR 400 Gb/s"; output only
  double nic_GBps = 0;              // per GPU: a host's NIC bandwidth / gpus_per_host
  double nic_latency_us = 0;        // per message between NVLink domains (the DES and whatif's closed form)
  // The collective model's network step: NCCL's per-protocol constant, or this per-message
  // latency where it is larger (EFA through libfabric); 0 = NCCL's constants (InfiniBand, RoCE).
  double net_step_latency_us = 0;
  double nic_efficiency = 1;        // achievable fraction of nic_GBps, (0, 1]
  int planes = 1;                   // identical scale-out planes each NIC is split over (>= 1)
  Layout layout = Layout::rail;
  int leaf_radix = 32;              // downlink ports per leaf switch, at the plane's speed
  double oversubscription = 1;      // leaf downlink / uplink capacity, >= 1 (1 = non-blocking)
  TunerPlugin tuner_plugin = TunerPlugin::none;
  // NVLink SHARP multicast usable. NCCL runs NVLS / NVLS Tree only where the driver reports
  // multicast support (transport/nvls.cc, NCCL_NVLS_ENABLE=2); a container without it (or
  // NCCL_NVLS_ENABLE=0) runs rings and trees on the same switches.
  bool nvls_multicast = true;
  friend bool operator==(const FabricSpec&, const FabricSpec&) = default;  // every field, exactly
};

// The spec with hosts of `gpus_per_host` GPUs (e.g. 2 GPUs of an 8-GPU node in use, or a
// --gpus-per-node flag): where the NVLink domain is the host (HGX), it shrinks with it; a
// multi-host domain (NVL72) keeps its size, less what does not make a whole host (16-GPU hosts:
// 64 of 72); a node-layout leaf keeps the GPU ports whole hosts fill (32 ports: ten 3-GPU
// hosts). Validated by validate().
[[nodiscard]] FabricSpec with_gpus_per_host(FabricSpec spec, int gpus_per_host);

// Names of the built-in presets, and the preset itself (throws UsageError for an unknown one,
// naming `flag`). Numbers and sources: docs/simulator.md and presets.cpp. A preset whose NVLink
// domain spans hosts takes "@<GPUs>": a job on that many GPUs of each rack ("gb200-nvl72@64",
// 16 of 18 trays), the domain it sees.
[[nodiscard]] std::vector<std::string> preset_names();
[[nodiscard]] FabricSpec preset(const std::string& name, const std::string& flag = "--fabric");

// Checks every field; throws InputError (or UsageError when `as_usage`) naming `where`, the
// field, the value and what was expected: positive finite bandwidths, efficiencies in (0, 1],
// finite latencies >= 0, a host no larger than its NVLink domain and dividing it, planes >= 1 …
void validate(const FabricSpec& spec, const std::string& where, bool as_usage);

[[nodiscard]] const char* to_string(Network network);
[[nodiscard]] std::string describe(const FabricSpec& spec);  // one line for logs and --help

enum class VertexKind { gpu, nvswitch, leaf, spine };
enum class LinkKind { nvlink_up, nvlink_down, nic_up, nic_down, leaf_up, leaf_down };
[[nodiscard]] const char* to_string(LinkKind kind);
[[nodiscard]] const char* to_string(Layout layout);

struct VertexProps {
  VertexKind kind = VertexKind::gpu;
  int index = 0;  // rank, NVLink domain, leaf
};
struct EdgeProps {
  LinkKind kind = LinkKind::nvlink_up;
  double capacity_Bps = 0;  // effective: nominal x efficiency
  std::uint32_t id = 0;     // dense link id, 0 .. link_count()-1
};
// The edge list a vector (Boost's default is a std::list, one node per edge): building and
// freeing the 8192-GPU fabrics of the 8192-GPU what-if took 0.34-0.41 s with it, 0.20-0.26 s
// without (both with shared_topology).
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, VertexProps, EdgeProps,
                                    boost::no_property, boost::vecS>;

using LinkIndex = std::uint32_t;

class Topology {
 public:
  // `hosts` >= 1 hosts of spec.gpus_per_host GPUs; ranks fill hosts in order, hosts fill NVLink
  // domains in order (the last domain may be partial: 64 GPUs of an NVL72 are one domain).
  // The spec is validated (throws UsageError naming the field).
  Topology(const FabricSpec& spec, int hosts);
  // The same with hosts of `gpus_per_node` GPUs: Topology(with_gpus_per_host(spec, g), nodes).
  Topology(const FabricSpec& spec, int nodes, int gpus_per_node);

  [[nodiscard]] const FabricSpec& spec() const { return spec_; }
  [[nodiscard]] int nodes() const { return hosts_; }  // hosts
  [[nodiscard]] int hosts() const { return hosts_; }
  [[nodiscard]] int gpus_per_node() const { return spec_.gpus_per_host; }
  [[nodiscard]] int gpus_per_host() const { return spec_.gpus_per_host; }
  [[nodiscard]] int gpus_per_domain() const { return spec_.gpus_per_nvlink_domain; }
  [[nodiscard]] int ranks() const { return hosts_ * spec_.gpus_per_host; }
  [[nodiscard]] int domains() const { return domains_; }
  [[nodiscard]] int leaves() const { return leaves_; }
  [[nodiscard]] int node_of(int rank) const { return rank / spec_.gpus_per_host; }  // host
  [[nodiscard]] int host_of(int rank) const { return rank / spec_.gpus_per_host; }
  [[nodiscard]] int local_of(int rank) const { return rank % spec_.gpus_per_host; }  // rail
  [[nodiscard]] int domain_of(int rank) const { return rank / spec_.gpus_per_nvlink_domain; }
  // GPUs of the domain `rank` is in (smaller than gpus_per_domain() for a partial last domain).
  [[nodiscard]] int domain_size_of(int rank) const;
  [[nodiscard]] int leaf_of(int rank) const;
  // Hosts attached to one leaf (per rail in the rail layout).
  [[nodiscard]] int nodes_per_leaf() const { return nodes_per_leaf_; }

  [[nodiscard]] const Graph& graph() const { return graph_; }
  [[nodiscard]] std::size_t link_count() const { return links_.size(); }
  [[nodiscard]] LinkKind link_kind(LinkIndex l) const { return links_[l].kind; }
  [[nodiscard]] double link_capacity_Bps(LinkIndex l) const { return links_[l].capacity_Bps; }
  // The rank a per-GPU link (NVLink or NIC, up or down) belongs to, the leaf of a leaf link.
  [[nodiscard]] int link_owner(LinkIndex l) const { return link_owner_[l]; }

  // Links from src to dst in order (empty for src == dst: a local copy), at most four: NVLink
  // up/down inside a domain, else NIC up, [leaf up, leaf down,] NIC down.
  [[nodiscard]] std::vector<LinkIndex> route(int src, int dst) const;
  [[nodiscard]] bool same_domain(int a, int b) const { return domain_of(a) == domain_of(b); }
  // Latency in picoseconds a message from src to dst pays.
  [[nodiscard]] std::int64_t latency_ps(int src, int dst) const;

  // True when every leaf is attached to the same number of hosts and every NVLink domain holds
  // the same number of GPUs: the fabric's automorphisms then act transitively on ranks and on
  // each link kind. The fast collective path needed it until session 16 (its flow classes now
  // take any shape); the tests use it to show their sweeps reach shapes where it is false.
  [[nodiscard]] bool symmetric() const;

  // GraphViz; edges labelled with kind and GB/s.
  void write_dot(std::ostream& out) const;

 private:
  LinkIndex add_link(std::size_t from, std::size_t to, LinkKind kind, double capacity_Bps, int owner);

  FabricSpec spec_;
  int hosts_ = 0;
  int domains_ = 0;
  int nodes_per_leaf_ = 0;
  int leaves_ = 0;
  Graph graph_;
  std::vector<EdgeProps> links_;  // by id
  std::vector<int> link_owner_;   // by id: rank or leaf
  std::vector<LinkIndex> nvlink_up_, nvlink_down_, nic_up_, nic_down_;  // by rank
  std::vector<LinkIndex> leaf_up_, leaf_down_;                          // by leaf
};

// A built fabric for (spec, nodes, gpus_per_node), shared: the last few built are kept, so a
// what-if that re-runs one configuration (its interval sides) or prices every collective of a
// step on one fabric builds its 8192-GPU graph once. Thread-safe; a Topology is immutable.
[[nodiscard]] std::shared_ptr<const Topology> shared_topology(const FabricSpec& spec, int nodes, int gpus_per_node);

}  // namespace dionsim::topo
