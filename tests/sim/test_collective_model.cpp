// The collective model: NCCL 2.28.3's tuning model in closed form at 2, 8 and 1024 ranks, the
// algorithm/protocol switch points, dionsim's pricing, all-to-all through the DES (fast = exact,
// PXN), whatif's timer = `collective`, and the published-rows validation.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

#include "common/error.hpp"
#include "sim/aws_ofi_tuner.hpp"
#include "sim/collective_model.hpp"
#include "sim/nccl_tuning.hpp"
#include "analysis/calibration/published_collectives.hpp"
#include "sim/step_collectives.hpp"
#include "topologies/topology.hpp"
#include "topologies/topology_file.hpp"

using namespace dionsim;
using namespace dionsim::sim;
using namespace dionsim::analysis;  // the published-rows validation
using Catch::Detail::Approx;

namespace {

CommShape hopper(int nodes, int gpn) {
  CommShape s;
  s.arch = GpuArch::hopper;
  s.nodes = nodes;
  s.ranks_per_node = gpn;
  s.nvlink_GBps = 450;
  s.nic_GBps = 50;
  s.nics_per_node = gpn;
  return s;
}

// dionsim's algorithm bandwidth for one pair on a preset's cluster (the pair must be enabled).
double priced_GBps(const std::string& preset, int nodes, int gpn, NcclFunc f, NcclAlgo a, NcclProto p,
                   std::int64_t bytes) {
  const CollectiveModel model(topo::preset(preset), nodes, gpn);
  const auto c = model.price(f, a, p, bytes);
  REQUIRE(c);
  return c->bandwidth_GBps;
}

}  // namespace

TEST_CASE("NCCL graphs: NVLink and NIC budgets with NCCL's speed tables and duplication", "[collective][model]") {
  // One node: 450 GB/s x 20.6/25 = 370.8 per GPU; 60 GB/s x 6 channels, duplicated to 12 x 30.
  const auto one = nccl_graphs(hopper(1, 8));
  CHECK(one[0].channels == 12);  // ring
  CHECK(one[0].bw_intra_GBps == Approx(30.0));
  // 128 nodes x 8 NICs of 50 GB/s: 8 channels at 48 would need 384 GB/s of each GPU's 370.8 of
  // NVLink, so 45 GB/s x 8 channels, not duplicated (sm90, < 50 GB/s, > 4 channels).
  const auto big = nccl_graphs(hopper(128, 8));
  CHECK(big[0].channels == 8);
  CHECK(big[0].bw_inter_GBps == Approx(45.0));
  // One GPU per node: 1 channel at 48, duplicated to 2 x 24.
  const auto ppn1 = nccl_graphs(hopper(10, 1));
  CHECK(ppn1[0].channels == 2);
  CHECK(ppn1[0].bw_inter_GBps == Approx(24.0));
}

TEST_CASE("NCCL graphs: the search's second pass raises a tree's bwIntra and NVLS's bwInter", "[collective][model]") {
  // A tree keeps the ring's channels and climbs the speed table with bwIntra while it is below
  // twice bwInter and the NVLink budget holds. p4d-like: 8 NICs of 6.25 GB/s on A100 NVLink
  // (300 x 0.8 = 240 per GPU): the ring runs 8 x 6; the tree's bwIntra rises 6 -> 7 -> 9 -> 10 -> 12
  // (12 is not below 2 x 6), so NCCL's model prices a 2-node tree all-reduce above the ring.
  CommShape a100 = hopper(2, 8);
  a100.arch = GpuArch::ampere;
  a100.nvlink_GBps = 300;
  a100.nic_GBps = 6.25;
  const auto p4d = nccl_graphs(a100);
  CHECK(p4d[static_cast<int>(NcclAlgo::ring)].channels == 8);
  CHECK(p4d[static_cast<int>(NcclAlgo::ring)].bw_intra_GBps == Approx(6.0));
  CHECK(p4d[static_cast<int>(NcclAlgo::tree)].channels == 8);
  CHECK(p4d[static_cast<int>(NcclAlgo::tree)].bw_intra_GBps == Approx(12.0));
  CHECK(p4d[static_cast<int>(NcclAlgo::tree)].bw_inter_GBps == Approx(6.0));
  const NcclTuningModel two_p4d(a100);
  CHECK(two_p4d.choose(NcclFunc::allreduce, 1LL << 31)->algo == NcclAlgo::tree);
  // H100 with 8 x 400G: 8 tree channels at 48 would need 384 GB/s of 370.8: bwIntra stays 45.
  const auto h100 = nccl_graphs(hopper(2, 8));
  CHECK(h100[static_cast<int>(NcclAlgo::tree)].bw_intra_GBps == Approx(45.0));
  // NVLS on one node: 8 channels at 50 (8 x 60 = 480 > 370.8 x 8/7), then bwInter rises to 60,
  // the top of the table: NCCL's model gives 8 x min(50 x 0.85 x 7/8 x 2, 60) = 480 GB/s of bus
  // bandwidth, 480 x 8 / 14 = 274 GB/s algorithm bandwidth (a published 1 x 8 H100 run: 276).
  const auto one = nccl_graphs(hopper(1, 8));
  const auto& nvls = one[static_cast<int>(NcclAlgo::nvls)];
  CHECK(nvls.channels == 8);
  CHECK(nvls.bw_intra_GBps == Approx(50.0));
  CHECK(nvls.bw_inter_GBps == Approx(60.0));
  const NcclTuningModel node(hopper(1, 8));
  CHECK(node.base_bandwidth_GBps(NcclFunc::allreduce, NcclAlgo::nvls, NcclProto::simple) == Approx(480.0 * 8 / 14));
  // Across nodes NVLS's bwInter is the NIC's: 48 stays 48 on NDR400.
  CHECK(nccl_graphs(hopper(2, 8))[static_cast<int>(NcclAlgo::nvls)].bw_inter_GBps == Approx(48.0));
}

TEST_CASE("NCCL tuning model: ring latency and bandwidth in closed form at 2, 8 and 1024 ranks", "[collective][model]") {
  {
    const NcclTuningModel m(hopper(1, 2));  // 2 ranks: 1 step
    const auto p = m.predict(NcclFunc::allgather, NcclAlgo::ring, NcclProto::simple, 1 << 20);
    REQUIRE(p);
    CHECK(p->latency_us == Approx(8.4 + 3.4));
    CHECK(p->bw_GBps == Approx(12 * 30.0 * 2 / 1));
  }
  {
    const NcclTuningModel m(hopper(1, 8));  // 8 ranks: 7 NVLink steps
    const auto p = m.predict(NcclFunc::allgather, NcclAlgo::ring, NcclProto::simple, 1 << 20);
    REQUIRE(p);
    CHECK(p->latency_us == Approx(8.4 + 7 * 3.4));
    CHECK(p->bw_GBps == Approx(360.0 * 8 / 7));
    CHECK(p->time_us == Approx(p->latency_us + (1 << 20) / (1000.0 * p->bw_GBps)));
  }
  {
    const NcclTuningModel m(hopper(128, 8));  // 1024 ranks: 896 NVLink steps (at the 1 us net overhead), 127 network
    const auto p = m.predict(NcclFunc::allgather, NcclAlgo::ring, NcclProto::ll, 8192);
    REQUIRE(p);
    CHECK(p->latency_us == Approx(6.6 + 896 * 1.0 + 127 * 2.7));
    CHECK(p->bw_GBps == Approx(20.4 * 1024 / 1023));  // LL capped at llMaxBw (Intel host, > 2 nodes)
    // Tree all-reduce: 2 x (7 intra + log2(128) = 7 network hops), LL.
    const auto t = m.predict(NcclFunc::allreduce, NcclAlgo::tree, NcclProto::ll, 8192);
    REQUIRE(t);
    CHECK(t->latency_us == Approx(6.8 + 2 * (7 * 0.6 + 7 * 5.0)));
  }
}

TEST_CASE("NCCL tuning model: enable rules and switch points", "[collective][model]") {
  const NcclTuningModel one(hopper(1, 8));
  CHECK_FALSE(one.enabled(NcclFunc::allreduce, NcclAlgo::nvls_tree, NcclProto::simple));  // one node
  CHECK(one.enabled(NcclFunc::allreduce, NcclAlgo::nvls, NcclProto::simple));
  CHECK_FALSE(one.enabled(NcclFunc::allgather, NcclAlgo::tree, NcclProto::simple));  // tree: all-reduce only
  CHECK_FALSE(one.enabled(NcclFunc::allgather, NcclAlgo::pat, NcclProto::simple));   // PAT: one GPU per node
  const NcclTuningModel multi(hopper(16, 8));
  CHECK_FALSE(multi.enabled(NcclFunc::allreduce, NcclAlgo::nvls, NcclProto::simple));  // needs CollNet across nodes
  CHECK(multi.enabled(NcclFunc::allreduce, NcclAlgo::nvls_tree, NcclProto::simple));
  CHECK(NcclTuningModel(hopper(16, 1)).enabled(NcclFunc::allgather, NcclAlgo::pat, NcclProto::simple));

  // Protocols go LL -> LL128 -> Simple as the size grows, and each switch is where the times cross.
  NcclChoice ring_only = NcclChoice::parse("ring", "auto");
  CHECK(one.choose(NcclFunc::allgather, 1024, ring_only)->proto == NcclProto::ll);
  CHECK(one.choose(NcclFunc::allgather, 1LL << 30, ring_only)->proto == NcclProto::simple);
  std::int64_t switch_at = 0;
  for (std::int64_t s = 1024; s <= (1LL << 30); s *= 2) {
    if (one.choose(NcclFunc::allgather, s, ring_only)->proto != NcclProto::ll) {
      switch_at = s;
      break;
    }
  }
  REQUIRE(switch_at > 0);
  const auto ll = one.predict(NcclFunc::allgather, NcclAlgo::ring, NcclProto::ll, switch_at / 2)->time_us;
  const auto next = one.choose(NcclFunc::allgather, switch_at / 2, ring_only)->time_us;
  CHECK(ll == Approx(next));  // below the switch LL is the minimum
  // All-reduce on one H100 node: NVLS for large buffers, LL for tiny ones.
  CHECK(one.choose(NcclFunc::allreduce, 1LL << 30)->algo == NcclAlgo::nvls);
  CHECK(one.choose(NcclFunc::allreduce, 1024)->proto == NcclProto::ll);
}

TEST_CASE("NCCL_ALGO / NCCL_PROTO parsing", "[collective][model]") {
  using F = NcclFunc;
  const auto c = NcclChoice::parse("^ring,tree", "LL128");
  for (const F f : {F::allgather, F::reducescatter, F::allreduce}) {
    CHECK_FALSE(c.of(f).algos[0]);
    CHECK_FALSE(c.of(f).algos[1]);
    CHECK(c.of(f).algos[2]);
    CHECK(c.of(f).protos[1]);
    CHECK_FALSE(c.of(f).protos[0]);
    CHECK(c.restricts(f));
  }
  CHECK(NcclChoice::parse("auto", "simple").restricts(F::allgather));
  CHECK_FALSE(NcclChoice::parse("auto", "auto").restricts(F::allreduce));
  CHECK_FALSE(NcclChoice{}.restricts(F::allreduce));
  CHECK_THROWS_AS(NcclChoice::parse("rings", "auto"), UsageError);
  CHECK_THROWS_AS(NcclChoice::parse("auto", "ll256"), UsageError);
  // Forcing what NCCL cannot run is refused, as NCCL would.
  const CollectiveModel m(topo::preset("h100-ndr400"), 16, 8);
  CHECK_THROWS_AS(m.cost(CollectiveOp::allgather, 1 << 20, NcclChoice::parse("tree", "auto")), UsageError);
}

TEST_CASE("NCCL_ALGO / NCCL_PROTO per function, as NCCL >= 2.24 reads them (tuning.cc parseList)", "[collective][model]") {
  using F = NcclFunc;
  // NCCL's own examples: ring and tree for all, then only tree for all-reduce.
  const auto a = NcclChoice::parse("Ring,Tree;AllReduce:Tree", "auto");
  CHECK(a.of(F::allgather).algos == std::array<bool, kNcclAlgos>{true, true, false, false, false});
  CHECK(a.of(F::allreduce).algos == std::array<bool, kNcclAlgos>{false, true, false, false, false});
  // "LL,Simple;allreduce:^LL": all-reduce takes everything but LL.
  const auto p = NcclChoice::parse("auto", "LL,Simple;allreduce:^LL");
  CHECK(p.of(F::reducescatter).protos == std::array<bool, kNcclProtos>{true, false, true});
  CHECK(p.of(F::allreduce).protos == std::array<bool, kNcclProtos>{false, true, true});
  // A function's entry alone leaves the others at NCCL's default; Broadcast and Reduce entries
  // are read and change nothing priced.
  const auto only = NcclChoice::parse("allgather:ring;broadcast:ring;reduce:ring", "auto");
  CHECK(only.restricts(F::allgather));
  CHECK_FALSE(only.restricts(F::allreduce));
  CHECK_FALSE(only.restricts(F::reducescatter));
  // CollNet names are NCCL's and parse; a list that names them for a function says so.
  const auto collnet = NcclChoice::parse("ring;allreduce:collnetdirect,ring", "auto");
  CHECK(collnet.of(F::allreduce).names_collnet);
  CHECK_FALSE(collnet.of(F::allgather).names_collnet);
  CHECK(collnet.names_collnet());
  CHECK_FALSE(NcclChoice::parse("^CollNetDirect,CollNetChain", "auto").names_collnet());
  // What NCCL refuses: an unprefixed later entry, an unknown function, an unknown name.
  CHECK_THROWS_WITH(NcclChoice::parse("ring;tree", "auto"), Catch::Contains("every entry after the first"));
  CHECK_THROWS_WITH(NcclChoice::parse("alltoall:ring", "auto"), Catch::Contains("unknown function 'alltoall'"));
  CHECK_THROWS_AS(NcclChoice::parse("allreduce:rings", "auto"), UsageError);
  CHECK_THROWS_AS(NcclChoice::parse("allreduce:ring:tree", "auto"), UsageError);
  // The model runs what the call's function allows: all-gather ring on 16 x 8 H100 while
  // all-reduce keeps its tree.
  const CollectiveModel m(topo::preset("h100-ndr400"), 16, 8);
  const auto forced = NcclChoice::parse("allgather:ring;allreduce:tree", "allgather:simple");
  CHECK(m.cost(CollectiveOp::allgather, 1 << 20, forced).algorithm == "ring");
  CHECK(m.cost(CollectiveOp::allgather, 1 << 20, forced).protocol == "simple");
  CHECK(m.cost(CollectiveOp::allreduce, 1 << 30, forced).algorithm == "tree");
  CHECK(m.cost(CollectiveOp::allreduce, 1 << 30).algorithm != "tree");
}

TEST_CASE("aws-ofi-nccl's region tuner overrides NCCL's choice on p5 / p5e / p5en / p6 beyond two nodes", "[collective][model]") {
  auto pick = [](const std::string& fabric, CollectiveOp op, int nodes, std::int64_t bytes,
                 const NcclChoice& allowed = {}) {
    const CollectiveModel m(topo::preset(fabric), nodes, 8);
    const auto c = m.cost(op, bytes, allowed);
    return c.algorithm + "/" + c.protocol + " by " + c.chosen_by;
  };
  constexpr std::int64_t MiB = std::int64_t{1} << 20, GiB = std::int64_t{1} << 30;
  // p5, 4 nodes (32 ranks): Tree/LL128 below the ring's edge (36 MiB at 32 ranks), Ring/LL128 to
  // 1.32 GiB, Ring/Simple from 1.5 GiB: the jump in the published p5 runs' bus bandwidth
  // (280 -> 350 GB/s at 2 GiB on 4 nodes, at 4 GiB on 8, at 8 GiB on 16).
  CHECK(pick("p5-efa", CollectiveOp::allreduce, 4, 16 * MiB) == "tree/ll128 by aws-ofi-p5");
  CHECK(pick("p5-efa", CollectiveOp::allreduce, 4, 64 * MiB) == "ring/ll128 by aws-ofi-p5");
  CHECK(pick("p5-efa", CollectiveOp::allreduce, 4, 1 * GiB) == "ring/ll128 by aws-ofi-p5");
  CHECK(pick("p5-efa", CollectiveOp::allreduce, 4, 2 * GiB) == "ring/simple by aws-ofi-p5");
  // A vertex counts as inside: (2 GiB, 64 ranks) closes the Ring/LL128 region, checked first.
  CHECK(pick("p5-efa", CollectiveOp::allreduce, 8, 2 * GiB) == "ring/ll128 by aws-ofi-p5");
  CHECK(pick("p5-efa", CollectiveOp::allreduce, 8, 4 * GiB) == "ring/simple by aws-ofi-p5");
  // 16 nodes, 4 GiB: the NVLS Tree region between 2 and 6 GiB at 128 ranks.
  CHECK(pick("p5-efa", CollectiveOp::allreduce, 16, 4 * GiB) == "nvlstree/simple by aws-ofi-p5");
  // p5en has its own tables, all-gather and reduce-scatter too.
  CHECK(pick("p5en-efa", CollectiveOp::allgather, 4, 1 * MiB) == "ring/ll by aws-ofi-p5en");
  CHECK(pick("p5en-efa", CollectiveOp::allgather, 4, 8 * GiB) == "ring/simple by aws-ofi-p5en");
  CHECK(pick("p5en-efa", CollectiveOp::reducescatter, 4, 64 * MiB) == "ring/ll128 by aws-ofi-p5en");
  CHECK(pick("p5en-efa", CollectiveOp::allreduce, 4, 400 * MiB) == "nvlstree/simple by aws-ofi-p5en");
  CHECK(pick("p5en-efa", CollectiveOp::allreduce, 4, 4 * GiB) == "ring/simple by aws-ofi-p5en");
  // p5e runs p5's tables (the plugin's platform "p5/p5e").
  CHECK(pick("p5e-efa", CollectiveOp::allreduce, 4, 2 * GiB) == "ring/simple by aws-ofi-p5");
  // p6-b200's own (region_init_internal_p6), at 4 nodes (32 ranks): Tree/LL to 384 KiB, Tree/LL128
  // to the ring's corner at 17.5 MiB, Ring/LL128 to 127.5 MiB, NVLS Tree to 415 MiB, then Ring/Simple.
  CHECK(pick("p6-b200-efa", CollectiveOp::allreduce, 4, 256 * 1024) == "tree/ll by aws-ofi-p6");
  CHECK(pick("p6-b200-efa", CollectiveOp::allreduce, 4, 8 * MiB) == "tree/ll128 by aws-ofi-p6");
  CHECK(pick("p6-b200-efa", CollectiveOp::allreduce, 4, 64 * MiB) == "ring/ll128 by aws-ofi-p6");
  CHECK(pick("p6-b200-efa", CollectiveOp::allreduce, 4, 256 * MiB) == "nvlstree/simple by aws-ofi-p6");
  CHECK(pick("p6-b200-efa", CollectiveOp::allreduce, 4, 1 * GiB) == "ring/simple by aws-ofi-p6");
  CHECK(pick("p6-b200-efa", CollectiveOp::allgather, 4, 1 * MiB) == "ring/ll by aws-ofi-p6");
  CHECK(pick("p6-b200-efa", CollectiveOp::allgather, 4, 64 * MiB) == "ring/ll128 by aws-ofi-p6");
  CHECK(pick("p6-b200-efa", CollectiveOp::allgather, 4, 1 * GiB) == "ring/simple by aws-ofi-p6");
  CHECK(pick("p6-b200-efa", CollectiveOp::reducescatter, 4, 256 * MiB) == "ring/ll128 by aws-ofi-p6");
  CHECK(pick("p6-b200-efa", CollectiveOp::reducescatter, 4, 1 * GiB) == "ring/simple by aws-ofi-p6");
  // p6-b300's (region_init_internal_p6_b300), 4 nodes: Tree/LL to 480 KiB, Tree/LL128 to 52 MiB,
  // Ring/LL128 to 576 MiB, then Ring/Simple (its NVLS Tree region closes to a point at 32 ranks);
  // 8 nodes: NVLS Tree between 960 MiB and 1.875 GiB. All-gather and reduce-scatter part at 832 /
  // 704 MiB on 4 nodes.
  CHECK(pick("p6-b300-efa", CollectiveOp::allreduce, 4, 256 * 1024) == "tree/ll by aws-ofi-p6-b300");
  CHECK(pick("p6-b300-efa", CollectiveOp::allreduce, 4, 16 * MiB) == "tree/ll128 by aws-ofi-p6-b300");
  CHECK(pick("p6-b300-efa", CollectiveOp::allreduce, 4, 256 * MiB) == "ring/ll128 by aws-ofi-p6-b300");
  CHECK(pick("p6-b300-efa", CollectiveOp::allreduce, 4, 1 * GiB) == "ring/simple by aws-ofi-p6-b300");
  CHECK(pick("p6-b300-efa", CollectiveOp::allreduce, 8, 1536 * MiB) == "nvlstree/simple by aws-ofi-p6-b300");
  CHECK(pick("p6-b300-efa", CollectiveOp::allreduce, 8, 3 * GiB) == "ring/simple by aws-ofi-p6-b300");
  CHECK(pick("p6-b300-efa", CollectiveOp::allgather, 4, 768 * MiB) == "ring/ll128 by aws-ofi-p6-b300");
  CHECK(pick("p6-b300-efa", CollectiveOp::reducescatter, 4, 768 * MiB) == "ring/simple by aws-ofi-p6-b300");
  // Where the tuner stands aside NCCL's own choice stands: <= 2 nodes, NCCL_ALGO / NCCL_PROTO set,
  // shapes it has no table for (p5's all-gather at 8 GPUs per node), fabrics without the plugin.
  const auto nccl_only = [](const std::string& fabric, CollectiveOp op, int nodes, std::int64_t bytes,
                            const NcclChoice& allowed = {}) {
    const CollectiveModel m(topo::preset(fabric), nodes, 8);
    const auto c = m.cost(op, bytes, allowed);
    const auto n = m.nccl().choose(to_nccl(op), bytes, allowed);
    REQUIRE(n);
    CHECK(c.chosen_by == "nccl");
    CHECK(c.algorithm == to_string(n->algo));
    CHECK(c.protocol == to_string(n->proto));
  };
  nccl_only("p5-efa", CollectiveOp::allreduce, 2, 1 * GiB);
  nccl_only("p5-efa", CollectiveOp::allreduce, 4, 2 * GiB, NcclChoice::parse("auto", "simple"));
  nccl_only("p5-efa", CollectiveOp::allgather, 4, 1 * GiB);
  nccl_only("h100-ndr400", CollectiveOp::allreduce, 4, 2 * GiB);
  nccl_only("p4d-efa", CollectiveOp::allreduce, 4, 2 * GiB);
  // A region whose pair NCCL does not enable is skipped (the tuner skips NCCL's ignored entries).
  CHECK_FALSE(tuner_plugin_pick(TunerPlugin::aws_ofi_p5, NcclFunc::allreduce, 4, 8, 2 * GiB,
                                [](NcclAlgo a, NcclProto) { return a != NcclAlgo::ring; }));
  // Beyond its limits (100 GiB) it leaves NCCL's choice too.
  CHECK_FALSE(tuner_plugin_pick(TunerPlugin::aws_ofi_p5, NcclFunc::allreduce, 4, 8, 200 * GiB,
                                [](NcclAlgo, NcclProto) { return true; }));
  // A topology file names the plugin; a wrong name is refused with what was expected.
  CHECK(std::string(topo::to_string(topo::preset("p5-efa").tuner_plugin)) == "aws-ofi-p5");
}

TEST_CASE("dionsim's pricing: link-limited bandwidth, NCCL's latency structure, the network's step latency",
          "[collective][model]") {
  const CollectiveModel one(topo::preset("h100-ndr400"), 1, 8);
  const auto ag = one.price(NcclFunc::allgather, NcclAlgo::ring, NcclProto::simple, 1LL << 30);
  REQUIRE(ag);
  // A ring runs no faster than NCCL's channels at their speed: 12 x 30 = 360 GB/s of bus
  // bandwidth, below one GPU's NVLink (450 x 20.6 / 25 = 370.8).
  CHECK(ag->bandwidth_GBps == Approx(12 * 30.0 * 8 / 7.0));
  // 10 nodes x 8 with 8 NDR NICs: 8 channels x 45 (8 x 48 exceeds the NVLink budget) = 360
  // GB/s, below NVLink's 370.8 and the NICs' 8 x 48 = 384.
  const CollectiveModel ten(topo::preset("h100-ndr400"), 10, 8);
  const auto wide = ten.price(NcclFunc::allgather, NcclAlgo::ring, NcclProto::simple, 1LL << 30);
  REQUIRE(wide);
  CHECK(wide->bandwidth_GBps == Approx(8 * 45.0 * 80 / 79.0));
  CHECK(ag->latency_us == Approx(8.4 + 7 * 3.4));
  // NVLS all-reduce: S (1 + 1/G) per GPU at NCCL's NVLS efficiency.
  const auto nvls = one.price(NcclFunc::allreduce, NcclAlgo::nvls, NcclProto::simple, 1LL << 30);
  REQUIRE(nvls);
  CHECK(nvls->bandwidth_GBps == Approx(450 * 20.6 / 25 * 0.85 / (1 + 1 / 8.0)));

  const auto spec = topo::preset("h100-ndr400");
  REQUIRE(spec.net_step_latency_us == 0);  // InfiniBand: NCCL's own network constants
  const CollectiveModel big(spec, 128, 8);
  const auto ring = big.price(NcclFunc::allgather, NcclAlgo::ring, NcclProto::ll, 8192);
  REQUIRE(ring);
  // NCCL's 2.7 us LL network hop on each of 127 node crossings, 1.0 us (its net overhead) on the
  // 896 NVLink steps.
  CHECK(ring->latency_us == Approx(6.6 + 896 * 1.0 + 127 * 2.7));
  CHECK(ring->pipeline_fill_us == 0);  // a ring has no idle stages
  // The check, the 1024-rank 8 KiB all-gather against NCCL's model: both ring/LL and
  // within a factor 2 — the same time, since over InfiniBand a network step costs what NCCL's
  // IB constants say (its IB transport reports no latency of its own). Before the model: 55 ms
  // (1023 steps x 60 us); with the old preset's assumed 10 us per message on each of 127 hops,
  // 2.02 x NCCL's time.
  const auto c = big.cost(CollectiveOp::allgather, 8192);
  REQUIRE(c.nccl);
  CHECK(c.algorithm == "ring");
  CHECK(c.protocol == "ll");
  CHECK(c.nccl->algo == NcclAlgo::ring);
  CHECK(c.time_us / c.nccl->time_us < 2.0);
  CHECK(c.time_us == Approx(c.nccl->time_us).epsilon(1e-9));
  CHECK(c.time_us < 55030.0 / 20);

  // EFA: AWS's per-step network latency (20 us on p5, 23 with Simple's completion) replaces
  // NCCL's 2.7 / 14 us where it is larger; NVLink steps keep NCCL's constants.
  const auto efa = topo::preset("p5-efa");
  REQUIRE(efa.net_step_latency_us == 20);
  const CollectiveModel aws(efa, 16, 8);
  const auto ll = aws.price(NcclFunc::allgather, NcclAlgo::ring, NcclProto::ll, 8192);
  const auto simple = aws.price(NcclFunc::allgather, NcclAlgo::ring, NcclProto::simple, 8192);
  REQUIRE(ll);
  REQUIRE(simple);
  CHECK(ll->latency_us == Approx(aws.nccl().base_latency_us(NcclFunc::allgather, NcclAlgo::ring, NcclProto::ll) +
                                 15 * (20 - 2.7)));
  CHECK(simple->latency_us ==
        Approx(aws.nccl().base_latency_us(NcclFunc::allgather, NcclAlgo::ring, NcclProto::simple) + 15 * (23 - 14.0)));
}

TEST_CASE("dionsim's pricing: NCCL's per-channel ceilings of NVLS Tree and the Simple tree", "[collective][model]") {
  // 2 x 8 H100 on NDR400: the links give NVLS Tree min(NVLS 370.8 x 0.85 / (9/8) = 280, NICs
  // 8 x 48 = 384) GB/s; NVIDIA's measured ceiling of 57.7 GB/s per NVLS-Tree channel (Hopper,
  // 2 nodes) over 8 channels is 461.6 GB/s of bus bandwidth = 461.6 x 16 / 30 algorithm.
  REQUIRE(CollectiveModel(topo::preset("h100-ndr400"), 2, 8).nccl().graph(NcclAlgo::nvls_tree).channels == 8);
  const double two = priced_GBps("h100-ndr400", 2, 8, NcclFunc::allreduce, NcclAlgo::nvls_tree, NcclProto::simple, 1LL << 34);
  CHECK(two == Approx(8 * 57.7 * 16 / 30.0));
  CHECK(two < 450 * 20.6 / 25 * 0.85 / (1 + 1 / 8.0));
  // Beyond two nodes the ceiling is 45.5 per channel; the nodes' NICs (half the node rate in a
  // tree: 192 GB/s) stay below it at 10 x 8 ranks: 8 x 45.5 x 80 / 158 = 184.3.
  CHECK(priced_GBps("h100-ndr400", 10, 8, NcclFunc::allreduce, NcclAlgo::nvls_tree, NcclProto::simple, 1LL << 34) ==
        Approx(8 * 45.5 * 80 / 158.0));
  // B200's ceiling (96 GB/s per channel at 2 nodes) is above its links: the links decide.
  CHECK(priced_GBps("b200-ndr400", 2, 8, NcclFunc::allreduce, NcclAlgo::nvls_tree, NcclProto::simple, 1LL << 34) ==
        Approx(8 * 50 * 0.96));
  // The Simple tree: 36.0 GB/s per channel beyond 2 nodes on Hopper, below the node's links
  // (8 x 45 = 360 < 370.8 / 2 x 2 and the NICs' 384).
  const int ch = CollectiveModel(topo::preset("h100-ndr400"), 10, 8).nccl().graph(NcclAlgo::tree).channels;
  CHECK(priced_GBps("h100-ndr400", 10, 8, NcclFunc::allreduce, NcclAlgo::tree, NcclProto::simple, 1LL << 34) ==
        Approx(ch * 36.0 / 2));
}

TEST_CASE("dionsim's pricing: a tree's chain carries 2S over each GPU's NVLink", "[collective][model]") {
  // Inside a node the tree reduces up a chain and broadcasts down it: every GPU sends 2S per
  // direction, so NVLink bounds the algorithm bandwidth at half its rate, times NCCL's tree
  // efficiency (0.92; x 0.85 on sm90+). Two A100 nodes on 8 x 25 GB/s of RoCE: NVLink 240 / 2 =
  // 120 x 0.92 (the NICs' 8 x 25 x 0.95 = 190 carry S per direction: not the bound).
  CHECK(priced_GBps("a100-roce100", 2, 8, NcclFunc::allreduce, NcclAlgo::tree, NcclProto::simple, 1LL << 33) ==
        Approx(300 * 0.8 / 2 * 0.92));
  CHECK(nccl_tree_efficiency(GpuArch::ampere) == Approx(0.92));
  CHECK(nccl_tree_efficiency(GpuArch::hopper) == Approx(0.92 * 0.85));
  // Two p4d nodes (EFA, 8 x 6.25 GB/s at 0.75): the NICs bound it, S per direction at 2 nodes.
  CHECK(priced_GBps("p4d-efa", 2, 8, NcclFunc::allreduce, NcclAlgo::tree, NcclProto::simple, 1LL << 33) ==
        Approx(8 * 6.25 * 0.75 * 0.92));
  // Beyond two nodes an internal node's NICs carry 2S: half the node rate.
  CHECK(priced_GBps("p4d-efa", 4, 8, NcclFunc::allreduce, NcclAlgo::tree, NcclProto::simple, 1LL << 33) ==
        Approx(8 * 6.25 * 0.75 / 2 * 0.92));
}

TEST_CASE("dionsim's pricing: NVLS Tree's latency over EFA is aws-ofi-nccl's two NVLink passes", "[collective][model]") {
  // p5: 2 x (23 + log2(nodes) x (20 + 3)) us, the NVLS reduction and multicast on both sides of
  // the tree of nodes (aws-ofi-nccl's model); over InfiniBand NCCL's 25 + 2 log2(nodes) x 14.
  for (const int nodes : {2, 4, 16}) {
    const int depth = floor_log2(nodes);
    const CollectiveModel efa(topo::preset("p5-efa"), nodes, 8);
    const auto p5 = efa.price(NcclFunc::allreduce, NcclAlgo::nvls_tree, NcclProto::simple, 1 << 20);
    REQUIRE(p5);
    CHECK(p5->latency_us == Approx(2 * (23 + depth * 23.0)));
    const CollectiveModel ib(topo::preset("h100-ndr400"), nodes, 8);
    const auto ndr = ib.price(NcclFunc::allreduce, NcclAlgo::nvls_tree, NcclProto::simple, 1 << 20);
    REQUIRE(ndr);
    CHECK(ndr->latency_us == Approx(25 + 2 * depth * 14.0));
  }
  // Other algorithms over EFA keep NCCL's NVLink constants.
  const CollectiveModel efa(topo::preset("p5-efa"), 2, 8);
  const auto ring = efa.price(NcclFunc::allreduce, NcclAlgo::ring, NcclProto::simple, 1 << 20);
  REQUIRE(ring);
  CHECK(ring->latency_us == Approx(efa.nccl().base_latency_us(NcclFunc::allreduce, NcclAlgo::ring, NcclProto::simple) +
                                   2 * (23 - 14.0)));
}

TEST_CASE("pipeline fill of trees and NVLS: (D - 1) chunks as NCCL cuts them", "[collective][model]") {
  // One H100 node, NVLS all-reduce: 16 channels x 8 heads = 128 pipelines, 2 stages (the
  // switch's reduction, its multicast). At 1 GiB the chunk is NCCL_NVLS_CHUNKSIZE's 128 KiB:
  // fill = 1 chunk time = 128 KiB x 128 / algbw.
  const CollectiveModel one(topo::preset("h100-ndr400"), 1, 8);
  const auto big = one.price(NcclFunc::allreduce, NcclAlgo::nvls, NcclProto::simple, 1LL << 30);
  REQUIRE(big);
  CHECK(big->pipeline_fill_us == Approx(131072.0 * 128 / (1000 * big->bandwidth_GBps)));
  CHECK(big->time_us == Approx(big->latency_us + big->pipeline_fill_us + (1LL << 30) / (1000 * big->bandwidth_GBps)));
  // At 1 MiB each pipeline holds 8 KiB, less than any chunk: the fill is that piece's time, at
  // the rate of a step of NCCL's smallest chunk (16 KiB: 1 MiB < 2 x 128 x 32 KiB) with its cost.
  const auto small = one.price(NcclFunc::allreduce, NcclAlgo::nvls, NcclProto::simple, 1LL << 20);
  REQUIRE(small);
  const double copy_ns_per_byte = 16 / big->bandwidth_GBps - kNvlsStepOverheadUs * 1e3 / 131072;
  const double step_GBps = 16 / (copy_ns_per_byte + kNvlsStepOverheadUs * 1e3 / 16384);
  CHECK(small->pipeline_fill_us == Approx((1 << 20) / (1000 * step_GBps)));
  // Tree over 4 nodes x 8 (Simple, 512 KiB chunks): D = 2 (7 + 2) = 18 stages.
  const CollectiveModel four(topo::preset("h100-ndr400"), 4, 8);
  const auto tree = four.price(NcclFunc::allreduce, NcclAlgo::tree, NcclProto::simple, 1LL << 30);
  REQUIRE(tree);
  const int ch = four.nccl().graph(NcclAlgo::tree).channels;
  CHECK(tree->pipeline_fill_us == Approx(17 * 524288.0 * ch / (1000 * tree->bandwidth_GBps)));
  // Rings: none.
  const auto ring = four.price(NcclFunc::allreduce, NcclAlgo::ring, NcclProto::simple, 1LL << 30);
  REQUIRE(ring);
  CHECK(ring->pipeline_fill_us == 0);
}

TEST_CASE("NVLS: every chunk step costs a fixed time, a channel copies at most one p2p channel's rate", "[collective][model]") {
  // One H100 node: 16 channels x 8 heads. NCCL's chunk is 128 KiB from 64 x 128 x 128 KiB = 1 GiB
  // up, 64 KiB from 8 x 128 x 64 KiB = 64 MiB. Between two sizes of one chunk the slope is that
  // chunk's rate, 16 / (copy + o / chunk) in bytes per ns: NCCL's NVLS efficiency holds at 128 KiB.
  const CollectiveModel one(topo::preset("h100-ndr400"), 1, 8);
  const auto time = [&](const CollectiveModel& m, std::int64_t bytes) {
    const auto c = m.price(NcclFunc::allreduce, NcclAlgo::nvls, NcclProto::simple, bytes);
    REQUIRE(c);
    return c->time_us;
  };
  const auto slope_GBps = [&](const CollectiveModel& m, std::int64_t a) {
    return static_cast<double>(a) / (1000 * (time(m, 2 * a) - time(m, a)));
  };
  const double at_128k = slope_GBps(one, 1LL << 31), at_64k = slope_GBps(one, 1LL << 27);
  const double o_ns = kNvlsStepOverheadUs * 1e3;
  const double copy = 16 / at_128k - o_ns / 131072;  // ns per byte per channel
  CHECK(copy > 1 / kP2pChannelGBps);  // H100: its NVLink, not the channel's copy, sets the rate
  CHECK(at_64k == Approx(16 / (copy + o_ns / 65536)).epsilon(1e-9));
  CHECK(at_64k / at_128k == Approx(0.94).margin(0.01));  // the measured 260 / 276 GB/s
  // Without the step's cost both chunks run at one rate.
  ModelOptions free_steps;
  free_steps.nvls_step_overhead_us = 0;
  const CollectiveModel free(topo::preset("h100-ndr400"), 1, 8, free_steps);
  CHECK(slope_GBps(free, 1LL << 27) == Approx(slope_GBps(free, 1LL << 31)).epsilon(1e-9));

  // A channel takes one step per head and loop, however little of the loop a call fills: on
  // 64 GB300 GPUs in one domain (24 channels, 32 heads: NCCL_MAX_NVLS_ARITY) a 512 KiB call still
  // takes 32 steps.
  const CollectiveModel rack(topo::preset("gb300-nvl72"), 16, 4);
  const auto small = rack.price(NcclFunc::allreduce, NcclAlgo::nvls, NcclProto::simple, 512 << 10);
  REQUIRE(small);
  CHECK((512 << 10) / (1000 * small->bandwidth_GBps) > 32 * kNvlsStepOverheadUs);
  CHECK((512 << 10) / (1000 * small->bandwidth_GBps) < 32 * kNvlsStepOverheadUs + 2);
  // NVLink 5 outruns the channels: from 8 GPUs up the rate is 24 channels' copy, whatever the
  // domain's size (the all-reduce's own traffic, S (1 + 1/G), no longer sets it).
  const CollectiveModel two_trays(topo::preset("gb300-nvl72"), 2, 4);
  const double expected = 24 / (1 / kP2pChannelGBps + o_ns / 131072);
  CHECK(slope_GBps(rack, 1LL << 34) == Approx(expected).epsilon(1e-3));  // whole loops: not exactly
  CHECK(slope_GBps(two_trays, 1LL << 33) == Approx(expected).epsilon(1e-3));
}

TEST_CASE("NVLS all-gather and reduce-scatter need every local rank a head: at most 32 per domain", "[collective][model]") {
  // NCCL_MAX_NVLS_ARITY: 8 trays (32 GPUs) of a GB200 rack run NVLS all-gathers, 16 trays do not;
  // all-reduce runs NVLS on both (32 of the 64 GPUs are heads).
  const CollectiveModel eight(topo::preset("gb200-nvl72"), 8, 4), sixteen(topo::preset("gb200-nvl72"), 16, 4);
  CHECK(eight.price(NcclFunc::allgather, NcclAlgo::nvls, NcclProto::simple, 1LL << 30).has_value());
  CHECK(eight.price(NcclFunc::reducescatter, NcclAlgo::nvls, NcclProto::simple, 1LL << 30).has_value());
  CHECK_FALSE(sixteen.price(NcclFunc::allgather, NcclAlgo::nvls, NcclProto::simple, 1LL << 30).has_value());
  CHECK_FALSE(sixteen.price(NcclFunc::reducescatter, NcclAlgo::nvls, NcclProto::simple, 1LL << 30).has_value());
  CHECK(sixteen.price(NcclFunc::allreduce, NcclAlgo::nvls, NcclProto::simple, 1LL << 30).has_value());
  CHECK(sixteen.cost(CollectiveOp::allgather, 1LL << 30).algorithm != "nvls");
  CHECK(sixteen.nccl().graph(NcclAlgo::nvls).channels == 32);  // the heads
}

TEST_CASE("all-to-all: grouped p2p latency, DES transfer, and Mode::fast = Mode::exact, with PXN", "[collective][model]") {
  auto spec = topo::preset("h100-ndr400");
  const CollectiveModel m(spec, 4, 8);
  for (const std::int64_t bytes : {std::int64_t{8192}, std::int64_t{1} << 20, std::int64_t{256} << 20}) {
    const auto fast = m.cost(CollectiveOp::alltoall, bytes, {}, Mode::fast);
    const auto exact = m.cost(CollectiveOp::alltoall, bytes, {}, Mode::exact);
    CHECK(fast.time_us == Approx(exact.time_us).epsilon(1e-9));
    CHECK(fast.algorithm == "p2p");
  }
  // 1023 peers: ceil(1016 / 16) network rounds, or the proxy's 1016 posts of 1 us, whichever is longer.
  const CollectiveModel big(spec, 128, 8);
  const double hop = 2.7;  // LL, 8-byte messages: NCCL's constant (InfiniBand adds nothing)
  const double rounds = std::ceil(7 / 16.0) * 0.6 + std::ceil(1016 / 16.0) * hop;
  CHECK(big.alltoall_latency_us(8192) == Approx(8.4 + std::max(rounds, 1016 * 1.0)));
  // PXN keeps cross-rail messages inside the rail's leaf: faster than the spine route when the
  // leaves' uplinks are oversubscribed; the same on a non-blocking fabric.
  spec.oversubscription = 4;
  ModelOptions no_pxn;
  no_pxn.pxn = false;
  // 32 nodes fill each rail's 32-port leaf, whose uplinks carry a quarter of its ports.
  const double with = CollectiveModel(spec, 32, 8).alltoall_transfer_us(1LL << 30, Mode::fast);
  const double without = CollectiveModel(spec, 32, 8, no_pxn).alltoall_transfer_us(1LL << 30, Mode::fast);
  CHECK(with < 0.9 * without);
  CHECK(CollectiveModel(spec, 32, 8).alltoall_transfer_us(1LL << 30, Mode::exact) == Approx(with).epsilon(1e-9));
}

TEST_CASE("all-to-all inside one NVLink domain: NCCL's p2p split and the step pipeline's fill", "[collective][model]") {
  // One H100 node: the search's 6 x 60 GB/s rings, duplicated to 12 and once more at connect:
  // 24 channels, 32 p2p channels; 18 NVLinks give 36 -> 64 channels per peer, capped at 32; with
  // 8 ranks an operation starts on 4 (4 x 8 = 32).
  const CommShape node = hopper(1, 8);
  const auto plan_of = [](const CommShape& shape, std::int64_t per_peer) {
    return nccl_p2p_plan(shape, nccl_graphs(shape)[static_cast<int>(NcclAlgo::ring)], per_peer);
  };
  const auto plan = [&](std::int64_t per_peer) { return plan_of(node, per_peer); };
  CHECK(plan(1 << 20).p2p_channels == 32);
  CHECK(plan(1 << 20).channels_per_peer == 32);
  CHECK(plan(8 << 20).parts == 4);  // 2 MiB parts <= 32 chunks of 512 KiB
  CHECK(plan(8 << 20).part_bytes == 2 << 20);
  CHECK(plan(8 << 20).active_channels == 28);  // 7 peers x 4
  CHECK(plan(8 << 20).step_bytes == 512 * 1024);
  CHECK(plan(128LL << 20).parts == 8);  // 32 MiB parts are above 16 MiB: doubled once
  CHECK(plan(128LL << 20).active_channels == 32);
  CHECK(plan(2LL << 30).parts == 32);  // doubling stops at channels per peer
  CHECK(plan(100 * 1024).parts == 2);  // parts of at least 64 KiB
  // LL up to the channels per peer (32, not the 2 parts) x 16 KiB = 512 KiB per peer.
  CHECK(plan(100 * 1024).ll);
  CHECK(plan(16384).ll);
  CHECK(plan(16384).step_bytes == 16384);
  CHECK(plan(512 * 1024).ll);
  CHECK(plan(512 * 1024).step_bytes == 32768);  // an LL slot: 64 KiB of lines, half of it flags
  CHECK_FALSE(plan(512 * 1024 + 1).ll);
  CHECK(plan(0).parts == 1);
  // A GB300 tray (4 ranks, NVLink 5): 8 channels per operation.
  CommShape tray = node;
  tray.arch = GpuArch::blackwell;
  tray.ranks_per_node = 4;
  tray.nvlink_GBps = 900;
  CHECK(plan_of(tray, 1 << 20).parts == 8);
  CHECK(plan_of(tray, 1 << 20).p2p_channels == 32);
  // Across nodes (2 x 8, 16 p2p channels): p2pChunkSize is P2P_NET_CHUNKSIZE (128 KiB) for every
  // peer, parts of 64 KiB to 128 KiB; a network peer asks for 2 channels, so every peer's send
  // takes at most 2; an operation starts on 1 (2 x 16 ranks > 16) and doubles above 128 KiB.
  const CommShape two_nodes = hopper(2, 8);
  CHECK(plan_of(two_nodes, 1 << 20).p2p_channels == 16);
  CHECK(plan_of(two_nodes, 1 << 20).channels_per_peer == 2);
  CHECK(plan_of(two_nodes, 1 << 20).parts == 2);
  CHECK(plan_of(two_nodes, 1 << 20).step_bytes == 128 * 1024);
  CHECK(plan_of(two_nodes, 96 * 1024).parts == 1);
  CHECK(plan_of(two_nodes, 1 << 20).active_channels == 16);  // 15 peers x 2, at most the 16 channels
  CHECK_THROWS_AS(plan_of(hopper(1, 1), 1 << 20), std::invalid_argument);
  CHECK_THROWS_AS(plan_of(node, -1), std::invalid_argument);

  // The fill: one 512 KiB step at the channel's share (1 / 28) of NCCL's NVLink rate, 450 x 0.824.
  const auto spec = topo::preset("h100-ndr400");
  const CollectiveModel one(spec, 1, 8);
  CHECK(one.alltoall_fill_us(64LL << 20) == Approx(524288.0 * 28 / (450 * 0.824 * 1000)));
  const auto c = one.cost(CollectiveOp::alltoall, 64LL << 20);
  CHECK(c.pipeline_fill_us == Approx(one.alltoall_fill_us(64LL << 20)));
  CHECK(c.time_us == Approx(c.latency_us + c.pipeline_fill_us + one.alltoall_transfer_us(64LL << 20, Mode::fast)));
  CHECK(one.cost(CollectiveOp::alltoall, 8 * 16384).protocol == "ll");
  CHECK(one.cost(CollectiveOp::alltoall, 8 * 524288).protocol == "ll");
  CHECK(one.cost(CollectiveOp::alltoall, 8 * 1048576).protocol == "simple");
  // LL's rate: half NCCL's LL ring ceiling (llMaxBw, 141 GB/s on one Hopper node), on the 7/8 sent.
  CHECK(one.alltoall_protocol_floor_us(8 * 524288) == Approx(7 * 524288.0 / (70.5 * 1000)));
  CHECK(one.alltoall_protocol_floor_us(8 * 1048576) == 0);
  const auto ll = one.cost(CollectiveOp::alltoall, 8 * 524288);
  CHECK(ll.time_us == Approx(ll.latency_us + ll.pipeline_fill_us + one.alltoall_protocol_floor_us(8 * 524288)));
  // Across nodes the network carries the all-to-all: no NVLink fill, no LL floor.
  const CollectiveModel two(spec, 2, 8);
  CHECK(two.alltoall_fill_us(64LL << 20) == 0);
  CHECK(two.alltoall_protocol_floor_us(16 * 4096) == 0);
}

TEST_CASE("all-to-all: a send moves no faster than its p2p channels' copy rate", "[collective][model]") {
  constexpr double kChannel = 21.0;  // GB/s per p2p channel (collective_model.cpp, measured)
  // A GB300 tray (4 ranks): 32 MiB per peer splits into 8 parts, 24 channels for 3 peers carry
  // 3 x 32 MiB at 24 x 21 = 504 GB/s, below NCCL's NVLink 5 rate (18 x 40.1 = 722): the floor sets
  // the transfer.
  const CollectiveModel tray(topo::preset("gb300-nvl72"), 1, 4);
  const std::int64_t s = 128LL << 20;
  CHECK(tray.alltoall_channel_floor_us(s) == Approx(3 * 33554432.0 / (24 * kChannel * 1000)));
  CHECK(tray.alltoall_channel_floor_us(s) > tray.alltoall_transfer_us(s, Mode::fast));
  const auto c = tray.cost(CollectiveOp::alltoall, s);
  CHECK(c.time_us == Approx(c.latency_us + c.pipeline_fill_us + tray.alltoall_channel_floor_us(s)));
  // 4 GiB: 32 parts per peer, all 32 p2p channels: 672 GB/s, still below the links.
  CHECK(tray.alltoall_channel_floor_us(4LL << 30) == Approx(3.0 * (1LL << 30) / (32 * kChannel * 1000)));
  // One H100 node: 28 channels x 21 = 588 GB/s exceed NVLink's 371, so the links decide.
  const CollectiveModel node(topo::preset("h100-ndr400"), 1, 8);
  CHECK(node.alltoall_channel_floor_us(64LL << 20) < node.alltoall_transfer_us(64LL << 20, Mode::fast));
  // LL sends have their own floor; the channel floor is Simple's.
  CHECK(node.alltoall_channel_floor_us(8 * 524288) == 0);
  // 2 nodes of 1 GPU: the one network peer's send takes 2 channels, 42 GB/s of a 48 GB/s NIC.
  const CollectiveModel pair(topo::preset("h100-ndr400"), 2, 1);
  const std::int64_t big = 4LL << 30;
  CHECK(pair.alltoall_channel_floor_us(big) == Approx(2.0 * (1LL << 30) / (2 * kChannel * 1000)));
  CHECK(pair.cost(CollectiveOp::alltoall, big).time_us ==
        Approx(pair.alltoall_latency_us(big) + pair.alltoall_channel_floor_us(big)));
  // From 2 network peers on, 4 channels: the NIC decides again.
  const CollectiveModel three(topo::preset("h100-ndr400"), 3, 1);
  CHECK(three.alltoall_channel_floor_us(big) < three.alltoall_transfer_us(big, Mode::fast));
  CHECK(CollectiveModel(topo::preset("h100-ndr400"), 1, 1).alltoall_channel_floor_us(big) == 0);
}

TEST_CASE("send/recv: one p2p message priced by NCCL's parts, and nccl-tests' pattern by its slowest pair",
          "[collective][model]") {
  constexpr double kChannel = 21.0;  // GB/s per p2p channel (collective_model.cpp, measured)
  const auto spec = topo::preset("h100-ndr400");
  // One H100 node of 8: an operation starts on 4 channels (4 x 8 = 32 p2p channels); 32 MiB
  // moves in 4 parts at 4 x 21 = 84 GB/s, below NVLink's 371; 128 MiB in 8 (32 MiB parts are
  // above 16 MiB), 168 GB/s; from 512 MiB 32 parts outrun the link.
  const CollectiveModel node(spec, 1, 8);
  const auto at = [&](std::int64_t bytes) { return node.cost(CollectiveOp::sendrecv, bytes); };
  const double base_and_hop = at(32LL << 20).latency_us;
  // NCCL's ring/Simple base and one NVLink hop of Simple.
  CHECK(base_and_hop ==
        Approx(nccl_base_latency_us(NcclAlgo::ring, NcclProto::simple) + nccl_hw_latency_us(false, NcclAlgo::ring, NcclProto::simple)));
  // Across nodes: a network step (NCCL's Simple constant, InfiniBand adds nothing) and the
  // proxy's 1 us post instead of the NVLink hop.
  CHECK(CollectiveModel(spec, 2, 1).cost(CollectiveOp::sendrecv, 1 << 20).latency_us ==
        Approx(nccl_base_latency_us(NcclAlgo::ring, NcclProto::simple) +
               nccl_hw_latency_us(true, NcclAlgo::tree, NcclProto::simple) + 1.0));
  CHECK(at(32LL << 20).time_us == Approx(base_and_hop + at(32LL << 20).pipeline_fill_us +
                                         33554432.0 / (4 * kChannel * 1000)));
  CHECK(at(64LL << 20).bandwidth_GBps == Approx(4 * kChannel));
  CHECK(at(128LL << 20).bandwidth_GBps == Approx(8 * kChannel));
  CHECK(at(1LL << 30).bandwidth_GBps == Approx(450 * 0.824).epsilon(1e-6));  // NCCL's NVLink rate
  CHECK(at(32LL << 20).protocol == "simple");
  CHECK(at(32LL << 20).algorithm == "p2p");
  // LL up to the channels per peer x 16 KiB = 512 KiB, at half NCCL's LL ring ceiling (141 GB/s)
  // when every GPU also receives.
  CHECK(at(512 * 1024).protocol == "ll");
  CHECK(at(512 * 1024 + 1).protocol == "simple");
  const auto one = node.sendrecv(512 * 1024, 0, 1);  // a lone message: the full ceiling
  CHECK(at(512 * 1024).time_us - at(512 * 1024).latency_us - at(512 * 1024).pipeline_fill_us ==
        Approx(524288.0 / (70.5 * 1000)));
  CHECK(one.time_us - one.latency_us - one.pipeline_fill_us == Approx(524288.0 / (141 * 1000)));
  // Nothing to send: 0.
  CHECK(at(0).time_us == 0);
  CHECK(node.sendrecv(1 << 20, 3, 3).time_us == 0);

  // nccl-tests' pattern's pairs: one inside a domain, one across where there are several.
  using Pairs = std::vector<std::pair<int, int>>;
  CHECK(nccl_tests_sendrecv_pairs(16, 8) == Pairs{{0, 1}, {7, 8}});
  CHECK(nccl_tests_sendrecv_pairs(8, 8) == Pairs{{0, 1}});
  CHECK(nccl_tests_sendrecv_pairs(2, 1) == Pairs{{0, 1}});  // one GPU per node: every pair crosses
  CHECK(nccl_tests_sendrecv_pairs(1, 8) == Pairs{{0, 0}});
  CHECK_THROWS_AS(nccl_tests_sendrecv_pairs(0, 8), std::invalid_argument);
  // 2 nodes of 8: the pattern's slowest pair is the one across nodes (7 -> 8): Simple over the
  // network, 2 channels (every peer's send takes at most the network peer's 2), 42 GB/s.
  const CollectiveModel two(spec, 2, 8);
  const auto across = two.sendrecv(1LL << 30, 7, 8, Mode::fast, true);
  const auto inside = two.sendrecv(1LL << 30, 0, 1, Mode::fast, true);
  CHECK(across.protocol == "simple");
  CHECK(across.bandwidth_GBps == Approx(2 * kChannel));
  CHECK(across.latency_us > inside.latency_us);  // a network step and the proxy's post
  CHECK(two.cost(CollectiveOp::sendrecv, 1LL << 30).time_us == Approx(across.time_us));
  CHECK(across.pipeline_fill_us == 0);  // the network hides the NVLink copies
  // The DES decides where the link is slower than the channels: a 10 GB/s NIC.
  auto slow = spec;
  slow.nic_GBps = 10;
  const CollectiveModel slow_two(slow, 2, 1);
  CHECK(slow_two.cost(CollectiveOp::sendrecv, 1LL << 30).bandwidth_GBps == Approx(10 * 0.96).epsilon(1e-6));
  // Fast and exact DES agree; ranks outside the communicator are refused naming the flag.
  CHECK(two.sendrecv(64LL << 20, 7, 8, Mode::exact).time_us == Approx(two.sendrecv(64LL << 20, 7, 8).time_us));
  CHECK_THROWS_AS(two.sendrecv(1024, 0, 16), UsageError);
  CHECK_THROWS_AS(two.sendrecv(1024, -1, 1), UsageError);
}

TEST_CASE("all-to-all across nodes: network peers run Simple, NVLink peers LL below NCCL's threshold",
          "[collective][model]") {
  // p2p network connections have no LL buffers (net.cc): a 4 KiB-per-peer all-to-all over 2 x 8
  // runs Simple on the network, where a 16 KiB LL message rule would have said LL.
  const auto spec = topo::preset("h100-ndr400");
  const CollectiveModel two(spec, 2, 8);
  CHECK(two.cost(CollectiveOp::alltoall, 16 * 4096).protocol == "simple");
  // Channels per peer: NVLink peers ask 36, network peers 2 (2 x 16 ranks <= 4 x 32): 2, so an
  // NVLink peer runs LL up to 32 KiB; beyond 64 ranks network peers ask 1 (H100: one NIC per GPU).
  const CommShape s2 = two.shape();
  const NcclGraph& ring2 = two.nccl().graph(NcclAlgo::ring);
  CHECK(nccl_p2p_channels_per_peer(s2, ring2) == 2);
  CHECK(nccl_p2p_ll_threshold_bytes(s2, ring2) == 32768);
  const CollectiveModel wide(spec, 16, 8);
  CHECK(nccl_p2p_channels_per_peer(wide.shape(), wide.nccl().graph(NcclAlgo::ring)) == 1);
  // The largest shape validate() allows (2^20 nodes x 1024 ranks): channels x ranks > INT_MAX.
  CommShape huge = s2;
  huge.nodes = 1 << 20;
  huge.ranks_per_node = 1024;
  CHECK(nccl_p2p_channels_per_peer(huge, ring2) == 1);
  // One network round at Simple's hop costs more than at LL's: the latency of a 1 KiB-per-peer
  // all-to-all over 2 x 8 = NCCL's Ring/Simple base + one LL NVLink round + one Simple network round.
  const double hop_nvl = nccl_hw_latency_us(false, NcclAlgo::ring, NcclProto::ll);
  const double hop_net = nccl_hw_latency_us(true, NcclAlgo::ring, NcclProto::simple);
  CHECK(two.alltoall_latency_us(16 * 1024) ==
        Approx(nccl_base_latency_us(NcclAlgo::ring, NcclProto::simple) + hop_nvl + hop_net));
  CHECK(hop_net > nccl_hw_latency_us(true, NcclAlgo::ring, NcclProto::ll));
}

TEST_CASE("whatif's collective timer gives the time `collective` prints for the same call", "[collective][model]") {
  // 16 nodes fill whole leaves; 300 H100 nodes leave a last leaf of 12 hosts, 301 p5 instances a
  // last per-node leaf of one, 250 GB200 trays a last rack of 16 (the DES's flow classes there,
  // where the timer used a closed form above 256 ranks before session 16).
  for (const auto& [name, nodes] : std::vector<std::pair<const char*, int>>{
           {"h100-ndr400", 16}, {"p5-efa", 16}, {"gb200-nvl72", 16}, {"h100-ndr400", 300}, {"p5-efa", 301}, {"gb200-nvl72", 250}}) {
    INFO(name << " x " << nodes);
    const auto spec = topo::preset(name);
    const int gpn = spec.gpus_per_host;
    const FabricCollectiveTimer timer(spec, nodes, gpn, std::nullopt);
    const CollectiveModel model(spec, nodes, gpn);
    const int w = nodes * gpn;
    const CollectiveRequest ag{StepCollective::all_gather, 5760, 5760};
    CHECK(timer.time_ns(ag) == static_cast<std::int64_t>(std::ceil(model.cost(CollectiveOp::allgather, 5760LL * w).time_us * 1e3)));
    CHECK(timer.choice(ag).algorithm == model.cost(CollectiveOp::allgather, 5760LL * w).algorithm);
    CHECK(timer.choice(ag).chosen_by == model.cost(CollectiveOp::allgather, 5760LL * w).chosen_by);
    const CollectiveRequest a2a{StepCollective::all_to_all, 64LL << 20, (64LL << 20) / w};
    CHECK(timer.time_ns(a2a) == static_cast<std::int64_t>(std::ceil(model.cost(CollectiveOp::alltoall, 64LL << 20).time_us * 1e3)));
    // With a calibration's parameters (calibrate --nccl-tests) both take them: still the same time,
    // and not the uncalibrated one.
    ModelOptions calibrated;
    calibrated.call_overhead_us = 40;
    calibrated.net_hop_extra_us = 3;
    calibrated.nvlink_scale = 0.9;
    const FabricCollectiveTimer calibrated_timer(spec, nodes, gpn, std::nullopt, calibrated);
    const CollectiveModel calibrated_model(spec, nodes, gpn, calibrated);
    CHECK(calibrated_timer.time_ns(ag) ==
          static_cast<std::int64_t>(std::ceil(calibrated_model.cost(CollectiveOp::allgather, 5760LL * w).time_us * 1e3)));
    CHECK(calibrated_timer.time_ns(a2a) ==
          static_cast<std::int64_t>(std::ceil(calibrated_model.cost(CollectiveOp::alltoall, 64LL << 20).time_us * 1e3)));
    CHECK(calibrated_timer.time_ns(ag) >= timer.time_ns(ag) + 40000);
  }
}

TEST_CASE("a fabric without NVLS multicast runs rings and trees where NCCL would run NVLS", "[collective][model]") {
  const auto rack = topo::preset("gb200-nvl72");
  auto no_multicast = rack;
  no_multicast.nvls_multicast = false;
  const std::int64_t bytes = std::int64_t{8} << 30;
  // One rack of 16 trays: NVLS; without multicast NCCL's next choice, a ring, and slower.
  const CollectiveModel one_on(rack, 16, 4), one_off(no_multicast, 16, 4);
  const auto on = one_on.cost(CollectiveOp::allreduce, bytes);
  const auto off = one_off.cost(CollectiveOp::allreduce, bytes);
  CHECK(on.algorithm == "nvls");
  CHECK(off.algorithm == "ring");
  CHECK(off.time_us > 1.2 * on.time_us);
  CHECK_FALSE(one_off.price(NcclFunc::allreduce, NcclAlgo::nvls, NcclProto::simple, bytes));
  CHECK(one_on.price(NcclFunc::allreduce, NcclAlgo::ring, NcclProto::simple, bytes)->time_us == Approx(off.time_us));
  // Two racks: NVLS Tree, and without multicast a ring again (OCI's Kubernetes GB200 at 32 trays
  // measured 25.8 ms for 8 GiB, docs/simulator.md).
  const CollectiveModel two_on(rack, 32, 4), two_off(no_multicast, 32, 4);
  CHECK(two_on.cost(CollectiveOp::allreduce, bytes).algorithm == "nvlstree");
  const auto two = two_off.cost(CollectiveOp::allreduce, bytes);
  CHECK(two.algorithm == "ring");
  CHECK(two.time_us == Approx(24515).epsilon(0.01));
  // NCCL's own model, quoted beside it, has no NVLS either.
  REQUIRE(two.nccl);
  CHECK(two.nccl->algo == NcclAlgo::ring);
  // The topology file's key, and a value that is no boolean.
  CHECK_FALSE(topo::parse_topology("base = \"gb200-nvl72\"\nnvls_multicast = false\n", "k.toml").spec.nvls_multicast);
  CHECK(topo::parse_topology("base = \"gb200-nvl72\"\n", "k.toml").spec.nvls_multicast);
  CHECK_THROWS_WITH(topo::parse_topology("base = \"gb200-nvl72\"\nnvls_multicast = 0\n", "k.toml"),
                    Catch::Contains("k.toml:2: nvls_multicast: got '0', expected true or false (a TOML boolean, unquoted)"));
}

TEST_CASE("whatif's timer runs the pair a fabric's tuner plugin picks", "[collective][model]") {
  const auto spec = topo::preset("p5en-efa");
  const FabricCollectiveTimer timer(spec, 4, 8, std::nullopt);
  const CollectiveModel model(spec, 4, 8);
  // 32 MiB gathered over 32 ranks: p5en's all-gather regions put it in Ring/LL128.
  const CollectiveRequest ag{StepCollective::all_gather, std::int64_t{1} << 20, std::int64_t{1} << 20};
  const auto c = model.cost(CollectiveOp::allgather, std::int64_t{32} << 20);
  CHECK(c.chosen_by == "aws-ofi-p5en");
  CHECK(timer.choice(ag).chosen_by == "aws-ofi-p5en");
  CHECK(timer.choice(ag).algorithm == c.algorithm);
  CHECK(timer.choice(ag).protocol == c.protocol);
}

TEST_CASE("validate-collectives: every published row predicted or out of scope", "[collective][validate]") {
  const auto rows = read_published_rows(std::string(DIONSIM_SHARED_DIR) + "/data/nccl-published/measurements.csv");
  REQUIRE(rows.size() == 1632);
  const auto predictions = predict_published(rows);
  REQUIRE(predictions.size() == rows.size());
  int predicted = 0, forced_collnet = 0, sharp_in_use = 0;
  for (const auto& p : predictions) {
    if (!p.skipped.empty()) {
      CHECK(p.skipped.find("CollNet") != std::string::npos);
      // Out of scope: the env forces CollNet (CoreWeave H100, 10 rows), or the source's log shows
      // SHARP in use without one (CoreWeave's 2022 A100 SHARP example, 62 rows).
      if (p.row->env.find("COLLNET") != std::string::npos) ++forced_collnet;
      if (p.row->notes.find("SHARP in use") != std::string::npos) ++sharp_in_use;
      continue;
    }
    CHECK(p.row->notes.find("SHARP in use") == std::string::npos);
    ++predicted;
    CHECK(std::isfinite(p.dionsim_us));
    CHECK(p.dionsim_us >= 0);
    CHECK(!p.preset.empty());
  }
  CHECK(forced_collnet == 10);
  CHECK(sharp_in_use == 62);
  CHECK(predicted == 1632 - 72);
  int summed = 0;
  for (const auto& s : summarize(predictions)) summed += s.rows;
  CHECK(summed == predicted);
  CHECK(regime_of(64 * 1024) == SizeRegime::latency);
  CHECK(regime_of(64 * 1024 + 1) == SizeRegime::middle);
  CHECK(regime_of(64LL << 20) == SizeRegime::bandwidth);
  CHECK(within_goal(SizeRegime::latency, 1.49));
  CHECK_FALSE(within_goal(SizeRegime::bandwidth, 1.11));
}

TEST_CASE("validate-collectives: the cluster -> preset table reads instance types, then GPU and transport",
          "[collective][validate]") {
  const auto preset_of = [](const std::string& gpu, const std::string& nic) {
    PublishedRow row;
    row.gpu = gpu;
    row.nic = nic;
    return preset_for(row).value_or("(none)");
  };
  // The table, on the published wordings.
  CHECK(preset_of("H100 80GB (AWS p5.48xlarge, EKS)", "32x EFAv2 100 Gb/s per node (3.2 Tb/s)") == "p5-efa");
  CHECK(preset_of("H200 141GB (AWS p5en.48xlarge)", "16x EFAv3 200 Gb/s per node (3.2 Tb/s)") == "p5en-efa");
  CHECK(preset_of("A100 80GB (AWS p4de.24xlarge)", "4x EFA 100 Gb/s per node (400 Gb/s)") == "p4d-efa");
  CHECK(preset_of("GB200 (NVL72)", "InfiniBand between racks (NIC count/speed not stated)") == "gb200-nvl72");
  CHECK(preset_of("B200 (GCP A4)", "RoCE 8 NICs, 3.2 Tb/s per node (doc table)") == "b200-roce400");
  CHECK(preset_of("H100 80GB HBM3 SXM", "n/a (single node)") == "h100-ndr400");
  CHECK(preset_of("A100-SXM4-40GB (OCI BM.GPU.B4.8)", "RoCE 16x100 Gb/s per node") == "a100-roce100");
  // AWS's other instances: p5e (H200 on p5's EFA v2) is not p5en, p6-b200 is no InfiniBand B200.
  CHECK(preset_of("H200 141GB (AWS p5e.48xlarge)", "32x EFA 100 Gb/s per node") == "p5e-efa");
  CHECK(preset_of("B200 (AWS p6-b200.48xlarge)", "8x EFAv4 400 Gb/s per node") == "p6-b200-efa");
  // A GPU named without its instance: the NIC column's transport decides.
  CHECK(preset_of("H100 80GB", "EFA (AWS)") == "p5-efa");
  CHECK(preset_of("H200", "EFAv3 16 x 200G") == "p5en-efa");
  CHECK(preset_of("B200", "EFA v4") == "p6-b200-efa");
  CHECK(preset_of("B300 (AWS p6-b300.48xlarge)", "EFA 6400 Gb/s per instance") == "p6-b300-efa");
  CHECK(preset_of("B300 SXM (HGX)", "ConnectX-8 800 Gb/s") == "b300-xdr800");
  CHECK(preset_of("GB300 (NVL72)", "RoCE 8x400 Gb/s per tray") == "gb300-nvl72");
  CHECK(preset_of("H200 SXM (GCP A3 Ultra)", "RoCE 8x400 Gb/s per node") == "h200-roce400");
  CHECK(preset_of("H200 SXM", "InfiniBand NDR") == "h200-ndr400");
  // A transport is a word's start: "default" holds no EFA, "RoCE-less" would still be RoCE.
  CHECK(preset_of("H100 80GB", "InfiniBand (the provider's default)") == "h100-ndr400");
  // NVL72 racks before B200 (GB200 contains it); AWS's on EFA.
  CHECK(preset_of("GB200 (AWS p6e-gb200)", "4x400 Gb/s per tray") == "gb200-nvl72-efa");
  CHECK(preset_of("GB200 NVL72", "EFA v4") == "gb200-nvl72-efa");
  CHECK(preset_of("MI300X", "RoCE") == "(none)");
  // China's export variants (8 NVLinks), any case; Grace Hopper nodes (no NVSwitch) are no H200.
  CHECK(preset_of("NVIDIA H800 80GB HBM3", "CX7 400 Gb/s InfiniBand") == "h800-ndr400");
  CHECK(preset_of("h800", "RoCE 8x400G") == "h800-roce400");
  CHECK(preset_of("A800-SXM4-80GB", "not stated") == "a800-hdr200");
  CHECK(preset_of("nvidia h100 80gb hbm3", "not stated") == "h100-ndr400");
  CHECK(preset_of("GH200 480GB", "InfiniBand NDR200") == "(none)");
  CHECK(preset_of("H20 96GB", "RoCE 400G") == "h100-roce400");
  CHECK(preset_of("H200 141GB", "RoCE 400G") == "h200-roce400");
}

TEST_CASE("validate-collectives: a GPU no preset describes is skipped and named, the other rows predicted",
          "[collective][validate]") {
  const auto rows = read_published_rows(std::string(DIONSIM_SHARED_DIR) + "/data/nccl-published/measurements.csv");
  std::vector<PublishedRow> mixed(rows.begin(), rows.begin() + 4);
  mixed[1].gpu = "MI300X";
  mixed[2].gpu = "GH200 480GB";
  const auto predictions = predict_published(mixed);
  REQUIRE(predictions.size() == 4);
  CHECK(predictions[0].skipped.empty());
  CHECK(predictions[3].skipped.empty());
  CHECK(predictions[1].skipped == "no fabric preset for GPU 'MI300X' (docs/simulator.md: the cluster -> preset table)");
  // A test of nccl-tests the model does not price is reported as such, the rest still predicted.
  std::vector<PublishedRow> other(rows.begin(), rows.begin() + 2);
  other[1].collective = "broadcast";
  const auto with_broadcast = predict_published(other);
  CHECK(with_broadcast[0].skipped.empty());
  CHECK(with_broadcast[1].skipped ==
        "not modelled: broadcast (dionsim prices all-gather, reduce-scatter, all-reduce, all-to-all and send/recv)");
  CHECK(predictions[2].skipped.find("'GH200 480GB'") != std::string::npos);
  CHECK(predictions[0].dionsim_us > 0);
}

TEST_CASE("validate-collectives: env values as shells and sources write them", "[collective][validate]") {
  const auto rows = read_published_rows(std::string(DIONSIM_SHARED_DIR) + "/data/nccl-published/measurements.csv");
  PublishedRow row = rows.front();
  const auto allreduce = [&](const std::string& env) {
    row.env = env;
    return nccl_env_of(row).forced.of(NcclFunc::allreduce);
  };
  const std::array<bool, kNcclAlgos> tree{false, true, false, false, false};
  CHECK(allreduce("NCCL_ALGO=Tree; -n 20").algos == tree);
  CHECK(allreduce("export NCCL_ALGO=\"Tree\" NCCL_PROTO='Simple'").algos == tree);
  CHECK(allreduce("export NCCL_ALGO=\"Tree\" NCCL_PROTO='Simple'").protos == std::array<bool, kNcclProtos>{false, false, true});
  CHECK(allreduce("NCCL_ALGO=Tree, HPC-X SHARP plugin").algos == tree);
  CHECK(allreduce("(NCCL_ALGO=Tree)").algos == tree);
  // NCCL >= 2.24's per-function lists, quoted since ';' ends a shell assignment.
  CHECK(allreduce("NCCL_ALGO=\"ring;allreduce:tree\" NCCL_IB_HCA=mlx5").algos == tree);
  row.env = "NCCL_ALGO=\"ring;allreduce:tree\"";
  CHECK(nccl_env_of(row).forced.of(NcclFunc::allgather).algos == std::array<bool, kNcclAlgos>{true, false, false, false, false});
  // Not the variable: another's tail, a name in prose without '='.
  CHECK_FALSE(nccl_env_of([&] { row.env = "MY_NCCL_ALGO=tree XNCCL_ALGO=tree NCCL_ALGO set in manifest"; return row; }())
                  .forced.restricts(NcclFunc::allreduce));
  // CollNet named for the row's collective is out of scope; taken out of the list it is not.
  std::vector<PublishedRow> two{rows.front(), rows.front()};
  two[0].collective = two[1].collective = "allreduce";
  two[0].env = "NCCL_ALGO=\"ring;allreduce:collnetchain,ring\"";
  two[1].env = "NCCL_ALGO=^CollNetDirect,CollNetChain";
  const auto predicted = predict_published(two);
  CHECK(predicted[0].skipped == "CollNet/SHARP (out of scope)");
  CHECK(predicted[1].skipped.empty());
}

TEST_CASE("validate-collectives: a NIC the source states replaces the preset's, an unstated one does not",
          "[collective][validate]") {
  // The published file's wordings: ports x rate per node or tray (an EFA generation between), a
  // total per node; "not stated" (with or without an inference) is no statement.
  CHECK(stated_nic_GBps_per_gpu("RoCE 8x400 Gb/s per tray (per doc hardware table)", 4).value() == Approx(100.0));
  CHECK(stated_nic_GBps_per_gpu("RoCE: 4x400 Gb/s per tray per OCI quickstart table", 4).value() == Approx(50.0));
  CHECK(stated_nic_GBps_per_gpu("32x EFAv2 100 Gb/s per node (3.2 Tb/s)", 8).value() == Approx(50.0));
  CHECK(stated_nic_GBps_per_gpu("4x EFA 100 Gb/s per node (400 Gb/s)", 8).value() == Approx(6.25));
  CHECK(stated_nic_GBps_per_gpu("RoCE 16x100 Gb/s per node (1.6 Tb/s; OCI B4.8 cluster network)", 8).value() ==
        Approx(25.0));
  CHECK(stated_nic_GBps_per_gpu("RoCE 8 NICs, 3.2 Tb/s per node (doc table)", 8).value() == Approx(50.0));
  CHECK_FALSE(stated_nic_GBps_per_gpu("InfiniBand HDR (per-node NIC count not stated)", 8));
  CHECK_FALSE(stated_nic_GBps_per_gpu("InfiniBand NDR (8x400G per node typical; not stated in README)", 8));
  CHECK_FALSE(stated_nic_GBps_per_gpu("n/a (single node)", 8));
  CHECK_FALSE(stated_nic_GBps_per_gpu("RoCE 8x400 Gb/s per tray", 0));

  // On the published rows: GB300's stated 8 x 400 Gb/s per tray is twice the preset's 400 Gb/s
  // per GPU, and the cross-rack all-to-all (the NICs' traffic) is priced at it.
  const auto rows = read_published_rows(std::string(DIONSIM_SHARED_DIR) + "/data/nccl-published/measurements.csv");
  const auto predictions = predict_published(rows);
  int gb300_cross_rack = 0;
  for (const auto& p : predictions) {
    if (p.row->gpu.find("GB300") == std::string::npos) continue;
    REQUIRE(p.stated_nic_GBps);
    CHECK(*p.stated_nic_GBps == Approx(100.0));
    if (p.row->nodes != 32 || p.row->collective != "alltoall" || p.row->size_bytes != (1LL << 30)) continue;
    ++gb300_cross_rack;
    auto preset_row = *p.row;
    preset_row.nic = "not stated";
    const auto at_preset = predict_published({preset_row});
    CHECK(p.dionsim_us < 0.8 * at_preset.front().dionsim_us);
  }
  CHECK(gb300_cross_rack > 0);
}

namespace {

// The published rows of one shape and size (out-of-place and in-place: two rows), each predicted
// as published ([0]) and with `env` added to its env ([1]). The predictions point into `rows`.
struct EnvPair {
  std::vector<PublishedRow> rows;
  std::vector<RowPrediction> predictions;
};
std::vector<std::unique_ptr<EnvPair>> predicted_with_env(const std::string& gpu, int nodes, const std::string& collective,
                                                         std::int64_t bytes, const std::string& env) {
  static const auto published =
      read_published_rows(std::string(DIONSIM_SHARED_DIR) + "/data/nccl-published/measurements.csv");
  std::vector<std::unique_ptr<EnvPair>> out;
  for (const auto& row : published) {
    if (row.gpu.find(gpu) == std::string::npos || row.nodes != nodes || row.collective != collective ||
        row.size_bytes != bytes) {
      continue;
    }
    auto pair = std::make_unique<EnvPair>();
    pair->rows = {row, row};
    pair->rows[1].env += " " + env;
    pair->predictions = predict_published(pair->rows);
    out.push_back(std::move(pair));
  }
  return out;
}

}  // namespace

TEST_CASE("validate-collectives: a row whose env sets NCCL_NVLS_ENABLE=0 is predicted without NVLS",
          "[collective][validate]") {
  const auto pairs = predicted_with_env("GB300", 16, "allreduce", std::int64_t{8} << 30, "NCCL_NVLS_ENABLE=0");
  CHECK(pairs.size() == 2);  // the out-of-place and in-place columns
  for (const auto& pair : pairs) {
    const auto& both = pair->predictions;
    CHECK(both[0].algorithm == "nvls");
    CHECK(both[1].algorithm == "ring");
    CHECK(both[1].nccl_algorithm == "ring");
    CHECK(both[1].dionsim_us > 1.2 * both[0].dionsim_us);
  }
}

TEST_CASE("validate-collectives: NCCL_TUNER_PLUGIN=none leaves NCCL's own choice on p5", "[collective][validate]") {
  const auto pairs = predicted_with_env("p5.48xlarge", 4, "allreduce", std::int64_t{256} << 20, "NCCL_TUNER_PLUGIN=none");
  CHECK_FALSE(pairs.empty());
  for (const auto& pair : pairs) {
    const auto& both = pair->predictions;
    CHECK(both[0].chosen_by == "aws-ofi-p5");
    CHECK(both[1].chosen_by == "nccl");
    CHECK(both[1].algorithm == both[1].nccl_algorithm);
    CHECK(both[0].algorithm != both[1].algorithm);
  }
}

TEST_CASE("validate-collectives: NCCL_BUFFSIZE sets a Simple tree's chunk, NCCL_PXN_DISABLE=1 PXN", "[collective][validate]") {
  // CoreWeave's A100 16 x 8 all-reduce of 512 MiB runs Tree/Simple.
  const auto pairs = predicted_with_env("A100-SXM4-80GB", 16, "allreduce", std::int64_t{512} << 20, "NCCL_BUFFSIZE=16777216");
  REQUIRE(pairs.size() == 2);
  for (const auto& pair : pairs) {
    const auto& both = pair->predictions;
    REQUIRE(both[0].algorithm == "tree");
    REQUIRE(both[0].protocol == "simple");
    CHECK(nccl_env_of(pair->rows[0]).buffsize == std::int64_t{4} << 20);
    CHECK(nccl_env_of(pair->rows[1]).buffsize == std::int64_t{16} << 20);
    CHECK(both[1].dionsim_us > both[0].dionsim_us);  // 2 MiB chunks: a longer fill
  }
  PublishedRow row = pairs.front()->rows[0];
  CHECK(nccl_env_of(row).pxn);
  row.env += " NCCL_PXN_DISABLE=1";
  CHECK_FALSE(nccl_env_of(row).pxn);
  for (const char* bad : {"NCCL_BUFFSIZE=4M", "NCCL_BUFFSIZE=0", "NCCL_BUFFSIZE=-1", "NCCL_BUFFSIZE=99999999999"}) {
    row.env = bad;
    CHECK_THROWS_WITH(nccl_env_of(row), Catch::Contains("measurements.csv:" + std::to_string(row.line) + ": env: got '" +
                                                              bad + "', expected NCCL_BUFFSIZE a number of bytes"));
  }
  for (const char* bad : {"NCCL_NVLS_ENABLE=nan", "NCCL_MNNVL_ENABLE=yes", "NCCL_PXN_DISABLE=0.5"}) {
    row.env = bad;
    const std::string var = std::string(bad).substr(0, std::string(bad).find('='));
    CHECK_THROWS_WITH(nccl_env_of(row), Catch::Contains("measurements.csv:" + std::to_string(row.line) + ": env: got '" +
                                                        bad + "', expected " + var + " an integer"));
  }
}

TEST_CASE("validate-collectives: NCCL_MNNVL_ENABLE=0 makes every tray its own node", "[collective][validate]") {
  const auto pairs = predicted_with_env("GB300", 16, "alltoall", std::int64_t{8} << 30, "NCCL_MNNVL_ENABLE=0");
  CHECK(pairs.size() == 2);
  for (const auto& pair : pairs) {
    const auto& both = pair->predictions;
    CHECK(both[0].nvlink_domains == 1);   // one rack, MNNVL
    CHECK(both[1].nvlink_domains == 16);  // 16 trays over their NICs
    CHECK(both[1].dionsim_us > 2 * both[0].dionsim_us);
    CHECK(row_fabric(both[1]).gpus_per_nvlink_domain == 4);
  }
}

namespace {
// Each regime's rows and in-goal counts are the sum of its groups' (none lost, none counted twice),
// and no group lists a regime it has no rows in.
void check_split_loses_no_row(const std::vector<RegimeSummary>& total,
                              const std::map<std::string, std::vector<RegimeSummary>>& by) {
  for (const auto& t : total) {
    int rows_in = 0, dionsim_in = 0, baseline_in = 0;
    for (const auto& [group, regimes] : by) {
      for (const auto& s : regimes) {
        CHECK(s.rows > 0);
        if (s.regime != t.regime) continue;
        rows_in += s.rows;
        dionsim_in += s.dionsim_within;
        baseline_in += s.baseline_within;
      }
    }
    CHECK(rows_in == t.rows);
    CHECK(dionsim_in == t.dionsim_within);
    CHECK(baseline_in == t.baseline_within);
  }
}
}  // namespace

TEST_CASE("validate-collectives per collective: the regimes' rows split by collective, none lost", "[collective][validate]") {
  const auto rows = read_published_rows(std::string(DIONSIM_SHARED_DIR) + "/data/nccl-published/measurements.csv");
  const auto predictions = predict_published(rows);
  const auto total = summarize(predictions);
  const auto by = summarize_by_collective(predictions);
  CHECK(by.size() == 4);  // allgather, allreduce, alltoall, reducescatter
  CHECK(by.count("alltoall") == 1);
  check_split_loses_no_row(total, by);
  // Only all-reduce has published rows at <= 64 KiB.
  for (const auto& [collective, regimes] : by)
    for (const auto& s : regimes) CHECK((s.regime != SizeRegime::latency || collective == "allreduce"));
}

TEST_CASE("validate-collectives per preset: the regimes' rows split by fabric, none lost", "[collective][validate]") {
  const auto rows = read_published_rows(std::string(DIONSIM_SHARED_DIR) + "/data/nccl-published/measurements.csv");
  const auto predictions = predict_published(rows);
  const auto total = summarize(predictions);
  const auto by = summarize_by_preset(predictions);
  CHECK(by.count("h100-ndr400") == 1);
  CHECK(by.count("gb300-nvl72") == 1);
  check_split_loses_no_row(total, by);
}

TEST_CASE("validate-collectives: a malformed CSV names the line and field", "[collective][validate]") {
  // In a folder of its own under the system's temporary directory: never in the working directory.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("dionsim_collective_test." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "bad_published.csv").string();
  // The header and one H100 row with this date, collective and time.
  const auto write_row = [&](const std::string& date, const std::string& collective, const std::string& time_us) {
    std::ofstream out(path);
    out << "source,date,gpu,gpus_per_node,nodes,world,intra_fabric,nic,nccl_version,env,collective,dtype,placement,"
           "size_bytes,count,time_us,algbw_GBps,busbw_GBps,notes\n"
        << "s," << date << ",H100,8,2,16,nv,ib,2.28,," << collective << ",float,out-of-place,1024,256," << time_us
        << ",1,1,\n";
  };
  write_row("d", "allgather", "-3");
  try {
    (void)read_published_rows(path);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find(path + ":2: time_us: got '-3'") != std::string::npos);
  }
  // A date that is none of the source's forms (the fuzzer's '2024-07-nan' was accepted).
  for (const char* date : {"2024-07-nan", "2024-13", "24", "2026-2025", "2024-07-32"}) {
    write_row(date, "allgather", "3");
    INFO(date);
    CHECK_THROWS_WITH(read_published_rows(path), Catch::Contains(path + ":2: date: got '" + date + "'"));
  }
  // nccl-tests' and NCCL's spellings of the four collectives read as the file's own.
  for (const auto& [name, canonical] : std::vector<std::pair<std::string, std::string>>{
           {"all_reduce", "allreduce"}, {"AllReduce", "allreduce"}, {"all_gather_perf", "allgather"},
           {"reduce-scatter", "reducescatter"}, {"all_to_all", "alltoall"}, {"alltoall_perf", "alltoall"}}) {
    write_row("2024", name, "3");
    INFO(name);
    CHECK(read_published_rows(path).at(0).collective == canonical);
  }
  // nccl-tests' other tests are rows too (reported as not modelled); a name that is none is refused.
  for (const char* name : {"broadcast_perf", "Reduce", "sendrecv", "gather", "scatter", "hypercube"}) {
    write_row("2024", name, "3");
    INFO(name);
    CHECK(read_published_rows(path).size() == 1);
  }
  for (const char* name : {"all", "perf", "allreduces", ""}) {
    write_row("2024", name, "3");
    INFO(name);
    CHECK_THROWS_WITH(read_published_rows(path), Catch::Contains(path + ":2: collective: got '" + name + "'"));
  }
  for (const char* date : {"2024", "2024-07", "2024-07-19", "2024-2026"}) {
    write_row(date, "allgather", "3");
    INFO(date);
    CHECK(read_published_rows(path).size() == 1);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("collective model: finite, positive, size-monotone prices on random clusters and every enabled pair",
          "[collective][model]") {
  // Deterministic sweep over every preset, random node counts and sizes: whatever NCCL's emulated
  // search and the ceilings give, a price is finite and positive, and a pair's time never falls as
  // the buffer grows (the pipeline fill's chunk only grows with it).
  std::mt19937_64 rng(16);
  std::uniform_int_distribution<int> nodes_of(1, 96);
  std::uniform_int_distribution<int> log_bytes(0, 34);
  int priced = 0;
  for (const auto& name : topo::preset_names()) {
    for (const int gpn : {1, 2, 4, 8}) {
      const int nodes = nodes_of(rng);
      std::unique_ptr<CollectiveModel> model;
      try {
        model = std::make_unique<CollectiveModel>(topo::preset(name), nodes, gpn);
      } catch (const UsageError&) {
        continue;  // a host larger than the preset's NVLink domain
      }
      if (model->ranks() < 2) continue;
      for (const auto f : {NcclFunc::allgather, NcclFunc::reducescatter, NcclFunc::allreduce}) {
        for (int a = 0; a < kNcclAlgos; ++a) {
          for (int p = 0; p < kNcclProtos; ++p) {
            const auto algo = static_cast<NcclAlgo>(a);
            const auto proto = static_cast<NcclProto>(p);
            double previous = 0;
            std::vector<std::int64_t> sizes;
            for (int i = 0; i < 6; ++i) sizes.push_back(std::int64_t{1} << log_bytes(rng));
            std::sort(sizes.begin(), sizes.end());
            for (const auto bytes : sizes) {
              const auto c = model->price(f, algo, proto, bytes);
              if (!c) break;  // not enabled on this shape
              ++priced;
              INFO(name << " " << nodes << " x " << gpn << " " << to_string(f) << " " << to_string(algo) << "/"
                        << to_string(proto) << " " << bytes << " B");
              REQUIRE(std::isfinite(c->time_us));
              CHECK(c->time_us > 0);
              CHECK(c->latency_us >= 0);
              CHECK(c->bandwidth_GBps > 0);
              CHECK(c->time_us >= previous * (1 - 1e-12));
              previous = c->time_us;
            }
          }
        }
        const auto op = f == NcclFunc::allgather       ? CollectiveOp::allgather
                        : f == NcclFunc::reducescatter ? CollectiveOp::reducescatter
                                                       : CollectiveOp::allreduce;
        const auto chosen = model->cost(op, std::int64_t{1} << log_bytes(rng));
        CHECK(std::isfinite(chosen.time_us));
      }
      if (model->ranks() > 64) continue;  // the all-to-all's DES at small worlds (test time)
      double previous = 0;  // the all-to-all: latency rounds and the DES
      for (const std::int64_t bytes : {std::int64_t{1} << 13, std::int64_t{1} << 20, std::int64_t{1} << 30}) {
        const auto a2a = model->cost(CollectiveOp::alltoall, bytes);
        INFO(name << " " << nodes << " x " << gpn << " all-to-all " << bytes << " B");
        REQUIRE(std::isfinite(a2a.time_us));
        CHECK(a2a.time_us > previous);
        previous = a2a.time_us;
      }
    }
  }
  CHECK(priced > 1000);
}

TEST_CASE("the size-regime time factor scales every call of its regime alike and nothing else", "[collective][model]") {
  const topo::FabricSpec spec = topo::preset("h100-ndr400");
  ModelOptions stressed;
  stressed.time_factor_by_size_regime = {2.0, 3.0, 0.5};
  const CollectiveModel plain(spec, 16, 8), stress(spec, 16, 8, stressed);
  // 64 KiB is the last latency-bound size, 64 MiB the first bandwidth-bound one (validate-collectives' regimes).
  const std::vector<std::pair<std::int64_t, double>> sizes = {
      {8192, 2.0}, {std::int64_t{64} << 10, 2.0}, {(std::int64_t{64} << 10) + 1, 3.0}, {std::int64_t{1} << 20, 3.0},
      {(std::int64_t{64} << 20) - 1, 3.0}, {std::int64_t{64} << 20, 0.5}, {std::int64_t{1} << 30, 0.5}};
  for (const auto op : {CollectiveOp::allgather, CollectiveOp::reducescatter, CollectiveOp::allreduce, CollectiveOp::alltoall}) {
    for (const auto& [bytes, f] : sizes) {
      INFO(to_string(op) << " " << bytes);
      const auto a = plain.cost(op, bytes), b = stress.cost(op, bytes);
      CHECK(b.algorithm == a.algorithm);  // the choice is NCCL's, not the stress test's
      CHECK(b.protocol == a.protocol);
      CHECK(b.time_us == Approx(f * a.time_us).epsilon(1e-12));
      CHECK(b.latency_us == Approx(f * a.latency_us).epsilon(1e-12));
      CHECK(b.pipeline_fill_us == Approx(f * a.pipeline_fill_us).epsilon(1e-12));
      if (a.bandwidth_GBps > 0) CHECK(b.bandwidth_GBps == Approx(a.bandwidth_GBps / f).epsilon(1e-12));
    }
  }
  for (const double bad : {0.0, -1.0, 101.0, std::nan("")}) {
    ModelOptions o;
    o.time_factor_by_size_regime[1] = bad;
    CHECK_THROWS_AS(CollectiveModel(spec, 2, 8, o), UsageError);
  }
}
