// Collectives as flows: closed forms from the issue, the symmetric fast path against the exact
// per-flow path, and bad specs.
#include <random>
#include <tuple>
#include <catch2/catch.hpp>
#include <tuple>

#include "common/error.hpp"
#include "sim/collectives.hpp"

using namespace dionsim::sim;
using dionsim::topo::FabricSpec;
using dionsim::topo::Layout;
using dionsim::topo::Topology;

namespace {

FabricSpec fabric(double nvlink_GBps, double nic_GBps, double latency_us, Layout layout = Layout::rail,
                  int radix = 32, double oversub = 1.0) {
  FabricSpec s;
  s.name = "test";
  s.nvlink_GBps = nvlink_GBps;
  s.nic_GBps = nic_GBps;
  s.nvlink_latency_us = latency_us;
  s.nic_latency_us = latency_us;
  s.layout = layout;
  s.leaf_radix = radix;
  s.oversubscription = oversub;
  return s;
}

CollectiveSpec a2a(std::int64_t bytes) {
  CollectiveSpec c;
  c.op = CollectiveOp::alltoall;
  c.bytes = bytes;
  return c;
}

}  // namespace

TEST_CASE("all-to-all on a non-blocking fabric: max(S(w-g)/w / nic, S(g-1)/w / nvlink) + latency", "[collective]") {
  // From 1x2 to 128x8 ranks, both regimes (NVLink-bound at small node counts with slow NVLink).
  const double nvlink = 450, nic = 50, lat_us = 5;
  const std::int64_t S = 256LL << 20;
  for (const auto& [nodes, g] : {std::tuple{1, 2}, {1, 8}, {2, 1}, {2, 8}, {4, 4}, {16, 8}, {32, 8}, {64, 8},
                                 {128, 8}}) {
    for (const double nv : {nvlink, 60.0}) {
      const Topology t(fabric(nv, nic, lat_us), nodes, g);
      const double w = nodes * g;
      const double expected_s =
          std::max(S * (w - g) / w / (nic * 1e9), S * (g - 1) / w / (nv * 1e9)) + lat_us * 1e-6;
      const auto r = simulate_collective(t, a2a(S), Mode::fast);
      INFO(nodes << "x" << g << " nvlink " << nv);
      CHECK(r.time.to_s() == Approx(expected_s).epsilon(0.01));
      CHECK(r.used_symmetry);
    }
  }
}

TEST_CASE("all-to-all with oversubscription R: the cross-leaf part slows by R", "[collective]") {
  // 8 nodes x 8 GPUs, rail layout, 2 nodes per rail leaf: per rank 8*6 = 48 peers... cross-leaf
  // peers c = w - (nodes on my leaf: 2 x 1 rail GPU) - (my node's other rails: 7 reach them via
  // NVLink) ... count exactly from the routes instead of by hand.
  const std::int64_t S = 512LL << 20;
  for (const double R : {1.0, 2.0, 4.0}) {
    const Topology t(fabric(450, 50, 0, Layout::rail, 2, R), 8, 8);
    int cross = 0;
    for (int d = 1; d < t.ranks(); ++d) cross += t.route(0, d).size() == 4 ? 1 : 0;
    const double w = t.ranks();
    // Each leaf has 2 NICs x 50 GB/s down and 100/R GB/s up: a NIC's share of the uplink is 50/R.
    const double expected_s = R * S * cross / w / 50e9;
    const double nic_bound_s = S * (w - 8) / w / 50e9;
    const auto r = simulate_collective(t, a2a(S), Mode::fast);
    INFO("R = " << R << " cross-leaf peers " << cross);
    CHECK(r.time.to_s() == Approx(std::max(expected_s, nic_bound_s)).epsilon(0.01));
    if (R > 1) CHECK(r.time.to_s() == Approx(expected_s).epsilon(0.01));
  }
}

TEST_CASE("ring all-gather: (n-1)/n S/bw + (n-1) latency", "[collective]") {
  const std::int64_t S = 64LL << 20;
  const double lat_us = 7;
  for (const auto& [nodes, g] : {std::tuple{1, 2}, {1, 8}, {4, 4}, {3, 2}}) {
    // Equal effective bandwidth everywhere, so every hop of the ring takes the same time.
    const Topology t(fabric(50, 50, lat_us), nodes, g);
    const double n = nodes * g;
    CollectiveSpec c;
    c.op = CollectiveOp::allgather;
    c.algorithm = Algorithm::ring;
    c.bytes = S;
    const auto r = simulate_collective(t, c, Mode::fast);
    CHECK_FALSE(r.used_symmetry);  // ring runs exact
    INFO(nodes << "x" << g);
    CHECK(r.time.to_s() == Approx((n - 1) / n * S / 50e9 + (n - 1) * lat_us * 1e-6).epsilon(1e-6));
    c.op = CollectiveOp::reducescatter;
    CHECK(simulate_collective(t, c, Mode::exact).time == r.time);
  }
}

TEST_CASE("ring with a slow hop: the NIC hop carries all n-1 chunks", "[collective]") {
  // 2 nodes x 4: two of the eight hops cross nodes. Each NIC hop must carry n-1 chunks, and a
  // rank forwards a chunk as soon as it arrives, so the NIC stays busy from the start: the ring
  // takes at least (n-1) chunk / nic, and at most that plus one pass of the pipeline around the
  // ring ((n-1) hops of NVLink time and latency) plus the NIC hops' latency.
  const Topology t(fabric(400, 50, 2), 2, 4);
  CollectiveSpec c;
  c.op = CollectiveOp::allgather;
  c.algorithm = Algorithm::ring;
  c.bytes = 80LL << 20;
  const double chunk = static_cast<double>(c.bytes) / 8;
  const double lower = 7 * chunk / 50e9;
  const double upper = lower + 7 * (chunk / 400e9 + 2e-6) + 2 * 2e-6;
  const double got = simulate_collective(t, c, Mode::exact).time.to_s();
  CHECK(got >= lower);
  CHECK(got <= upper);
  // and it is far slower than if every hop ran at NVLink speed
  const Topology fast_nic(fabric(400, 400, 2), 2, 4);
  CHECK(simulate_collective(fast_nic, c, Mode::exact).time.to_s() < got / 4);
}

TEST_CASE("point-to-point: bytes over the route's bottleneck plus latency", "[collective]") {
  const Topology t(fabric(400, 50, 3), 2, 4);
  CollectiveSpec c;
  c.op = CollectiveOp::sendrecv;
  c.bytes = 1'000'000'000;
  c.src = 0;
  c.dst = 5;
  CHECK(simulate_collective(t, c, Mode::fast).time.to_s() == Approx(1e9 / 50e9 + 3e-6).epsilon(1e-9));
  c.dst = 3;
  CHECK(simulate_collective(t, c, Mode::fast).time.to_s() == Approx(1e9 / 400e9 + 3e-6).epsilon(1e-9));
  c.dst = 8;
  CHECK_THROWS_AS(simulate_collective(t, c, Mode::fast), dionsim::UsageError);
}

TEST_CASE("fast (symmetry classes) == exact (one flow per message)", "[collective]") {
  struct Shape {
    int nodes, g;
    Layout layout;
    int radix;
    double oversub, nvlink, nic;
  };
  const Shape shapes[] = {
      {1, 2, Layout::rail, 32, 1, 450, 50},  {1, 8, Layout::rail, 32, 1, 450, 50},
      {2, 4, Layout::rail, 32, 1, 450, 50},  {4, 2, Layout::rail, 2, 2, 450, 50},
      {6, 4, Layout::node, 8, 3, 450, 50},   {8, 8, Layout::rail, 4, 1.5, 450, 50},
      {4, 4, Layout::node, 4, 1, 20, 50},    {6, 2, Layout::rail, 3, 2.5, 100, 45},
      {16, 8, Layout::rail, 4, 2, 450, 50},
  };
  for (const auto& s : shapes) {
    FabricSpec f = fabric(s.nvlink, s.nic, 4, s.layout, s.radix, s.oversub);
    f.nic_latency_us = 9;  // different latencies per class
    const Topology t(f, s.nodes, s.g);
    REQUIRE(t.symmetric());
    for (const auto op : {CollectiveOp::alltoall, CollectiveOp::allgather, CollectiveOp::reducescatter}) {
      CollectiveSpec c;
      c.op = op;
      c.algorithm = Algorithm::direct;
      c.bytes = 96LL << 20;
      const auto fast = simulate_collective(t, c, Mode::fast);
      const auto exact = simulate_collective(t, c, Mode::exact);
      INFO(s.nodes << "x" << s.g << " " << to_string(s.layout) << " R=" << s.oversub << " " << to_string(op));
      CHECK(fast.used_symmetry);
      CHECK_FALSE(exact.used_symmetry);
      CHECK(fast.solver_flows < exact.solver_flows + (t.ranks() <= 2 ? 1u : 0u));
      CHECK(fast.messages == exact.messages);
      CHECK(fast.time.to_s() == Approx(exact.time.to_s()).epsilon(1e-9));
    }
  }
}

TEST_CASE("fast == exact on fabrics of unequal parts: partial leaves, partial and misaligned NVLink domains",
          "[collective]") {
  // Flow classes by host type (cell of leaf group x NVLink domain within a period of whole leaf
  // groups and whole domains): exact wherever the fabric's parts differ. Random shapes of up to
  // ~400 ranks (the exact path's one flow per message stays quick), every layout, NVL72-style
  // domains spanning hosts and misaligned with the leaves, oversubscription, PXN on and off.
  std::mt19937_64 rng(20261206);
  const auto pick = [&](std::initializer_list<int> v) { return *(v.begin() + rng() % v.size()); };
  int asymmetric = 0;
  for (int trial = 0; trial < 60; ++trial) {
    FabricSpec f = fabric(pick({100, 450, 900}), pick({25, 50, 100}), 2, trial % 2 ? Layout::rail : Layout::node,
                          pick({2, 3, 4, 8, 12}), pick({1, 1, 2, 3}));
    f.nic_latency_us = 9;
    const int g = pick({1, 2, 3, 4});
    if (f.layout == Layout::node) f.leaf_radix = g * pick({1, 2, 3, 5});
    f.gpus_per_host = g;
    f.gpus_per_nvlink_domain = g * pick({1, 1, 2, 3, 5, 7});
    const int hosts = pick({2, 3, 5, 7, 11, 13, 17, 24, 29, 31});
    const Topology t(f, hosts);
    asymmetric += !t.symmetric();
    for (const bool pxn : {true, false}) {
      for (const auto op : {CollectiveOp::alltoall, CollectiveOp::allgather}) {
        CollectiveSpec c;
        c.op = op;
        c.algorithm = Algorithm::direct;
        c.bytes = 96LL << 20;
        c.pxn = pxn;
        const auto fast = simulate_collective(t, c, Mode::fast);
        const auto exact = simulate_collective(t, c, Mode::exact);
        INFO(hosts << " hosts x " << g << ", domain " << f.gpus_per_nvlink_domain << ", " << to_string(f.layout)
                   << " radix " << f.leaf_radix << " R=" << f.oversubscription << " pxn " << pxn << " " << to_string(op));
        CHECK(fast.used_symmetry);
        CHECK(fast.messages == exact.messages);
        CHECK(fast.time.to_s() == Approx(exact.time.to_s()).epsilon(1e-9));
      }
    }
  }
  CHECK(asymmetric >= 30);  // the sweep is mostly of unequal parts
}

TEST_CASE("fast path: 8000 ranks of unequal leaves and 2047 NVL72 trays, few classes", "[collective]") {
  // 1000 H100 hosts on 32-host rail leaves (the last holds 8) and 2047 trays of 4 in 72-GPU
  // domains misaligned with 32-host leaves: the exact path would hold 64 M and 67 M flows.
  FabricSpec hgx = fabric(450, 50, 2, Layout::rail, 32);
  hgx.gpus_per_host = hgx.gpus_per_nvlink_domain = 8;
  FabricSpec nvl = fabric(900, 50, 2, Layout::rail, 32);
  nvl.gpus_per_host = 4;
  nvl.gpus_per_nvlink_domain = 72;
  for (const auto& [spec, hosts, most] : {std::tuple{hgx, 1000, 24u}, std::tuple{nvl, 2047, 20000u}}) {
    const Topology t(spec, hosts);
    REQUIRE_FALSE(t.symmetric());
    const auto r = simulate_collective(t, a2a(1LL << 30), Mode::fast);
    CHECK(r.used_symmetry);
    CHECK(r.solver_flows <= most);
    // Every GPU sends (w - 1) / w of 1 GiB, at least through its NVLink or NIC: a floor.
    CHECK(r.time.to_s() > (1LL << 30) * (t.ranks() - 1.0) / t.ranks() / (900e9 + 50e9));
  }
}

TEST_CASE("collectives on a shared engine contend with other traffic", "[collective]") {
  // Two independent all-to-alls launched together on one engine take twice as long as one.
  const Topology t(fabric(450, 50, 0), 2, 2);
  Engine e;
  FabricNetwork net(e, t);
  int done = 0;
  net.launch(a2a(64 << 20), [&] { ++done; });
  net.launch(a2a(64 << 20), [&] { ++done; });
  e.run();
  CHECK(done == 2);
  const auto alone = simulate_collective(t, a2a(64 << 20), Mode::exact);
  CHECK(e.now().to_s() == Approx(2 * alone.time.to_s()).epsilon(1e-9));
}

TEST_CASE("single rank and zero bytes", "[collective]") {
  const Topology one(fabric(450, 50, 5), 1, 1);
  CHECK(simulate_collective(one, a2a(1 << 20), Mode::fast).time == SimTime{});
  const Topology t(fabric(450, 50, 5), 2, 2);
  CHECK(simulate_collective(t, a2a(0), Mode::exact).time == SimTime::from_us(5));
  CHECK_THROWS_AS(simulate_collective(t, a2a(-1), Mode::exact), dionsim::UsageError);
  CollectiveSpec ring = a2a(10);
  ring.algorithm = Algorithm::ring;
  CHECK_THROWS_AS(simulate_collective(t, ring, Mode::exact), dionsim::UsageError);
}

TEST_CASE("sweep sizes as nccl-tests -b/-e/-f", "[collective]") {
  CHECK(sweep_sizes(1024, 8192, 2) == std::vector<std::int64_t>{1024, 2048, 4096, 8192});
  CHECK(sweep_sizes(1000, 1000, 4) == std::vector<std::int64_t>{1000});
  CHECK(sweep_sizes(1, 100, 10) == std::vector<std::int64_t>{1, 10, 100});
  CHECK(sweep_sizes(1LL << 61, (1LL << 62) + 1, 4).size() == 1);  // no overflow
  CHECK_THROWS_WITH(sweep_sizes(8, 4, 2), "invalid sizes for 'minbytes' and 'maxbytes': 8 > 4");
  CHECK_THROWS_AS(sweep_sizes(1, 4, 1), dionsim::UsageError);
  CHECK_THROWS_AS(sweep_sizes(0, 4, 2), dionsim::UsageError);
}
