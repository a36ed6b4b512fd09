#include "sim/collective_model.hpp"

#include "sim/aws_ofi_tuner.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>

#include "common/error.hpp"

namespace dionsim::sim {

namespace {

// Payload per line of each protocol: LL sends 8 data bytes per 16-byte line (4 B flag per 4 B
// data), LL128 120 of 128 bytes, Simple all of it (NCCL's protocol definitions).
double protocol_efficiency(NcclProto p) {
  switch (p) {
    case NcclProto::ll: return 0.5;
    case NcclProto::ll128: return 120.0 / 128.0;
    case NcclProto::simple: return 1.0;
  }
  return 1.0;
}

// NVLink 2 Volta, 3 Ampere, 4 Hopper, 5 Blackwell.
GpuArch arch_of(int nvlink_generation) {
  if (nvlink_generation >= 5) return GpuArch::blackwell;
  if (nvlink_generation == 4) return GpuArch::hopper;
  if (nvlink_generation == 3) return GpuArch::ampere;
  return GpuArch::volta;
}

NetKind net_of(topo::Network n) {
  switch (n) {
    case topo::Network::infiniband: return NetKind::ib;
    case topo::Network::roce: return NetKind::roce;
    case topo::Network::efa: return NetKind::efa;
  }
  return NetKind::ib;
}

// The completion of a Simple network step beyond the message itself: aws-ofi-nccl's tuner
// (TUNER_NET_COMP_OVERHEAD, "~2 us in the device and ~1 us to write that completion up to the
// host stack"), added to the fabric's per-message latency where that latency prices the hop.
constexpr double kSimpleCompletionUs = 3.0;

// aws-ofi-nccl's model of NVLS Tree on EFA (src/tuner/nccl_ofi_model.cpp, p5/p5e/p5en):
// latency = 2 x (NVLS's NVLink latency, 23 us, + log2(nodes) x the network step) — the switch's
// reduction before the tree of nodes and its multicast after it are two NVLink passes, where
// NCCL's own model (NVIDIA's figures for InfiniBand) charges one NVLS latency for both.
constexpr double kAwsNvlsNvlinkLatencyUs = 23.0;

// kP2pChannelGBps, the rate one p2p channel moves its parts at. NCCL runs every part of a send on
// one channel, one thread block copying it into the peer's (or the proxy's) buffer, so a send split
// over k parts moves at no more than k times this, however fast the links. Measured, not NCCL's:
// the slope of NCCL 2.29.2's single-peer send/recv (nccl-tests sendrecv_perf) on one 8-GPU H100
// node between sizes that NCCL splits into the same number of parts (4 or 8), 60 slopes of the 20
// single-node logs of xxrjun/nccl-tests-cluster example-cluster01: median 20.96 GB/s, range
// 20.0-21.7 (scripts/p2p_channel_rate.py). Those logs' send/recv rows are in no scored set
// (measurements.csv holds none). Carried to other GPU generations until they are measured;
// `calibrate --nccl-tests` fits it (collective_p2p_channel_GBps) where a log's rows move it.

// kNvlsStepOverheadUs, what one NVLS chunk step costs beside its copy: the flag wait and post
// between a channel's scatter, reduce and gather warps. NCCL halves the NVLS chunk for smaller
// calls (128 KiB down to 16 KiB, by the call's size over channels x heads), and each halving
// costs rate: a channel moves c / (c / r + o). Measured, not NCCL's: on one 8-GPU H100 node
// (NCCL 2.29.2, 16 NVLS channels) all-reduce runs 276 GB/s with 128 KiB chunks and 260 GB/s with
// 64 KiB, in the slopes between sizes that run the same chunk (free of latency and fill); the
// difference is o = 0.47 us per step, median of 18 estimates, range 0.44-0.50, of the 9
// single-node logs of xxrjun/nccl-tests-cluster example-cluster01 whose all-reduce rows no set
// validate-collectives scores (scripts/nvls_step_overhead.py). Carried to NVLink 5 and the NVL72
// rack's switch trays until they are measured.

// NCCL's buffers (init.cc defaults, device.h): NCCL_STEPS slots per connection; Simple 4 MiB
// (ModelOptions::simple_buff_bytes, NCCL_BUFFSIZE), LL 8 lines x 512 threads x 8 steps x 16 B,
// LL128 120 elements x 640 threads x 8 steps x 8 B.
constexpr std::int64_t kNcclSteps = 8;
constexpr std::int64_t kLlBuffBytes = 8LL * 512 * 8 * 16;
constexpr std::int64_t kLl128BuffBytes = 120LL * 640 * 8 * 8;

// NCCL's network latency per inter-node step in its model (tuning.cc): with one GPU per node
// every algorithm takes Tree's (fully exposed), else the algorithm's own.
double nccl_inter_hop_us(const CommShape& s, NcclAlgo a, NcclProto p) {
  return nccl_hw_latency_us(true, s.ranks_per_node == 1 ? NcclAlgo::tree : a, p);
}

}  // namespace

double nccl_nvlink_fraction(GpuArch arch) {
  switch (arch) {
    case GpuArch::volta:
    case GpuArch::ampere: return 20.0 / 25.0;
    case GpuArch::hopper: return 20.6 / 25.0;
    case GpuArch::blackwell: return 40.1 / 50.0;
  }
  return 1.0;
}

NcclFunc to_nccl(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::allgather: return NcclFunc::allgather;
    case CollectiveOp::reducescatter: return NcclFunc::reducescatter;
    case CollectiveOp::allreduce: return NcclFunc::allreduce;
    default: throw std::invalid_argument("to_nccl: not an NCCL collective of the tuning model");
  }
}

bool names_collnet(const NcclChoice& choice, CollectiveOp op) {
  const bool p2p = op == CollectiveOp::alltoall || op == CollectiveOp::sendrecv;
  return p2p ? choice.names_collnet() : choice.of(to_nccl(op)).names_collnet;
}

CommShape comm_shape(const topo::FabricSpec& fabric, int nodes, int gpus_per_node) {
  const topo::FabricSpec spec = topo::with_gpus_per_host(fabric, gpus_per_node);
  const int world = nodes * gpus_per_node;
  // NCCL's nodes are NVLink domains (MNNVL makes a rack one node); a partial last domain is
  // counted as the others (NCCL sees uneven cliques; its model uses nRanks / nNodes).
  const int domain = std::min(spec.gpus_per_nvlink_domain, world);
  CommShape s;
  s.arch = arch_of(spec.nvlink_generation);
  s.nodes = (world + domain - 1) / domain;
  s.ranks_per_node = world / s.nodes;
  s.nvlink_GBps = spec.nvlink_GBps;
  s.nic_GBps = spec.nic_GBps / spec.planes;  // one port per plane
  s.nics_per_node = s.ranks_per_node * spec.planes;
  s.net = net_of(spec.network);
  s.nvswitch_multicast = s.arch >= GpuArch::hopper && spec.nvls_multicast;
  return s;
}

CollectiveModel::CollectiveModel(const topo::FabricSpec& spec, int nodes, int gpus_per_node, ModelOptions options)
    : spec_(spec),
      shape_(comm_shape(spec, nodes, gpus_per_node)),
      nccl_(shape_),
      options_(options),
      hosts_(nodes),
      gpus_per_node_(gpus_per_node) {
  topo::validate(spec, spec.name, true);
  if (!(std::isfinite(options.extra_hop_latency_us) && options.extra_hop_latency_us >= 0 &&
        options.extra_hop_latency_us <= 1e6)) {
    throw_bad_usage("--latency-us", std::to_string(options.extra_hop_latency_us), "a latency in [0, 1e6] us");
  }
  if (options.p2p_concurrent_peers < 1) throw std::invalid_argument("CollectiveModel: p2p_concurrent_peers < 1");
  if (!(std::isfinite(options.call_overhead_us) && options.call_overhead_us >= 0 && options.call_overhead_us <= 1e6))
    throw_bad_usage("call_overhead_us", std::to_string(options.call_overhead_us), "a latency in [0, 1e6] us");
  if (!(std::isfinite(options.net_hop_extra_us) && options.net_hop_extra_us >= -2.5 && options.net_hop_extra_us <= 1e6))
    throw_bad_usage("net_hop_extra_us", std::to_string(options.net_hop_extra_us),
                    "a latency in [-2.5, 1e6] us (a network step stays above 0)");
  if (!(std::isfinite(options.p2p_channel_GBps) && options.p2p_channel_GBps > 0 && options.p2p_channel_GBps <= 1e4))
    throw_bad_usage("p2p_channel_GBps", std::to_string(options.p2p_channel_GBps), "a rate in (0, 1e4] GB/s");
  if (!(std::isfinite(options.nvls_step_overhead_us) && options.nvls_step_overhead_us >= 0 &&
        options.nvls_step_overhead_us <= 1e3))
    throw_bad_usage("nvls_step_overhead_us", std::to_string(options.nvls_step_overhead_us), "a cost in [0, 1e3] us");
  for (const double f : options.time_factor_by_size_regime)
    if (!(std::isfinite(f) && f > 0 && f <= 100))
      throw_bad_usage("time_factor_by_size_regime", std::to_string(f), "a factor in (0, 100]");
  if (!(std::isfinite(options.nvlink_scale) && options.nvlink_scale > 0 &&
        options.nvlink_scale * nccl_nvlink_fraction(shape_.arch) <= 1 + 1e-12))
    throw_bad_usage("nvlink_scale", std::to_string(options.nvlink_scale),
                    "a factor in (0, 1 / NCCL's NVLink fraction]: at most the nominal NVLink rate");
  // The DES sees the links at NCCL's NVLink rate and the preset's NIC efficiency; every
  // latency is in the model's latency terms, not on the flows.
  spec_.nvlink_efficiency = std::min(1.0, nccl_nvlink_fraction(shape_.arch) * options.nvlink_scale);
  spec_net_step_latency_us_ = spec.net_step_latency_us;
  spec_.nvlink_latency_us = 0;
  spec_.nic_latency_us = 0;
}

std::optional<CollectiveCost> CollectiveModel::price(NcclFunc f, NcclAlgo a, NcclProto p, std::int64_t bytes) const {
  if (!nccl_.enabled(f, a, p)) return std::nullopt;
  const CommShape& s = shape_;
  const int n = s.ranks(), nodes = s.nodes, g = s.ranks_per_node;
  const bool allreduce = f == NcclFunc::allreduce;
  const int nsteps = allreduce ? 2 * (n - 1) : n - 1;
  const double e = protocol_efficiency(p);
  const double inf = std::numeric_limits<double>::infinity();
  const double nvl = g > 1 ? s.nvlink_GBps * spec_.nvlink_efficiency : inf;
  const double nic_node = nodes > 1 ? s.nics_per_node * s.nic_GBps * spec_.nic_efficiency : inf;  // per domain
  const NcclGraph& graph = nccl_.graph(a);
  double algbw = 0;
  double step_algbw = -1;  // the rate of one pipeline step where it differs from the call's (NVLS)
  int hops = 0;
  switch (a) {
    case NcclAlgo::ring: {
      // Every channel crosses each node boundary once: the ring's bus rate is the slower of one
      // GPU's NVLink and the node's NICs, and of the channels NCCL's search found at their speed
      // (8 x 45 GB/s for 8 GPUs with 8 NDR NICs: 8 x 48 does not fit its NVLink budget).
      double bus = std::min(nvl, nic_node) * e;
      bus = std::min(bus, graph.channels * (nodes <= 2 ? graph.bw_intra_GBps : graph.bw_inter_GBps) * e);
      if (p == NcclProto::ll) bus = std::min(bus, nccl_ll_max_bw_GBps(s));
      if (p == NcclProto::ll128) bus = std::min(bus, graph.channels * nccl_ll128_ring_per_channel_GBps(s.arch));
      algbw = bus * n / nsteps;
      hops = nsteps;
      break;
    }
    case NcclAlgo::tree: {
      // Double binary tree, half the buffer per tree. Inside a node each tree is a chain that
      // reduces up and broadcasts down: every GPU sends S (partial sums) + S (results) per
      // direction over its NVLink, algbw <= NVLink / 2. Across nodes a node internal to one tree
      // sends S/2 up and 2 x S/2 down (and its leaf role S/2 up), 2S per direction over its NICs;
      // with two nodes each is the root of one tree and a leaf of the other, S per direction.
      // NCCL's measured tree efficiency (0.92; x 0.85 where sm90+ runs the plain tree pattern).
      const double links = std::min(nvl / 2, nodes <= 2 ? nic_node : nic_node / 2) * e * nccl_tree_efficiency(s.arch);
      // NCCL's per-channel protocol ceilings, on the bus rate as before the halving of > 2 nodes.
      double bus = inf;
      if (p == NcclProto::ll) bus = nccl_ll_max_bw_GBps(s);
      if (p == NcclProto::ll128) bus = graph.channels * nccl_ll128_tree_per_channel_GBps(s);
      if (p == NcclProto::simple) bus = graph.channels * nccl_tree_per_channel_GBps(s);
      algbw = std::min(links, nodes <= 2 ? bus : bus / 2);
      hops = 2 * ((g - 1) + floor_log2(nodes));
      break;
    }
    case NcclAlgo::nvls:
    case NcclAlgo::nvls_tree: {
      // In-switch reduction (multimem): per GPU and direction an all-reduce moves S·(1 + 1/G),
      // an all-gather or reduce-scatter S; NCCL's NVLS efficiency is the switch's achieved share.
      const double switch_rate = s.nvlink_GBps * spec_.nvlink_efficiency * nccl_nvls_efficiency(s.arch);
      const NvlsRates intra = nvls_rates(allreduce ? switch_rate / (1.0 + 1.0 / g) : switch_rate, a, bytes);
      double inter = inf;
      if (a == NcclAlgo::nvls_tree) {
        inter = nic_node * (nodes <= 2 ? 1.0 : 0.5);  // a tree of nodes
        // NVIDIA's measured ceiling per NVLS-Tree channel (bus bandwidth).
        inter = std::min(inter, graph.channels * nccl_nvls_tree_per_channel_GBps(s) * n / nsteps);
      }
      algbw = std::min(intra.call_GBps, inter);
      step_algbw = std::min(intra.step_GBps, inter);
      hops = a == NcclAlgo::nvls ? 1 : 1 + 2 * floor_log2(nodes);
      break;
    }
    case NcclAlgo::pat: {
      // Parallel aggregated trees (one GPU per node): the NIC moves the ring's bytes; NCCL's
      // 0.75 is its achieved share.
      algbw = std::min(nvl, nic_node) * e * 0.75 * n / nsteps;
      hops = n;
      break;
    }
  }
  CollectiveCost c;
  c.op = f == NcclFunc::allgather ? CollectiveOp::allgather
         : f == NcclFunc::reducescatter ? CollectiveOp::reducescatter
                                        : CollectiveOp::allreduce;
  c.algorithm = to_string(a);
  c.protocol = to_string(p);
  // A network hop costs NCCL's per-protocol constant (NVIDIA's figure for its IB transport, in
  // base_latency_us) or, where the fabric's own per-message latency is larger (EFA through
  // libfabric), that latency plus the completion's cost with Simple: network_hop_us().
  int inter_hops = 0;
  if (nodes > 1) {
    switch (a) {
      case NcclAlgo::ring: inter_hops = allreduce ? 2 * (nodes - 1) : nodes - 1; break;
      case NcclAlgo::tree: inter_hops = 2 * floor_log2(nodes); break;
      case NcclAlgo::nvls: inter_hops = 1; break;
      case NcclAlgo::nvls_tree: inter_hops = 2 * floor_log2(nodes); break;
      case NcclAlgo::pat: inter_hops = floor_log2(nodes); break;
    }
  }
  // NCCL's own network term per hop (PAT divides it by 3.5: its steps overlap), replaced.
  const double nccl_hop = nccl_inter_hop_us(s, a, p) / (a == NcclAlgo::pat ? 3.5 : 1.0);
  const double hop = network_hop_us(nccl_inter_hop_us(s, a, p), p) / (a == NcclAlgo::pat ? 3.5 : 1.0);
  c.latency_us = nccl_.base_latency_us(f, a, p) + hops * options_.extra_hop_latency_us +
                 inter_hops * (hop - nccl_hop + options_.net_hop_extra_us) + options_.call_overhead_us;
  if (a == NcclAlgo::nvls_tree && spec_.network == topo::Network::efa)
    c.latency_us += 2 * kAwsNvlsNvlinkLatencyUs - nccl_hw_latency_us(false, a, p);
  c.bandwidth_GBps = algbw;
  c.pipeline_fill_us = pipeline_fill_us(a, p, bytes, step_algbw < 0 ? algbw : step_algbw);
  c.time_us = c.latency_us + c.pipeline_fill_us + static_cast<double>(bytes) / (1000.0 * algbw);
  return c;
}

double CollectiveModel::pipeline_fill_us(NcclAlgo a, NcclProto p, std::int64_t bytes, double algbw_GBps) const {
  const CommShape& s = shape_;
  const int g = s.ranks_per_node, nodes = s.nodes;
  int stages = 0;      // D: the pipeline's depth in chunk steps
  int pipelines = 0;   // P: chunks in flight side by side (channels, x NVLS heads)
  std::int64_t chunk = 0;
  const auto halve_while = [&](double needed_per_pipeline_chunks, std::int64_t floor) {
    while (static_cast<double>(bytes) / (static_cast<double>(pipelines) * static_cast<double>(chunk)) < needed_per_pipeline_chunks && chunk > floor)
      chunk /= 2;
  };
  switch (a) {
    case NcclAlgo::ring:
    case NcclAlgo::pat: return 0;  // every link busy from the first step: no idle stages
    case NcclAlgo::tree: {
      stages = 2 * ((g - 1) + floor_log2(nodes));  // up the chain and tree, then down
      pipelines = nccl_.graph(a).channels;
      if (p == NcclProto::simple) chunk = options_.simple_buff_bytes / kNcclSteps;
      if (p == NcclProto::ll) chunk = kLlBuffBytes / kNcclSteps / 2;
      if (p == NcclProto::ll128) {
        chunk = kLl128BuffBytes / kNcclSteps / 16 * 15;
        const double ppn = g, steps = 1 + floor_log2(nodes) + 0.1 * ppn;
        halve_while(steps * 64 / ppn, 131072);
        halve_while(steps * 16 / ppn, 32768);
      }
      break;
    }
    case NcclAlgo::nvls:
    case NcclAlgo::nvls_tree: {
      // NVLS: the switch's reduction, then its multicast; NVLS Tree adds the tree of nodes.
      stages = a == NcclAlgo::nvls ? 2 : 2 + 2 * floor_log2(nodes);
      pipelines = nvls_channels() * nvls_heads();  // nChannels x nvls.nHeads
      chunk = nvls_chunk_bytes(a, bytes);
      break;
    }
  }
  if (stages <= 1 || pipelines <= 0 || chunk <= 0 || !(algbw_GBps > 0)) return 0;
  const double per_pipeline = std::min(static_cast<double>(chunk), static_cast<double>(bytes) / pipelines);
  return (stages - 1) * per_pipeline * pipelines / (1000.0 * algbw_GBps);
}

int CollectiveModel::nvls_channels() const {
  return shape_.arch >= GpuArch::blackwell ? (shape_.nodes > 1 ? 32 : 24) : 16;  // NVLS_NCHANNELS_SM*
}

int CollectiveModel::nvls_heads() const {
  // NVLS's graph search finds one head per GPU, at most NCCL_MAX_NVLS_ARITY (search.cc).
  return std::min(shape_.ranks_per_node, kNcclMaxNvlsArity);
}

std::int64_t CollectiveModel::nvls_chunk_bytes(NcclAlgo a, std::int64_t bytes) const {
  const double concurrent_ops = static_cast<double>(nvls_channels()) * nvls_heads();
  std::int64_t chunk = 128 * 1024;  // NCCL_NVLS_CHUNKSIZE
  const auto cut = [&](double times, std::int64_t above, std::int64_t to) {
    if (static_cast<double>(bytes) < times * concurrent_ops * static_cast<double>(chunk) && chunk > above) chunk = to;
  };
  if (a == NcclAlgo::nvls) {
    cut(64, 65536, 65536);
    cut(8, 32768, 32768);
    cut(2, 16384, 16384);
  } else {
    if (shape_.nodes >= 4) chunk = 64 * 1024;  // NCCL_NVLSTREE_MAX_CHUNKSIZE default
    cut(32, 262144, 262144);
    cut(16, 131072, 131072);
    cut(4, 65536, 65536);
    cut(1, 32768, 32768);
  }
  return chunk;
}

NvlsRates CollectiveModel::nvls_rates(double rate_at_default_chunk_GBps, NcclAlgo a, std::int64_t bytes) const {
  // Per channel, in ns per byte (GB/s = bytes per ns): the copy at an endless chunk.
  const double channels = nvls_channels();
  const double step_ns = options_.nvls_step_overhead_us * 1e3;
  constexpr double kDefaultChunk = 128 * 1024;  // NCCL_NVLS_CHUNKSIZE
  const double copy_ns_per_byte = std::max(channels / rate_at_default_chunk_GBps - step_ns / kDefaultChunk,
                                           1.0 / options_.p2p_channel_GBps);
  if (bytes <= 0) return {channels / copy_ns_per_byte, channels / copy_ns_per_byte};
  const double chunk = static_cast<double>(nvls_chunk_bytes(a, bytes));
  NvlsRates r;
  r.step_GBps = channels / (copy_ns_per_byte + step_ns / chunk);
  // A channel takes one step per head and loop (all_reduce.h: loopSize = channels x heads x
  // chunk), a whole loop however little of it the call fills.
  const double heads = nvls_heads();
  const double steps = heads * std::ceil(static_cast<double>(bytes) / (channels * heads * chunk));
  const double b = static_cast<double>(bytes);
  r.call_GBps = b / (b * copy_ns_per_byte / channels + steps * step_ns);
  return r;
}

double CollectiveModel::network_hop_us(double nccl_hop_us, NcclProto p) const {
  const double own = spec_net_step_latency_us_ + (p == NcclProto::simple ? kSimpleCompletionUs : 0.0);
  return std::max(nccl_hop_us, own);
}

double CollectiveModel::p2p_hop_us(bool network, NcclProto p) const {
  if (!network) return nccl_hw_latency_us(false, NcclAlgo::ring, p) + options_.extra_hop_latency_us;
  const NcclAlgo algo = shape_.ranks_per_node == 1 ? NcclAlgo::tree : NcclAlgo::ring;  // ppn = 1: fully exposed
  return network_hop_us(nccl_hw_latency_us(true, algo, p), p) + options_.extra_hop_latency_us + options_.net_hop_extra_us;
}

double CollectiveModel::alltoall_latency_us(std::int64_t bytes) const {
  const CommShape& s = shape_;
  const int n = s.ranks(), g = s.ranks_per_node;
  if (n <= 1) return 0;
  // Network peers always run Simple (no LL buffers on p2p network connections).
  const double hop_intra = p2p_hop_us(false, alltoall_nvlink_protocol(bytes));
  const double hop_inter = p2p_hop_us(true, NcclProto::simple);
  const int c = options_.p2p_concurrent_peers;
  const int intra_peers = g - 1, inter_peers = n - g;
  const double rounds = std::ceil(static_cast<double>(intra_peers) / c) * hop_intra +
                        std::ceil(static_cast<double>(inter_peers) / c) * hop_inter;
  // The proxy thread posts every network send one after the other.
  const double proxy = inter_peers * s.net_overhead_us;
  return nccl_base_latency_us(NcclAlgo::ring, NcclProto::simple) + std::max(rounds, proxy) + options_.call_overhead_us;
}

NcclProto CollectiveModel::alltoall_nvlink_protocol(std::int64_t bytes) const {
  if (shape_.ranks_per_node < 2) return NcclProto::simple;
  return bytes / ranks() <= nccl_p2p_ll_threshold_bytes(shape_, nccl_.graph(NcclAlgo::ring)) ? NcclProto::ll
                                                                                              : NcclProto::simple;
}

NcclProto CollectiveModel::alltoall_protocol(std::int64_t bytes) const {
  // Across NVLink domains the bytes that set the time cross the network, which p2p runs with
  // Simple only (NCCL allocates no LL buffers on p2p network connections).
  return shape_.nodes > 1 ? NcclProto::simple : alltoall_nvlink_protocol(bytes);
}

double CollectiveModel::alltoall_fill_us(std::int64_t bytes) const {
  // Across NVLink domains the network carries the all-to-all and the NVLink copies hide behind it.
  if (shape_.nodes > 1 || shape_.ranks_per_node < 2 || bytes <= 0) return 0;
  const NcclP2pPlan plan = nccl_p2p_plan(shape_, nccl_.graph(NcclAlgo::ring), bytes / ranks());
  return p2p_step_fill_us(plan, plan.active_channels);
}

double CollectiveModel::p2p_step_fill_us(const NcclP2pPlan& plan, int channels) const {
  // A part crosses two stages per step, each at the channel's share of the GPU's NVLink rate: one
  // step more than the part's own steps.
  const double channel_GBps = shape_.nvlink_GBps * spec_.nvlink_efficiency / channels;
  return static_cast<double>(plan.step_bytes) / (1000.0 * channel_GBps);
}

double CollectiveModel::alltoall_channel_floor_us(std::int64_t bytes) const {
  if (ranks() <= 1 || bytes <= 0 || alltoall_protocol(bytes) != NcclProto::simple) return 0;
  // LL is slower per channel than this and has its own floor (alltoall_protocol_floor_us).
  const std::int64_t per_peer = bytes / ranks();
  const NcclP2pPlan plan = nccl_p2p_plan(shape_, nccl_.graph(NcclAlgo::ring), per_peer);
  const double out = static_cast<double>(per_peer) * (ranks() - 1);
  return out / (1000.0 * plan.active_channels * options_.p2p_channel_GBps);
}

double CollectiveModel::alltoall_protocol_floor_us(std::int64_t bytes) const {
  if (shape_.nodes > 1 || shape_.ranks_per_node < 2 || bytes <= 0) return 0;
  if (alltoall_protocol(bytes) != NcclProto::ll) return 0;
  // LL's rate is set by its threads, one 8-byte payload per trip of LLGenericOp's loop, each
  // trip a memory round trip (a poll or a load): NCCL's measured ceiling for an LL ring is
  // llMaxBw, where one trip receives, reduces and forwards a line. A p2p kernel's send and
  // receive are separate warps (sendrecv.h), and every GPU of an all-to-all sends and receives
  // all its bytes: two trips per byte where the ring takes one, half the ring's rate.
  const double out = static_cast<double>(bytes / ranks()) * (ranks() - 1);
  return out / (1000.0 * nccl_ll_max_bw_GBps(shape_) / 2);
}

namespace {
// A DES all-to-all's time is a pure function of the fabric as the DES sees it, the cluster, the
// size, the mode and PXN. whatif's interval model re-runs one configuration 30–40 times with
// perturbed kernel and step parameters, each with a new CollectiveModel: one process-wide table
// spares rebuilding (and re-simulating on) an 8192-GPU topology each time. The key holds every
// FabricSpec field but the output-only ones (name, nic, nvlink_generation): a new field that
// shapes the topology must join it.
std::string shared_transfer_key(const topo::FabricSpec& s, int hosts, int gpus_per_node, Mode mode,
                                std::int64_t bytes, bool pxn) {
  std::ostringstream k;
  k.precision(17);
  k << s.gpus_per_host << ' ' << s.gpus_per_nvlink_domain << ' ' << s.nvlink_GBps << ' ' << s.nvlink_latency_us << ' '
    << s.nvlink_efficiency << ' ' << static_cast<int>(s.network) << ' ' << s.nic_GBps << ' ' << s.nic_latency_us << ' '
    << s.net_step_latency_us << ' ' << s.nic_efficiency << ' ' << s.planes << ' ' << static_cast<int>(s.layout) << ' '
    << s.leaf_radix << ' ' << s.oversubscription << " | " << hosts << ' ' << gpus_per_node << ' '
    << static_cast<int>(mode) << ' ' << bytes << ' ' << pxn;
  return k.str();
}
std::mutex shared_transfers_mutex;
std::map<std::string, double>& shared_transfers() {
  static std::map<std::string, double> table;
  return table;
}
constexpr std::size_t kSharedTransfersMax = 1 << 16;  // entries; cleared when full (bounded memory)
}  // namespace

double CollectiveModel::alltoall_transfer_us(std::int64_t bytes, Mode mode) const {
  if (ranks() <= 1 || bytes <= 0) return 0;
  std::lock_guard lock(mutex_);
  const auto key = std::make_pair(static_cast<int>(mode), bytes);
  if (const auto it = transfer_cache_.find(key); it != transfer_cache_.end()) return it->second;
  const std::string shared_key = shared_transfer_key(spec_, hosts_, gpus_per_node_, mode, bytes, options_.pxn);
  {
    std::lock_guard shared_lock(shared_transfers_mutex);
    if (const auto it = shared_transfers().find(shared_key); it != shared_transfers().end()) {
      transfer_cache_.emplace(key, it->second);
      return it->second;
    }
  }
  if (!topology_) topology_ = topo::shared_topology(spec_, hosts_, gpus_per_node_);
  CollectiveSpec spec;
  spec.op = CollectiveOp::alltoall;
  spec.algorithm = Algorithm::direct;
  spec.bytes = bytes;
  spec.pxn = options_.pxn;
  const double us = simulate_collective(*topology_, spec, mode).time.to_us();
  transfer_cache_.emplace(key, us);
  std::lock_guard shared_lock(shared_transfers_mutex);
  if (shared_transfers().size() >= kSharedTransfersMax) shared_transfers().clear();
  shared_transfers().emplace(shared_key, us);
  return us;
}

double CollectiveModel::message_transfer_us(std::int64_t bytes, int src, int dst, Mode mode) const {
  std::lock_guard lock(mutex_);
  const auto key = std::make_tuple(static_cast<int>(mode), bytes, src, dst);
  if (const auto it = message_cache_.find(key); it != message_cache_.end()) return it->second;
  if (!topology_) topology_ = topo::shared_topology(spec_, hosts_, gpus_per_node_);
  CollectiveSpec spec;
  spec.op = CollectiveOp::sendrecv;
  spec.bytes = bytes;
  spec.src = src;
  spec.dst = dst;
  spec.pxn = options_.pxn;
  const double us = simulate_collective(*topology_, spec, mode).time.to_us();
  message_cache_.emplace(key, us);
  return us;
}

CollectiveCost CollectiveModel::sendrecv(std::int64_t bytes, int src, int dst, Mode mode, bool duplex) const {
  if (bytes < 0) throw_bad_usage("--bytes", std::to_string(bytes), "a size >= 0");
  const std::string range = "a rank in [0, " + std::to_string(ranks() - 1) + "]";
  if (src < 0 || src >= ranks()) throw_bad_usage("--src", std::to_string(src), range);
  if (dst < 0 || dst >= ranks()) throw_bad_usage("--dst", std::to_string(dst), range);
  CollectiveCost c;
  c.op = CollectiveOp::sendrecv;
  c.algorithm = "p2p";
  c.protocol = "simple";
  if (bytes == 0 || src == dst) return c;  // nothing leaves the rank (a send to itself is a local copy)
  const CommShape& s = shape_;
  const int g = s.ranks_per_node;
  const bool network = src / g != dst / g;  // NCCL's nodes are the NVLink domains
  const NcclP2pPlan plan = nccl_p2p_plan(s, nccl_.graph(NcclAlgo::ring), bytes);
  // A network peer always runs Simple (no LL buffers on p2p network connections).
  const NcclProto p = !network && plan.ll ? NcclProto::ll : NcclProto::simple;
  c.protocol = to_string(p);
  // Latency: NCCL's base, the message route's one hop and, across domains, the proxy's post.
  c.latency_us = nccl_base_latency_us(NcclAlgo::ring, NcclProto::simple) + p2p_hop_us(network, p) +
                 (network ? s.net_overhead_us : 0) + options_.call_overhead_us;
  // Transfer: the DES's time for the message, at least its protocol's rate: LL's (half NCCL's LL
  // ring ceiling when every GPU also receives, as in the all-to-all) or its parts' channel copy
  // rate (Simple).
  const double b = static_cast<double>(bytes);
  const double floor = p == NcclProto::ll ? b / (1000.0 * nccl_ll_max_bw_GBps(s) / (duplex ? 2 : 1))
                                          : b / (1000.0 * plan.parts * options_.p2p_channel_GBps);
  const double transfer = std::max(message_transfer_us(bytes, src, dst, mode), floor);
  c.bandwidth_GBps = b / (transfer * 1e3);
  // Inside one NVLink domain one more step of the parts' pipeline (the all-to-all's fill, one
  // peer's parts sharing the NVLink); across domains the network hides it.
  if (s.nodes == 1) c.pipeline_fill_us = p2p_step_fill_us(plan, plan.parts);
  c.time_us = c.latency_us + c.pipeline_fill_us + transfer;
  return c;
}

CollectiveCost CollectiveModel::cost(CollectiveOp op, std::int64_t bytes, const NcclChoice& allowed, Mode mode) const {
  CollectiveCost c = modelled_cost(op, bytes, allowed, mode);
  const double f = options_.time_factor_by_size_regime[static_cast<std::size_t>(size_regime_index(bytes))];
  if (f != 1.0) {  // every part alike, so that time = latency + fill + bytes / bandwidth still holds
    c.time_us *= f;
    c.latency_us *= f;
    c.pipeline_fill_us *= f;
    c.bandwidth_GBps /= f;
  }
  return c;
}

CollectiveCost CollectiveModel::modelled_cost(CollectiveOp op, std::int64_t bytes, const NcclChoice& allowed,
                                              Mode mode) const {
  if (bytes < 0) throw_bad_usage("--bytes", std::to_string(bytes), "a size >= 0");
  CollectiveCost c;
  c.op = op;
  if (ranks() <= 1 || bytes == 0) {
    c.algorithm = op == CollectiveOp::alltoall || op == CollectiveOp::sendrecv ? "p2p" : "ring";
    c.protocol = "simple";
    return c;
  }
  if (op == CollectiveOp::alltoall) {
    c.algorithm = "p2p";
    c.protocol = to_string(alltoall_protocol(bytes));
    c.latency_us = alltoall_latency_us(bytes);
    // The transfer is the DES's, or the protocol's own floor where that is slower (LL).
    const double transfer = std::max({alltoall_transfer_us(bytes, mode), alltoall_protocol_floor_us(bytes),
                                      alltoall_channel_floor_us(bytes)});
    c.bandwidth_GBps = transfer > 0 ? static_cast<double>(bytes) / (transfer * 1e3) : 0;
    c.pipeline_fill_us = alltoall_fill_us(bytes);
    c.time_us = c.latency_us + c.pipeline_fill_us + transfer;
    return c;
  }
  if (op == CollectiveOp::sendrecv) {
    // nccl-tests' sendrecv: rank r sends to r + 1 and receives from r - 1, every GPU both ways. Its
    // pairs are of two kinds, inside an NVLink domain and across domains (the last rank of a
    // domain to the first of the next); each GPU's links carry one send and one receive, so no
    // two pairs share a link and the call takes as long as its slowest pair.
    std::optional<CollectiveCost> slowest;
    for (const auto& [src, dst] : nccl_tests_sendrecv_pairs(ranks(), shape_.ranks_per_node)) {
      CollectiveCost pair = sendrecv(bytes, src, dst, mode, true);
      if (!slowest || pair.time_us > slowest->time_us) slowest = std::move(pair);
    }
    return *slowest;
  }
  const NcclFunc f = to_nccl(op);
  const auto nccl = nccl_.choose(f, bytes, allowed);
  if (!nccl) {
    throw UsageError("--algo/--proto: no algorithm and protocol left that NCCL enables for " + std::string(to_string(f)) +
                     " on " + std::to_string(shape_.nodes) + " x " + std::to_string(shape_.ranks_per_node) +
                     " ranks (NCCL would refuse the forced choice too)");
  }
  // A tuner plugin overrides NCCL's choice unless NCCL_ALGO / NCCL_PROTO restrict it (the plugin
  // then stands aside, as aws-ofi-nccl's does); NCCL's model is then quoted for the pair it runs.
  std::optional<NcclPrediction> run = nccl;
  std::string chosen_by = "nccl";
  if (!allowed.restricts(f)) {
    const auto pick = tuner_plugin_pick(spec_.tuner_plugin, f, shape_.nodes, shape_.ranks_per_node, bytes,
                                        [&](NcclAlgo a, NcclProto p) { return nccl_.enabled(f, a, p); });
    if (pick) {
      run = nccl_.predict(f, pick->algo, pick->proto, bytes);
      chosen_by = topo::to_string(spec_.tuner_plugin);
    }
  }
  if (!run) throw std::logic_error("CollectiveModel: the tuner plugin's pick is not enabled");
  auto priced = price(f, run->algo, run->proto, bytes);
  if (!priced) throw std::logic_error("CollectiveModel: NCCL's choice is not priced");
  priced->nccl = run;
  priced->chosen_by = chosen_by;
  return *priced;
}

}  // namespace dionsim::sim
