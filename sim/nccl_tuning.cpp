// NCCL 2.28.3's tuning model from its published constants (src/graph/tuning.cc) and the speed
// tables and channel duplication of its topology search (src/graph/search.cc). The code is
// dionsim's; the numbers and rules are NCCL's, cited beside each table.
#include "sim/nccl_tuning.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "common/error.hpp"
#include "common/parse.hpp"

namespace dionsim::sim {

const char* to_string(GpuArch a) {
  switch (a) {
    case GpuArch::volta: return "volta";
    case GpuArch::ampere: return "ampere";
    case GpuArch::hopper: return "hopper";
    case GpuArch::blackwell: return "blackwell";
  }
  return "?";
}
const char* to_string(NetKind k) {
  switch (k) {
    case NetKind::ib: return "ib";
    case NetKind::roce: return "roce";
    case NetKind::efa: return "efa";
  }
  return "?";
}
const char* to_string(NcclFunc f) {
  switch (f) {
    case NcclFunc::allgather: return "allgather";
    case NcclFunc::reducescatter: return "reducescatter";
    case NcclFunc::allreduce: return "allreduce";
  }
  return "?";
}
const char* to_string(NcclAlgo a) {
  switch (a) {
    case NcclAlgo::ring: return "ring";
    case NcclAlgo::tree: return "tree";
    case NcclAlgo::nvls: return "nvls";
    case NcclAlgo::nvls_tree: return "nvlstree";
    case NcclAlgo::pat: return "pat";
  }
  return "?";
}
const char* to_string(NcclProto p) {
  switch (p) {
    case NcclProto::ll: return "ll";
    case NcclProto::ll128: return "ll128";
    case NcclProto::simple: return "simple";
  }
  return "?";
}

namespace {

constexpr int kRing = static_cast<int>(NcclAlgo::ring);
constexpr int kTree = static_cast<int>(NcclAlgo::tree);
constexpr int kNvls = static_cast<int>(NcclAlgo::nvls);
constexpr int kNvlsTree = static_cast<int>(NcclAlgo::nvls_tree);
constexpr int kPat = static_cast<int>(NcclAlgo::pat);
constexpr int kLL = 0, kLL128 = 1, kSimple = 2;
constexpr int kHwNvlink = 0, kHwNet = 1;

// tuning.cc ncclTunerConstantsDefaults (2.28.3), CollNet rows dropped, rows reordered to
// dionsim's NcclAlgo order (ring, tree, nvls, nvls_tree, pat; NCCL lists tree first). us.
constexpr double kBaseLat[kNcclAlgos][kNcclProtos] = {
    {6.6, 14.0, 8.4}, {6.8, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {8.0, 8.0, 8.0}};
// Per hop, NVLink then network (the PCI row is never used: every GPU of a dionsim node sits on
// an NVSwitch); same row order.
constexpr double kHwLat[2][kNcclAlgos][kNcclProtos] = {
    {{.6, 1.9, 3.4}, {.6, 1.25, 4.0}, {0, 0, 25}, {0, 0, 25}, {0, 0, 4.0}},
    {{2.7, 4.0, 14.0}, {5.0, 8.5, 14}, {0, 0, 18}, {0, 0, 14}, {0, 0, 14}}};
// [cc or cpu index][min(nodes,3)-1], GB/s.
constexpr double kLlMaxBw[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
constexpr double kPerChMaxRingLL128[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {73.4, 73.4, 73.4}};
constexpr double kPerChMaxTreeLL128[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr double kPerChMaxTree[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
constexpr double kPerChMaxNvlsTree[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 43.1}};
constexpr double kNvlsEfficiency[4] = {0.0, 0.0, 0.85, 0.74};
// The tree all-reduce's bandwidth factor, and sm90+'s further factor for the plain tree pattern.
constexpr double kTreeEfficiency = 0.92;
constexpr double kTreePatternFactor = 0.85;
// Powers of two from 64 B (index = log2(bytes / 64)); LL, LL128, Simple.
constexpr double kTreeCorrection[kNcclProtos][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};

// search.cc speed tables (GB/s per channel), by architecture; intra = single node.
const std::vector<double>& speeds(GpuArch arch, bool inter) {
  static const std::vector<double> intra = {40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0};
  static const std::vector<double> inter_ = {48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0,
                                             7.0,  6.0,  5.0,  4.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  static const std::vector<double> sm90_intra = {60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0};
  static const std::vector<double> sm90_inter = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                                                 15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  static const std::vector<double> sm100_intra = {90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0};
  static const std::vector<double> sm100_inter = {96.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0,
                                                  17.5, 15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  if (arch == GpuArch::blackwell) return inter ? sm100_inter : sm100_intra;
  if (arch == GpuArch::hopper) return inter ? sm90_inter : sm90_intra;
  return inter ? inter_ : intra;
}

int cc_index(GpuArch a) { return static_cast<int>(a); }
// The node-count column of tuning.cc's tables: 1 node, 2 nodes, more.
int nodes_index(const CommShape& s) { return s.nodes <= 2 ? s.nodes - 1 : 2; }
int cc_of(GpuArch a) {
  switch (a) {
    case GpuArch::volta: return 70;
    case GpuArch::ampere: return 80;
    case GpuArch::hopper: return 90;
    case GpuArch::blackwell: return 100;
  }
  return 90;
}

// NCCL's NVLink bandwidth per link over the nominal 25 GB/s (NVLink 2-4) or 50 GB/s (NVLink 5)
// (topo.h: SM70/SM80 20.0, SM90 20.6, SM100 40.1 GB/s): the GPU's NVSwitch bandwidth as the
// search sees it.
double nccl_nvlink_GBps(const CommShape& s) {
  switch (s.arch) {
    case GpuArch::volta:
    case GpuArch::ampere: return s.nvlink_GBps * 20.0 / 25.0;
    case GpuArch::hopper: return s.nvlink_GBps * 20.6 / 25.0;
    case GpuArch::blackwell: return s.nvlink_GBps * 40.1 / 50.0;
  }
  return s.nvlink_GBps;
}

constexpr int kMaxRingChannels = 32;  // MAXCHANNELS / 2, the ring and tree searches' maximum

// The best channels x speed a search could find at one speed table (ncclTopoCompute's pass 1):
// as many channels as the per-channel budget allows, the first (fastest) speed that reaches the
// largest total.
NcclGraph ring_like_search(const CommShape& s) {
  const bool multi = s.nodes > 1;
  const double nvl = nccl_nvlink_GBps(s);
  NcclGraph best;
  for (const double speed : speeds(s.arch, multi)) {
    int ch = kMaxRingChannels;
    if (s.ranks_per_node > 1) ch = std::min(ch, static_cast<int>(std::floor(nvl / speed + 1e-9)));
    if (multi) {
      if (speed > s.nic_GBps + 1e-9) continue;
      ch = std::min(ch, s.nics_per_node * static_cast<int>(std::floor(s.nic_GBps / speed + 1e-9)));
    } else if (speed > nvl + 1e-9) {
      continue;
    }
    if (ch < 1) continue;
    if (ch * speed > best.channels * best.bw_intra_GBps + 1e-9) best = {ch, speed, speed};
  }
  if (best.channels == 0) best = {1, speeds(s.arch, multi).back(), speeds(s.arch, multi).back()};
  return best;
}

// ncclTopoCompute's pass 2: with the channels found, one of a graph's speeds climbs the speed
// table while fits(current, next faster) holds; returns where it stops.
template <class Fits>
double climb_speeds(const std::vector<double>& table, double speed, Fits fits) {
  auto it = std::find(table.begin(), table.end(), speed);
  while (it != table.begin() && it != table.end() && fits(speed, *(it - 1))) speed = *--it;
  return speed;
}

// Pass 2 for a tree: bwIntra climbs while it is below twice bwInter and the search still
// succeeds (here: the per-GPU NVLink budget holds). The tuning uses bwIntra at <= 2 nodes, so a
// 2-node tree on a NIC-bound fabric is priced at up to twice the ring's per-channel speed.
NcclGraph tree_pass2(const CommShape& s, NcclGraph g) {
  const double nvl = nccl_nvlink_GBps(s);
  g.bw_intra_GBps = climb_speeds(speeds(s.arch, s.nodes > 1), g.bw_intra_GBps, [&](double now, double next) {
    return now < 2 * g.bw_inter_GBps - 1e-9 && (s.ranks_per_node == 1 || g.channels * next <= nvl + 1e-9);
  });
  return g;
}

// ncclTopoDupChannels: double the channels at half the speed when bw >= 25 GB/s, not on sm90+
// below 50 GB/s with more than 4 channels.
NcclGraph dup_channels(const CommShape& s, NcclGraph g) {
  if (g.bw_intra_GBps >= 25.0 && !(cc_of(s.arch) > 80 && g.bw_intra_GBps < 50.0 && g.channels > 4)) {
    const int dup = std::min(g.channels * 2, kMaxRingChannels);
    const int div = (dup + g.channels - 1) / g.channels;
    g.bw_intra_GBps /= div;
    g.bw_inter_GBps /= div;
    g.channels = dup;
  }
  return g;
}

// NVLS: one channel per local GPU (the search's min = max), NVLink budget scaled by
// ngpus/(ngpus-1) as for every non-ring pattern; no duplication. Pass 2 then raises bwInter
// through the speed table while it is below twice bwIntra and the NICs carry it (one channel per
// NIC; inside one NVLink domain no network path limits it), the channels fixed.
NcclGraph nvls_graph(const CommShape& s) {
  NcclGraph g;
  if (s.arch < GpuArch::hopper || !s.nvswitch_multicast || s.ranks_per_node < 2) return g;
  const int ch = std::min(s.ranks_per_node, kNcclMaxNvlsArity);  // search.cc: one head per GPU, at most the arity
  const double budget = nccl_nvlink_GBps(s) * s.ranks_per_node / (s.ranks_per_node - 1.0);
  const bool multi = s.nodes > 1;
  const std::vector<double>& table = speeds(s.arch, multi);
  for (const double speed : table) {
    if (ch * speed > budget + 1e-9) continue;
    if (multi && speed > s.nic_GBps + 1e-9) continue;
    g = {ch, speed, speed};
    break;
  }
  if (g.channels == 0) return g;
  g.bw_inter_GBps = climb_speeds(table, g.bw_inter_GBps, [&](double now, double next) {
    return now < 2 * g.bw_intra_GBps - 1e-9 && (!multi || next <= s.nic_GBps + 1e-9);
  });
  return g;
}

}  // namespace

int floor_log2(std::int64_t n) {
  int l = -1;
  while (n > 0) {
    n >>= 1;
    ++l;
  }
  return l;
}

double nccl_hw_latency_us(bool network, NcclAlgo a, NcclProto p) {
  return kHwLat[network ? kHwNet : kHwNvlink][static_cast<int>(a)][static_cast<int>(p)];
}
double nccl_base_latency_us(NcclAlgo a, NcclProto p) { return kBaseLat[static_cast<int>(a)][static_cast<int>(p)]; }
double nccl_ll_max_bw_GBps(const CommShape& s) {
  const int index2 = nodes_index(s);
  const int index1 = s.nodes == 1 ? cc_index(s.arch) : (s.net_overhead_us >= 2.0 ? 1 : 0);
  return kLlMaxBw[index1][index2];
}
double nccl_ll128_ring_per_channel_GBps(GpuArch arch) { return kPerChMaxRingLL128[cc_index(arch)][0]; }
double nccl_ll128_tree_per_channel_GBps(const CommShape& s) {
  return kPerChMaxTreeLL128[cc_index(s.arch)][nodes_index(s)];
}
double nccl_nvls_efficiency(GpuArch arch) { return kNvlsEfficiency[cc_index(arch)]; }
double nccl_tree_efficiency(GpuArch arch) { return kTreeEfficiency * (cc_of(arch) >= 90 ? kTreePatternFactor : 1.0); }
double nccl_tree_per_channel_GBps(const CommShape& s) {
  return kPerChMaxTree[cc_index(s.arch)][nodes_index(s)];
}
double nccl_nvls_tree_per_channel_GBps(const CommShape& s) {
  return kPerChMaxNvlsTree[cc_index(s.arch)][nodes_index(s)];
}

std::array<NcclGraph, kNcclAlgos> nccl_graphs(const CommShape& s) {
  std::array<NcclGraph, kNcclAlgos> g{};
  const NcclGraph searched = ring_like_search(s);
  g[kRing] = dup_channels(s, searched);
  g[kTree] = dup_channels(s, tree_pass2(s, searched));  // the tree search meets the same per-channel budgets
  g[kPat] = g[kRing];
  g[kNvls] = nvls_graph(s);
  g[kNvlsTree] = g[kNvls];
  return g;
}

namespace {
int pow2_up(int v) { return static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(v, 1)))); }
std::int64_t div_up(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
}  // namespace

int nccl_p2p_channels(const NcclGraph& ring) {
  constexpr int kMaxChannels = 64;  // MAXCHANNELS
  // connect.cc duplicates the searched ring channels once more; p2p channels are its pow2Up.
  return std::min(kMaxChannels, pow2_up(std::min(kMaxChannels, 2 * ring.channels)));
}

int nccl_p2p_channels_per_peer(const CommShape& s, const NcclGraph& ring) {
  const int p2p_channels = nccl_p2p_channels(ring);
  int fewest = p2p_channels;  // ncclTopoComputeP2pChannels: the fewest any peer asks for
  if (s.ranks_per_node >= 2) {
    // ncclTopoGetNchannels: 2 x (the GPU's NVLink bandwidth / one link's) for an NVLink peer.
    const double link_GBps = s.arch == GpuArch::blackwell ? 50.0 : 25.0;  // nominal per NVLink, per direction
    const int links = std::max(1, static_cast<int>(std::floor(s.nvlink_GBps / link_GBps + 1e-9)));
    fewest = std::min(fewest, 2 * links);
  }
  if (s.nodes > 1) {
    // A network peer: 2 channels, halved while channels x ranks > 4 x p2p channels, but at least
    // the NICs it takes to match the GPU's own bandwidth (getLocalNetCountByBw): the GPU's NICs.
    int net = 2;
    while (static_cast<std::int64_t>(net) * s.ranks() > 4 * p2p_channels && net > 1) net /= 2;  // 2 x 2^30 ranks > INT_MAX
    const int nics_per_gpu = std::max(1, s.nics_per_node / std::max(1, s.ranks_per_node));
    fewest = std::min(fewest, std::max(nics_per_gpu, net));
  }
  return std::min(p2p_channels, pow2_up(fewest));
}

std::int64_t nccl_p2p_ll_threshold_bytes(const CommShape& s, const NcclGraph& ring) {
  // addP2pToPlan: LL while a peer's bytes <= nChannelsMax (the communicator's p2p channels per
  // peer, not the parts one send takes) x NCCL_P2P_LL_THRESHOLD (16 KiB): 512 KiB on 32.
  constexpr std::int64_t kLlThreshold = 16384;
  return nccl_p2p_channels_per_peer(s, ring) * kLlThreshold;
}

NcclP2pPlan nccl_p2p_plan(const CommShape& s, const NcclGraph& ring, std::int64_t bytes_per_peer) {
  if (s.ranks() < 2 || bytes_per_peer < 0)
    throw std::invalid_argument("nccl_p2p_plan: a communicator of >= 2 ranks and bytes >= 0 only");
  // comm->p2pChunkSize (init.cc): P2P_NET_CHUNKSIZE once the communicator spans nodes, for its
  // NVLink peers too; P2P_NVL_CHUNKSIZE inside one NVLink domain (<= Simple buffer / NCCL_STEPS).
  constexpr std::int64_t kNvlChunk = 512 * 1024, kNetChunk = 128 * 1024;
  constexpr std::int64_t kLlStepPayload = 8LL * 512 * 8 * 16 / 8 / 2;  // LL buffer / NCCL_STEPS, half of it flags
  const bool one_domain = s.nodes == 1;
  const std::int64_t chunk = one_domain ? kNvlChunk : kNetChunk;
  const int n = s.ranks();
  NcclP2pPlan plan;
  plan.p2p_channels = nccl_p2p_channels(ring);
  plan.channels_per_peer = nccl_p2p_channels_per_peer(s, ring);
  int channels_min = plan.channels_per_peer;  // use all channels, one channel per operation
  while (static_cast<std::int64_t>(channels_min) * n > plan.p2p_channels && channels_min > 1) channels_min /= 2;
  // addP2pToPlan: parts of at least chunk / 8 (chunk / 2 across nodes), doubled while above 32
  // chunks (one chunk across nodes).
  const std::int64_t min_part = one_domain ? chunk / 8 : chunk / 2, max_part = one_domain ? chunk * 32 : chunk;
  if (bytes_per_peer == 0) {
    plan.parts = 1;
  } else {
    plan.parts = static_cast<int>(std::min<std::int64_t>(channels_min, div_up(bytes_per_peer, min_part)));
    std::int64_t part = std::max(min_part, div_up(bytes_per_peer, plan.parts));
    while (part > max_part && plan.parts <= plan.channels_per_peer / 2) {
      plan.parts *= 2;
      part = div_up(bytes_per_peer, plan.parts);
    }
  }
  plan.part_bytes = div_up(bytes_per_peer, plan.parts);
  plan.ll = s.ranks_per_node >= 2 && bytes_per_peer <= nccl_p2p_ll_threshold_bytes(s, ring);
  plan.step_bytes = std::min(plan.part_bytes, plan.ll ? kLlStepPayload : chunk);
  plan.active_channels = static_cast<int>(std::min<std::int64_t>(plan.p2p_channels, static_cast<std::int64_t>(n - 1) * plan.parts));
  return plan;
}

void validate(const CommShape& s, const std::string& where) {
  const auto bad = [&](const char* field, const std::string& got, const char* expected) {
    throw UsageError(describe_bad_value(where, field, got, expected));
  };
  if (s.nodes < 1 || s.nodes > (1 << 20)) bad("nodes", std::to_string(s.nodes), "an integer in [1, 2^20]");
  if (s.ranks_per_node < 1 || s.ranks_per_node > 1024)
    bad("ranks_per_node", std::to_string(s.ranks_per_node), "an integer in [1, 1024]");
  if (!(std::isfinite(s.nvlink_GBps) && s.nvlink_GBps > 0 && s.nvlink_GBps <= 1e5))
    bad("nvlink_GBps", std::to_string(s.nvlink_GBps), "a bandwidth in (0, 1e5] GB/s");
  if (s.nodes > 1) {
    if (!(std::isfinite(s.nic_GBps) && s.nic_GBps > 0 && s.nic_GBps <= 1e5))
      bad("nic_GBps", std::to_string(s.nic_GBps), "a bandwidth in (0, 1e5] GB/s");
    if (s.nics_per_node < 1 || s.nics_per_node > 4096)
      bad("nics_per_node", std::to_string(s.nics_per_node), "an integer in [1, 4096]");
  }
  if (!(std::isfinite(s.net_overhead_us) && s.net_overhead_us >= 0 && s.net_overhead_us <= 1e3))
    bad("net_overhead_us", std::to_string(s.net_overhead_us), "a latency in [0, 1000] us");
}

bool NcclChoice::restricts(NcclFunc f) const {
  const Enabled& e = of(f);
  return std::find(e.algos.begin(), e.algos.end(), false) != e.algos.end() ||
         std::find(e.protos.begin(), e.protos.end(), false) != e.protos.end();
}

bool NcclChoice::names_collnet() const {
  return std::any_of(functions.begin(), functions.end(), [](const Enabled& e) { return e.names_collnet; });
}

namespace {
// strtok_r's view of a list: the non-empty pieces between separators.
std::vector<std::string> pieces(const std::string& text, char separator) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, separator))
    if (!item.empty()) out.push_back(item);
  return out;
}

// tuning.cc parseList over one variable. `set(function, name index, on)` records a name (the
// function -1: Broadcast or Reduce, not priced); `clear(function, on)` first puts every name of
// the function to `on`, as NCCL does before each entry.
void parse_nccl_list(const std::string& text, const std::vector<std::string>& names, const std::string& flag,
                     const std::function<void(int, bool)>& clear, const std::function<void(int, std::size_t, bool)>& set) {
  const std::string body = lower(text);
  if (body.empty() || body == "auto") return;  // NCCL's default: everything
  // NCCL's function names (init.cc ncclFuncStr), lower-cased: Broadcast and Reduce map to -1.
  static const std::vector<std::pair<std::string, int>> prefixes = {
      {"broadcast", -1}, {"reduce", -1}, {"allgather", static_cast<int>(NcclFunc::allgather)},
      {"reducescatter", static_cast<int>(NcclFunc::reducescatter)}, {"allreduce", static_cast<int>(NcclFunc::allreduce)}};
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  const std::string expected = "a comma list of " + known +
                               " (optionally '^' first), then ';'-separated <function>:<list> entries "
                               "(allgather, reducescatter, allreduce, broadcast, reduce), or auto";
  const auto entries = pieces(body, ';');
  for (std::size_t k = 0; k < entries.size(); ++k) {
    const auto parts = pieces(entries[k], ':');
    if (parts.size() > 2) throw_bad_usage(flag, text, expected);
    const bool prefixed = parts.size() == 2;
    if (!prefixed && k > 0) throw_bad_usage(flag, text, expected + " (every entry after the first needs its function)");
    std::string list = parts.empty() ? std::string{} : parts.back();
    const bool negate = !list.empty() && list[0] == '^';
    if (negate) list.erase(0, 1);
    std::vector<int> functions;
    for (const auto& [name, f] : prefixes)
      if (!prefixed || name == parts[0]) functions.push_back(f);
    if (functions.empty()) throw_bad_usage(flag, text, expected + " (unknown function '" + parts[0] + "')");
    for (const int f : functions) clear(f, negate);
    for (const auto& item : pieces(list, ',')) {
      const auto it = std::find(names.begin(), names.end(), item);
      if (it == names.end()) throw_bad_usage(flag, text, expected);
      for (const int f : functions) set(f, static_cast<std::size_t>(it - names.begin()), !negate);
    }
  }
}
}  // namespace

NcclChoice NcclChoice::parse(const std::string& algos, const std::string& protos, const std::string& algo_flag,
                             const std::string& proto_flag) {
  NcclChoice c;
  // NCCL's algorithm names (init.cc ncclAlgoStr); the two CollNet ones are not priced.
  const std::vector<std::string> algo_names = {"ring", "tree", "nvls", "nvlstree", "pat", "collnetdirect", "collnetchain"};
  parse_nccl_list(
      algos, algo_names, algo_flag,
      [&](int f, bool on) {
        if (f < 0) return;
        auto& e = c.functions[static_cast<std::size_t>(f)];
        e.algos.fill(on);
        e.names_collnet = false;
      },
      [&](int f, std::size_t name, bool on) {
        if (f < 0) return;
        auto& e = c.functions[static_cast<std::size_t>(f)];
        if (name < e.algos.size()) e.algos[name] = on;
        else if (on) e.names_collnet = true;
      });
  parse_nccl_list(
      protos, {"ll", "ll128", "simple"}, proto_flag,
      [&](int f, bool on) {
        if (f >= 0) c.functions[static_cast<std::size_t>(f)].protos.fill(on);
      },
      [&](int f, std::size_t name, bool on) {
        if (f >= 0) c.functions[static_cast<std::size_t>(f)].protos[name] = on;
      });
  return c;
}

NcclTuningModel::NcclTuningModel(const CommShape& s) : shape_(s) {
  validate(s, "communicator");
  graphs_ = nccl_graphs(s);
  const int nodes = s.nodes;
  const int ranks = s.ranks();
  const double ppn = static_cast<double>(ranks) / nodes;
  const int cc = cc_index(s.arch);
  const int index2 = nodes_index(s);
  const bool amd_host = s.net_overhead_us >= 2.0;
  const int index1 = nodes == 1 ? cc : (amd_host ? 1 : 0);
  const double ll_max = kLlMaxBw[index1][index2];
  const bool tree_pattern = cc_of(s.arch) >= 90;  // sm90+ searches degrade balanced trees to trees
  const bool pat_on = nodes == ranks;             // PAT: one GPU per node (2.28 ncclPatEnable)
  for (int f = 0; f < 3; ++f) {
    const auto func = static_cast<NcclFunc>(f);
    const bool allreduce = func == NcclFunc::allreduce;
    const int nsteps = allreduce ? 2 * (ranks - 1) : ranks - 1;
    for (int a = 0; a < kNcclAlgos; ++a) {
      if (!allreduce && a != kPat && a != kRing && a != kNvls) continue;
      if (allreduce && a == kPat) continue;
      const NcclGraph& g = graphs_[a];
      for (int p = 0; p < kNcclProtos; ++p) {
        bandwidth_[f][a][p] = 0;
        latency_[f][a][p] = 0;
        if ((a == kNvls || a == kNvlsTree) && p != kSimple) continue;
        if (a == kPat && (p != kSimple || !pat_on)) continue;
        if (g.channels == 0) continue;
        double bw = nodes <= 2 ? g.bw_intra_GBps : g.bw_inter_GBps;
        if (a == kNvls || a == kNvlsTree) {
          if (g.channels < 2) continue;
          double intra = g.bw_intra_GBps * kNvlsEfficiency[cc] * (g.channels - 1) / g.channels;
          intra *= allreduce ? 2.0 : (ppn - 1) / ppn;
          const double inter = g.bw_inter_GBps * ((nodes <= 2 && a == kNvlsTree) ? 2 : 1);
          bw = std::min({intra, inter, a == kNvlsTree ? kPerChMaxNvlsTree[cc][index2] : std::numeric_limits<double>::max()});
        }
        double bus = g.channels * bw;
        if (a == kRing && p == kLL) bus = std::min(ll_max, bus * .5);
        if (a == kRing && p == kLL128) bus = std::min(bus * 0.92, g.channels * kPerChMaxRingLL128[cc][index2]);
        if (a == kTree && allreduce) bus = std::min(bus * kTreeEfficiency, g.channels * kPerChMaxTree[cc][index2]);
        if (a == kTree && p == kLL) bus = std::min(bus / 3.8, ll_max);
        if (a == kTree && p == kLL128)
          bus = std::min(bus * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), g.channels * kPerChMaxTreeLL128[cc][index2]);
        if (a == kTree && tree_pattern) bus *= kTreePatternFactor;
        if (a == kPat) bus *= .75;
        if (!(a != kRing && !allreduce)) bus *= (a == kRing || a == kNvls || a == kNvlsTree) ? double(ranks) / nsteps : .5;
        bandwidth_[f][a][p] = bus;

        double lat = kBaseLat[a][p];
        double intra_lat = kHwLat[kHwNvlink][a][p];
        double inter_lat = ppn == 1 ? kHwLat[kHwNet][kTree][p] : kHwLat[kHwNet][a][p];  // graph latencyInter: 0
        if (a == kRing) {
          double overhead = 0;
          if (nodes > 1) overhead = s.net_overhead_us * (p == kSimple ? 3 : 1);
          intra_lat = std::max(intra_lat, overhead);
          const int inter_steps = nodes == 1 ? 0 : allreduce ? 2 * (nodes - 1) : nodes - 1;
          lat += (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat;
        } else if (a == kTree) {
          lat += 2 * ((ranks / nodes - 1) * intra_lat + floor_log2(nodes) * inter_lat);
        } else if (a == kNvls) {
          lat = intra_lat + (nodes > 1 ? inter_lat : 0);
        } else if (a == kNvlsTree) {
          lat += intra_lat + 2 * floor_log2(nodes) * inter_lat;
        } else if (a == kPat) {
          lat += floor_log2(nodes) * (inter_lat / 3.5) + ranks * 2.8;
        }
        latency_[f][a][p] = lat;
      }
    }
    // Enable rules: NVLS Tree needs several nodes; NVLS across nodes needs CollNet (off); NVLS
    // all-gather / reduce-scatter need every local rank a head, at most NCCL_MAX_NVLS_ARITY
    // (enqueue.cc topoGetAlgoInfo); LL128 is on for Volta+ over NVLink with GPU-direct NICs (all
    // dionsim fabrics).
    for (int a = 0; a < kNcclAlgos; ++a) {
      const bool off = (nodes == 1 && a == kNvlsTree) || (nodes > 1 && a == kNvls) ||
                       ((a == kNvls || a == kNvlsTree) && !allreduce && ppn > kNcclMaxNvlsArity);
      if (off)
        for (int p = 0; p < kNcclProtos; ++p) bandwidth_[f][a][p] = 0;
    }
  }
}

bool NcclTuningModel::enabled(NcclFunc f, NcclAlgo a, NcclProto p) const {
  return bandwidth_[static_cast<int>(f)][static_cast<int>(a)][static_cast<int>(p)] > 0;
}

std::optional<NcclPrediction> NcclTuningModel::predict(NcclFunc f, NcclAlgo a, NcclProto p, std::int64_t bytes) const {
  if (shape_.ranks() <= 1 || !enabled(f, a, p)) return std::nullopt;
  const int fi = static_cast<int>(f), ai = static_cast<int>(a), pi = static_cast<int>(p);
  double bw = bandwidth_[fi][ai][pi];
  double lat = latency_[fi][ai][pi];
  const int log_size = floor_log2(bytes >> 6);
  if (a == NcclAlgo::tree && f == NcclFunc::allreduce && log_size >= 0 && log_size < 23) bw *= kTreeCorrection[pi][log_size];
  const double per_channel_rank = static_cast<double>(bytes) / (graphs_[kRing].channels * shape_.ranks());
  if (a == NcclAlgo::ring && p == NcclProto::simple && shape_.nodes > 1 && f == NcclFunc::allreduce &&
      per_channel_rank >= 64) {
    lat *= cc_of(shape_.arch) < 80 ? 1.9 : 1.4;  // "plateau effect of ring"
  }
  NcclPrediction out;
  out.algo = a;
  out.proto = p;
  out.latency_us = lat;
  out.bw_GBps = bw;
  out.time_us = lat + static_cast<double>(bytes) / (1000.0 * bw);
  return out;
}

std::optional<NcclPrediction> NcclTuningModel::choose(NcclFunc f, std::int64_t bytes, const NcclChoice& allowed) const {
  std::optional<NcclPrediction> best;
  for (int a = 0; a < kNcclAlgos; ++a) {
    if (!allowed.of(f).algos[a]) continue;
    for (int p = 0; p < kNcclProtos; ++p) {
      if (!allowed.of(f).protos[p]) continue;
      const auto t = predict(f, static_cast<NcclAlgo>(a), static_cast<NcclProto>(p), bytes);
      if (t && (!best || t->time_us < best->time_us)) best = t;
    }
  }
  return best;
}

}  // namespace dionsim::sim
