// All-to-alls on NVL72 racks against their closed forms: inside one rack (72 GPUs) only NVLink is
// used; across two racks (144 GPUs) every rank's 72 off-rack chunks cross its NIC.
//
// Closed form (max-min on a non-blocking fabric, every flow of a kind bottlenecked on one link
// shared only with flows of its kind): w ranks, domain d, S bytes sent per rank, m = S / w,
//   t = max( (d−1)·m / nvlink + nvlink latency,  (w−d)·m / nic + nic latency )
// with effective bandwidths (nominal × efficiency); the second term is absent for w ≤ d.
#include <catch2/catch.hpp>

#include "sim/collectives.hpp"
#include "topologies/topology.hpp"

using namespace dionsim;

namespace {

double alltoall_closed_form_s(const topo::FabricSpec& s, int w, double bytes) {
  const int d = std::min(w, s.gpus_per_nvlink_domain);
  const double m = bytes / w;
  const double nv = s.nvlink_GBps * 1e9 * s.nvlink_efficiency;
  const double nic = s.nic_GBps * 1e9 * s.nic_efficiency;
  double t = (d - 1) * m / nv + s.nvlink_latency_us * 1e-6;
  if (w > d) t = std::max(t, (w - d) * m / nic + s.nic_latency_us * 1e-6);
  return t;
}

double simulated_s(const topo::FabricSpec& s, int hosts, double bytes, sim::Mode mode) {
  const topo::Topology t(s, hosts);
  sim::CollectiveSpec c;
  c.op = sim::CollectiveOp::alltoall;
  c.bytes = static_cast<std::int64_t>(bytes);
  return static_cast<double>(sim::simulate_collective(t, c, mode).time.count_ps()) * 1e-12;
}

}  // namespace

TEST_CASE("gb200-nvl72: an all-to-all over 72 GPUs costs NVLink time only", "[topology][nvl72]") {
  const topo::FabricSpec s = topo::preset("gb200-nvl72");
  const double bytes = 72.0 * 4 * 1024 * 1024;  // 4 MiB to every peer
  const double t = simulated_s(s, 18, bytes, sim::Mode::fast);
  CHECK(t == Approx(alltoall_closed_form_s(s, 72, bytes)).epsilon(1e-6));
  CHECK(t == Approx(71 * 4.0 * 1024 * 1024 / (900e9 * 0.666) + 60e-6).epsilon(1e-6));
  // a thousand times slower NICs change nothing: no byte crosses a NIC
  topo::FabricSpec slow_nic = s;
  slow_nic.nic_GBps = s.nic_GBps / 1000;
  CHECK(simulated_s(slow_nic, 18, bytes, sim::Mode::exact) == Approx(t).epsilon(1e-6));
  // 64 GPUs of a rack (a cluster smaller than one domain) likewise
  CHECK(simulated_s(slow_nic, 16, 64.0 * 1e6, sim::Mode::exact) ==
        Approx(63 * 1e6 / (900e9 * 0.666) + 60e-6).epsilon(1e-6));
}

TEST_CASE("gb200-nvl72: over 144 GPUs the inter-rack part crosses the NICs", "[topology][nvl72]") {
  const topo::FabricSpec s = topo::preset("gb200-nvl72");
  const double bytes = 144.0 * 4 * 1024 * 1024;
  // 36 trays on 32-port rail leaves are not symmetric: the exact path, one flow per message
  const double t = simulated_s(s, 36, bytes, sim::Mode::fast);
  const double m = 4.0 * 1024 * 1024;
  const double nic_part = 72 * m / (50e9 * s.nic_efficiency) + s.nic_latency_us * 1e-6;  // the preset's
  const double nvlink_part = 71 * m / (900e9 * 0.666) + 60e-6;
  REQUIRE(nic_part > nvlink_part);
  CHECK(t == Approx(alltoall_closed_form_s(s, 144, bytes)).epsilon(1e-6));
  CHECK(t == Approx(nic_part).epsilon(1e-6));
  // the NIC sets the time: twice the NIC bandwidth halves the transfer part
  topo::FabricSpec fast_nic = s;
  fast_nic.nic_GBps = 2 * s.nic_GBps;
  CHECK(simulated_s(fast_nic, 36, bytes, sim::Mode::fast) == Approx(72 * m / (100e9 * s.nic_efficiency) + s.nic_latency_us * 1e-6).epsilon(1e-6));
  // 800G NICs make the two parts comparable; the closed form is still the maximum
  const topo::FabricSpec xdr = topo::preset("gb300-nvl72-xdr800");
  CHECK(simulated_s(xdr, 36, bytes, sim::Mode::fast) == Approx(alltoall_closed_form_s(xdr, 144, bytes)).epsilon(1e-6));
}

TEST_CASE("NVL72 racks of 64 GPUs: the symmetric fast path equals the exact flows and the closed form",
          "[topology][nvl72]") {
  topo::FabricSpec s = topo::preset("gb200-nvl72");
  s.gpus_per_nvlink_domain = 64;  // 16 of each rack's 18 trays in the job
  const double bytes = 256.0 * 1e6;
  const double fast = simulated_s(s, 64, bytes, sim::Mode::fast);  // 256 GPUs, 4 racks
  CHECK(fast == Approx(alltoall_closed_form_s(s, 256, bytes)).epsilon(1e-6));
  CHECK(fast == Approx(simulated_s(s, 64, bytes, sim::Mode::exact)).epsilon(1e-6));
}
