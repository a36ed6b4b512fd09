#pragma once
// NCCL's own tuning model (src/graph/tuning.cc of NCCL 2.28.3: ncclTopoTuneModel and
// ncclTopoGetAlgoTime), rewritten from its published constants and rules, for a communicator
// described by its nominal hardware. It is used twice:
//  * to choose the algorithm and protocol NCCL would run for a call (NCCL picks the lowest
//    predicted time among the enabled pairs; NCCL_ALGO / NCCL_PROTO restrict the set), which
//    dionsim's own cost model (sim/collective_model.hpp) then prices;
//  * as the baseline `collective --nccl-model` and `validate-collectives` print beside dionsim.
//
// NCCL computes its inputs (channels, per-channel bandwidth) by searching the machine's topology
// (src/graph/search.cc); dionsim has no PCI tree, so `nccl_graphs` approximates that search from
// the nominal link bandwidths with NCCL's own speed tables and channel-duplication rule (see
// docs/simulator.md, "NCCL's tuning model"). CollNet / SHARP is out of scope.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace dionsim::sim {

enum class GpuArch { volta, ampere, hopper, blackwell };
enum class NetKind { ib, roce, efa };
enum class NcclFunc { allgather, reducescatter, allreduce };
enum class NcclAlgo { ring, tree, nvls, nvls_tree, pat };
enum class NcclProto { ll, ll128, simple };
inline constexpr int kNcclFuncs = 3;
inline constexpr int kNcclAlgos = 5;
inline constexpr int kNcclProtos = 3;
// NCCL_MAX_NVLS_ARITY (device.h, 2.19-2.30): NVLS heads per NVLink domain; NVLS all-gather and
// reduce-scatter need every local rank a head.
inline constexpr int kNcclMaxNvlsArity = 32;

// floor(log2 n) for n >= 1, -1 for n <= 0: the tree depths and size bins of the tuning model.
[[nodiscard]] int floor_log2(std::int64_t n);
[[nodiscard]] const char* to_string(GpuArch a);
[[nodiscard]] const char* to_string(NetKind k);
[[nodiscard]] const char* to_string(NcclFunc f);
[[nodiscard]] const char* to_string(NcclAlgo a);
[[nodiscard]] const char* to_string(NcclProto p);

// A communicator as NCCL sees it: `nodes` = NVLink domains (an NVL72 rack with MNNVL is one
// node of 72 local ranks), every GPU of a node on one NVSwitch fabric.
struct CommShape {
  GpuArch arch = GpuArch::hopper;
  int nodes = 1;
  int ranks_per_node = 1;
  double nvlink_GBps = 0;   // nominal, per GPU and direction
  double nic_GBps = 0;      // nominal line rate of one NIC, per direction
  int nics_per_node = 0;    // distinct NICs of a node the rings can use
  NetKind net = NetKind::ib;
  bool nvswitch_multicast = true;  // NVLS possible (Hopper+ NVSwitch systems)
  double net_overhead_us = 1.0;    // getNetOverhead: 1 us (Intel / Arm), 2 us (AMD hosts)
  [[nodiscard]] int ranks() const { return nodes * ranks_per_node; }
};

// What NCCL's topology search yields for one algorithm's graph (approximated).
struct NcclGraph {
  int channels = 0;
  double bw_intra_GBps = 0;  // per channel
  double bw_inter_GBps = 0;  // per channel
};

// Which pairs a run may use: NCCL_ALGO / NCCL_PROTO as NCCL >= 2.24 reads them (tuning.cc
// parseList), per function; every pair on is NCCL's default.
struct NcclChoice {
  struct Enabled {
    std::array<bool, kNcclAlgos> algos{true, true, true, true, true};
    std::array<bool, kNcclProtos> protos{true, true, true};
    // NCCL_ALGO names CollNetDirect or CollNetChain for the function: NCCL would run CollNet
    // (SHARP) where the fabric has it, which the model does not price.
    bool names_collnet = false;
  };
  std::array<Enabled, kNcclFuncs> functions{};

  // NCCL's syntax, case-insensitive: a comma list ("ring,tree"), '^' first to take the names out
  // ("^tree"), and after the first entry ';'-separated per-function entries, each with its
  // function's prefix ("ll,simple;allreduce:^ll"); Broadcast and Reduce prefixes are accepted and
  // apply to nothing dionsim prices. "auto" or empty: NCCL's default. Throws UsageError naming
  // `flag` for what NCCL would refuse (an unknown name or prefix, an unprefixed later entry).
  static NcclChoice parse(const std::string& algos, const std::string& protos, const std::string& algo_flag = "--algo",
                          const std::string& proto_flag = "--proto");
  [[nodiscard]] const Enabled& of(NcclFunc f) const { return functions[static_cast<std::size_t>(f)]; }
  // Whether NCCL_ALGO / NCCL_PROTO took anything out of NCCL's default set for `f`.
  [[nodiscard]] bool restricts(NcclFunc f) const;
  // Whether any function's entry names a CollNet algorithm.
  [[nodiscard]] bool names_collnet() const;
};

struct NcclPrediction {
  NcclAlgo algo = NcclAlgo::ring;
  NcclProto proto = NcclProto::simple;
  double latency_us = 0;  // comm->latencies (after the size-dependent corrections)
  double bw_GBps = 0;     // comm->bandwidths: algorithm bandwidth on nBytes
  double time_us = 0;     // latency + nBytes / bw
};

class NcclTuningModel {
 public:
  explicit NcclTuningModel(const CommShape& shape);  // throws UsageError for a bad shape

  [[nodiscard]] const CommShape& shape() const { return shape_; }
  [[nodiscard]] const NcclGraph& graph(NcclAlgo a) const { return graphs_[static_cast<int>(a)]; }
  // Whether NCCL would consider (func, algo, proto) at all (bandwidth > 0 after its enable rules).
  [[nodiscard]] bool enabled(NcclFunc f, NcclAlgo a, NcclProto p) const;
  // The model's time for one pair; nullopt where NCCL disables it. `bytes` = nccl-tests size
  // (all-gather: the gathered output; reduce-scatter and all-reduce: the input).
  [[nodiscard]] std::optional<NcclPrediction> predict(NcclFunc f, NcclAlgo a, NcclProto p, std::int64_t bytes) const;
  // comm->latencies and comm->bandwidths as set at init (before the size-dependent corrections).
  [[nodiscard]] double base_latency_us(NcclFunc f, NcclAlgo a, NcclProto p) const {
    return latency_[static_cast<int>(f)][static_cast<int>(a)][static_cast<int>(p)];
  }
  [[nodiscard]] double base_bandwidth_GBps(NcclFunc f, NcclAlgo a, NcclProto p) const {
    return bandwidth_[static_cast<int>(f)][static_cast<int>(a)][static_cast<int>(p)];
  }
  // NCCL's choice among the allowed, enabled pairs: the lowest time. nullopt if none is left.
  [[nodiscard]] std::optional<NcclPrediction> choose(NcclFunc f, std::int64_t bytes, const NcclChoice& allowed = {}) const;

 private:
  CommShape shape_;
  std::array<NcclGraph, kNcclAlgos> graphs_{};
  double latency_[3][kNcclAlgos][kNcclProtos]{};
  double bandwidth_[3][kNcclAlgos][kNcclProtos]{};
};

// tuning.cc constants that dionsim's own model reuses (docs/simulator.md lists them).
[[nodiscard]] double nccl_hw_latency_us(bool network, NcclAlgo a, NcclProto p);
[[nodiscard]] double nccl_base_latency_us(NcclAlgo a, NcclProto p);
[[nodiscard]] double nccl_ll_max_bw_GBps(const CommShape& shape);
[[nodiscard]] double nccl_ll128_ring_per_channel_GBps(GpuArch arch);
[[nodiscard]] double nccl_ll128_tree_per_channel_GBps(const CommShape& shape);
[[nodiscard]] double nccl_nvls_efficiency(GpuArch arch);
// The tree all-reduce's measured efficiency: 0.92, x 0.85 on sm90+ (whose search degrades the
// balanced tree to the plain tree pattern).
[[nodiscard]] double nccl_tree_efficiency(GpuArch arch);
// NVIDIA's measured per-channel ceilings of the tree (any protocol, before the protocol's own
// factor) and of NVLS Tree, by architecture and node count (perChMaxTreeBw, perChMaxNvlsTreeBw).
[[nodiscard]] double nccl_tree_per_channel_GBps(const CommShape& shape);
[[nodiscard]] double nccl_nvls_tree_per_channel_GBps(const CommShape& shape);

// Grouped p2p (all-to-all) as NCCL 2.28 plans it, from the searched ring graph
// (NcclTuningModel::graph(NcclAlgo::ring)): comm->p2pnChannels, comm->p2pnChannelsPerPeer
// (the fewest channels any peer asks for: 2 per NVLink, network peers 2 or 1 but at least the
// GPU's NICs; pow2Up), and the largest bytes per peer an NVLink peer's send runs with LL.
// Network peers never run LL: NCCL allocates no LL buffers on p2p network connections
// (net.cc, NCCL_ALLOC_P2P_NET_LL_BUFFERS=0).
[[nodiscard]] int nccl_p2p_channels(const NcclGraph& ring);
[[nodiscard]] int nccl_p2p_channels_per_peer(const CommShape& shape, const NcclGraph& ring);
[[nodiscard]] std::int64_t nccl_p2p_ll_threshold_bytes(const CommShape& shape, const NcclGraph& ring);

// How NCCL splits one all-to-all's share for one peer over its p2p channels (NCCL 2.28:
// paths.cc ncclTopoComputeP2pChannels / ncclTopoGetNchannels, enqueue.cc
// scheduleP2pTasksToPlan / addP2pToPlan, init.cc's p2pChunkSize). Every peer's send goes over
// `parts` channels of `part_bytes`, each moved in steps of `step_bytes`.
struct NcclP2pPlan {
  int p2p_channels = 0;       // comm->p2pnChannels: pow2Up of the communicator's channels
  int channels_per_peer = 0;  // comm->p2pnChannelsPerPeer: the fewest any peer asks for, pow2Up, at most p2p_channels
  int parts = 0;              // channels this peer's send is split over
  std::int64_t part_bytes = 0;
  bool ll = false;            // an NVLink peer's send runs LL (up to nccl_p2p_ll_threshold_bytes); network peers never
  std::int64_t step_bytes = 0;  // payload per pipeline step: p2pChunkSize (Simple; NVL 512 KiB, NET 128 KiB across nodes), an LL slot
  int active_channels = 0;    // channels carrying a part: min(p2p_channels, peers x parts)
};
// For a communicator of >= 2 ranks whose searched ring graph is `ring`
// (NcclTuningModel::graph(NcclAlgo::ring)) and `bytes_per_peer` sent to each peer; throws
// std::invalid_argument otherwise.
[[nodiscard]] NcclP2pPlan nccl_p2p_plan(const CommShape& shape, const NcclGraph& ring, std::int64_t bytes_per_peer);

// The graph search, approximated: see the header comment.
[[nodiscard]] std::array<NcclGraph, kNcclAlgos> nccl_graphs(const CommShape& shape);

// Checks every field; throws UsageError naming `where` and the field.
void validate(const CommShape& shape, const std::string& where);

}  // namespace dionsim::sim
