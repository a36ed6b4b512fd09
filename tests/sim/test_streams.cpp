// Per-rank streams: stream order, cross-stream waits, overlap, collectives that occupy every
// comm stream and contend on the fabric, ops whose rate changes with what runs beside them.
#include <catch2/catch.hpp>
#include <limits>
#include <vector>

#include "sim/streams.hpp"

using namespace dionsim::sim;

namespace {
SimTime us(std::int64_t v) { return SimTime::ns(v * 1000); }

dionsim::topo::FabricSpec fabric() {
  dionsim::topo::FabricSpec s;
  s.name = "test";
  s.nvlink_GBps = 100;
  s.nic_GBps = 10;
  s.nvlink_latency_us = 1;
  s.nic_latency_us = 1;
  return s;
}
}  // namespace

TEST_CASE("a stream runs its ops in issue order, and other streams overlap", "[streams]") {
  Engine e;
  StreamProgram p(e, 1);
  const OpId a = p.compute(0, us(10), "A");
  const OpId x = p.collective_timed(us(30), 1e6, "X", std::vector<OpId>{a});
  const OpId b = p.compute(0, us(5), "B");                           // no dep on X: overlaps it
  const OpId c = p.compute(0, us(10), "C", std::vector<OpId>{x});    // waits for X (cross-stream)
  p.run();
  CHECK(p.op(a).start == us(0));
  CHECK(p.op(x).start == us(10));
  CHECK(p.op(b).start == us(10));
  CHECK(p.op(b).end == us(15));
  CHECK(p.op(c).start == us(40));
  CHECK(p.makespan() == us(50));
  CHECK(p.busy(0, Stream::compute) == us(25));
  CHECK(p.busy(0, Stream::comm) == us(30));
}

TEST_CASE("a collective starts when every rank's comm stream is free", "[streams]") {
  Engine e;
  StreamProgram p(e, 3);
  const OpId slow = p.comm_delay(2, us(20), "rank 2 busy");
  p.comm_delay(0, us(5), "rank 0 busy");
  const OpId x = p.collective_timed(us(10), 0, "X");
  const OpId after = p.comm_delay(1, us(1), "after X on rank 1");
  p.run();
  CHECK(p.op(slow).end == us(20));
  CHECK(p.op(x).start == us(20));
  CHECK(p.op(after).start == us(30));
  CHECK(p.busy(1, Stream::comm) == us(11));
}

TEST_CASE("not_before releases an op at a simulated time", "[streams]") {
  Engine e;
  StreamProgram p(e, 1);
  const OpId a = p.compute(0, us(3), "A", {}, us(100));
  p.run();
  CHECK(p.op(a).start == us(100));
  CHECK(p.op(a).end == us(103));
}

TEST_CASE("collectives on streams are flows: same time alone, slower when they contend", "[streams]") {
  const dionsim::topo::Topology t(fabric(), 2, 2);
  CollectiveSpec a2a;
  a2a.op = CollectiveOp::alltoall;
  a2a.bytes = 64LL << 20;
  const SimTime alone = simulate_collective(t, a2a, Mode::exact).time;

  Engine e;
  FabricNetwork net(e, t);
  StreamProgram p(e, t.ranks(), &net);
  const OpId c = p.compute(0, us(50), "pack");
  const OpId x = p.collective(a2a, "a2a fwd", std::vector<OpId>{c});
  p.run();
  CHECK(p.op(x).start == us(50));
  CHECK(p.op(x).end - p.op(x).start == alone);

  // The same collective with a concurrent rank-0 -> rank-2 message over the NIC (another stream
  // of traffic, e.g. FSDP): the collective cannot be faster, and is slower here.
  Engine e2;
  FabricNetwork net2(e2, t);
  StreamProgram q(e2, t.ranks(), &net2);
  const OpId y = q.collective(a2a, "a2a");
  net2.send(0, 2, 64e6, [] {});
  q.run();
  CHECK(q.op(y).end - q.op(y).start > alone);
}

TEST_CASE("at most three megabatches in flight, as dependencies", "[streams]") {
  // Each megabatch: compute 10 -> collective 30 -> compute 10. Issued as the AsyncRuntime does
  // (phase 0 of a new task, then the next phase of the active ones); megabatch k+3 may not start
  // before megabatch k finished.
  Engine e;
  StreamProgram p(e, 1);
  const int n = 6;
  std::vector<OpId> first(n), coll(n), last(n);
  for (int k = 0; k < n; ++k) {
    std::vector<OpId> gate;
    if (k >= 3) gate.push_back(last[static_cast<std::size_t>(k - 3)]);
    first[k] = p.compute(0, us(10), "P0", gate);
    coll[k] = p.collective_timed(us(30), 0, "X", std::vector<OpId>{first[k]});
    if (k >= 2 || k == n - 1) {
      for (int j = (k >= 2 ? k - 2 : 0); j <= (k == n - 1 ? k : k - 2); ++j) {
        last[j] = p.compute(0, us(10), "P1", std::vector<OpId>{coll[j]});
      }
    }
  }
  p.run();
  bool window_binds = false;
  for (int k = 3; k < n; ++k) {
    CHECK(p.op(first[k]).start >= p.op(last[k - 3]).end);
    window_binds = window_binds || p.op(first[k]).start == p.op(last[k - 3]).end;
  }
  CHECK(window_binds);  // the window, not the stream, decided when some megabatch started
  // The collectives are the bottleneck resource (30 of every 50 us are comm): the comm stream
  // is never idle once started except while waiting for the window.
  CHECK(p.busy(0, Stream::comm) == us(30 * n));
  CHECK(p.busy(0, Stream::compute) == us(20 * n));
  CHECK(p.makespan() >= us(10 + 30 * n + 10));
}

TEST_CASE("ops with no network refuse network work", "[streams]") {
  Engine e;
  StreamProgram p(e, 2);
  CollectiveSpec c;
  CHECK_THROWS(p.collective(c, "x"));
  CHECK_THROWS(p.send(0, 1, 1, "s"));
  CHECK_THROWS(p.compute(2, us(1), "bad rank"));
}

TEST_CASE("alltoallv: uniform sizes equal the all-to-all, and skewed sizes wait for the largest", "[streams]") {
  const dionsim::topo::Topology t(fabric(), 2, 2);
  const int w = t.ranks();
  CollectiveSpec a2a;
  a2a.op = CollectiveOp::alltoall;
  a2a.bytes = 4 * (8LL << 20);
  const SimTime uniform = simulate_collective(t, a2a, Mode::exact).time;
  std::vector<double> m(static_cast<std::size_t>(w * w), 8.0 * (1 << 20));
  {
    Engine e;
    FabricNetwork net(e, t);
    StreamProgram p(e, w, &net);
    const OpId x = p.alltoallv(m, "a2av");
    p.run();
    CHECK(p.op(x).end == uniform);
  }
  // Only rank 0 -> rank 2 sends, 64 MB over a 10 GB/s NIC plus 1 us.
  std::fill(m.begin(), m.end(), 0.0);
  m[0 * w + 2] = 64e6;
  Engine e;
  FabricNetwork net(e, t);
  StreamProgram p(e, w, &net);
  const OpId x = p.alltoallv(m, "a2av");
  p.run();
  CHECK(p.op(x).end.to_us() == Approx(64e6 / 10e9 * 1e6 + 1).epsilon(1e-9));
  CHECK_THROWS(p.alltoallv(std::vector<double>(3, 1.0), "wrong size"));
}

TEST_CASE("contention: a kernel beside a comm op runs slower while it is in flight", "[streams]") {
  // A: 100 us of work, 2x slower beside a comm op; X: 60 us from 20 us. A does 20 us alone, 30 us
  // of work in [20, 80] at half speed, the last 50 us alone -> ends at 130. X (A is not
  // memory-bound) keeps its 60 us.
  Engine e;
  StreamProgram p(e, 1);
  Contention slowed;
  slowed.slowdown_beside_comm = 2.0;
  const OpId a = p.compute(0, us(100), "A", {}, SimTime{}, slowed);
  const OpId x = p.comm_delay(0, us(60), "X", {}, us(20));
  p.run();
  CHECK(p.op(a).end == us(130));
  CHECK(p.op(x).start == us(20));
  CHECK(p.op(x).end == us(80));
  CHECK(p.busy(0, Stream::compute) == us(130));
}

TEST_CASE("contention: both ways at once, a collective goes at its slowest rank's pace", "[streams]") {
  {
    // M: memory-bound, 100 us, 2x slower beside comm; C: 60 us, 2x slower beside a memory-bound
    // kernel. Both at half speed until C is done at 120 (M has 60 of 100 us); M ends at 160.
    Engine e;
    StreamProgram p(e, 1);
    Contention m;
    m.slowdown_beside_comm = 2.0;
    m.memory_bound = true;
    Contention c;
    c.slowdown_beside_memory_bound = 2.0;
    const OpId mem = p.compute(0, us(100), "M", {}, SimTime{}, m);
    const OpId coll = p.collective_timed(us(60), 0, "C", {}, SimTime{}, c);
    p.run();
    CHECK(p.op(coll).end == us(120));
    CHECK(p.op(mem).end == us(160));
  }
  {
    // Two ranks: a memory-bound kernel of 30 us on rank 1 only; the collective (60 us, 3x slower
    // beside one) does 10 us of work by 30, the other 50 alone -> 80. Rank 0's kernel beside it
    // has no slowdown of its own.
    Engine e;
    StreamProgram p(e, 2);
    Contention m;
    m.memory_bound = true;
    Contention c;
    c.slowdown_beside_memory_bound = 3.0;
    p.compute(1, us(30), "M1", {}, SimTime{}, m);
    const OpId k0 = p.compute(0, us(50), "K0");
    const OpId coll = p.collective_timed(us(60), 0, "C", {}, SimTime{}, c);
    p.run();
    CHECK(p.op(coll).end == us(80));
    CHECK(p.op(k0).end == us(50));
  }
}

TEST_CASE("contention: integer time, factors 1 change nothing, bad factors are refused", "[streams]") {
  // Completions land on whole picoseconds, rounded up: A has 1 ns of work, 3x slower during the
  // 1 ps comm op X (1/3 ps of work done), the remaining 999.67 ps round up to 1000.
  Engine e;
  StreamProgram p(e, 1);
  Contention slowed;
  slowed.slowdown_beside_comm = 3.0;
  const OpId a = p.compute(0, SimTime::ns(1), "A", {}, SimTime{}, slowed);
  p.comm_delay(0, SimTime::ps(1), "X");
  Contention ones;
  ones.memory_bound = true;  // slows nothing: the comm ops beside it have factor 1
  const OpId b = p.compute(0, us(7), "B", {}, SimTime{}, ones);
  const OpId y = p.comm_delay(0, us(5), "Y", std::vector<OpId>{a});  // beside B, not A
  p.run();
  CHECK(p.op(a).end == SimTime::ps(1001));  // 1 ps + ceil(999.67 ps)
  CHECK(p.op(b).end == p.op(a).end + us(7));
  CHECK(p.op(y).start == p.op(a).end);
  CHECK(p.op(y).end - p.op(y).start == us(5));
  Contention bad;
  bad.slowdown_beside_comm = 0.5;
  CHECK_THROWS_AS(p.compute(0, us(1), "bad", {}, SimTime{}, bad), std::invalid_argument);
  bad.slowdown_beside_comm = 1.0;
  bad.slowdown_beside_memory_bound = std::numeric_limits<double>::infinity();
  CHECK_THROWS_AS(p.comm_delay(0, us(1), "bad", {}, SimTime{}, bad), std::invalid_argument);
}
