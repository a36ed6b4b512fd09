// The event engine: deterministic ordering, integral time, flows progressing at solver rates.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "sim/engine.hpp"

using dionsim::sim::Engine;
using dionsim::sim::LinkUse;
using dionsim::sim::SimTime;

TEST_CASE("events run in time order, ties in scheduling order", "[engine]") {
  Engine e;
  std::string log;
  e.at(SimTime::ns(5), [&] { log += "b"; });
  e.at(SimTime::ns(1), [&] { log += "a"; });
  e.at(SimTime::ns(5), [&] { log += "c"; });
  e.at(SimTime::ns(5), [&] {
    log += "d";
    e.after(SimTime{}, [&] { log += "e"; });  // same instant, after everything already queued
  });
  e.run();
  CHECK(log == "abcde");
  CHECK(e.now() == SimTime::ns(5));
  CHECK_THROWS(e.at(SimTime::ns(1), [] {}));
}

TEST_CASE("a lone flow takes bytes/capacity plus latency", "[engine]") {
  Engine e;
  const auto l = e.add_link(1e9);  // 1 GB/s
  std::vector<LinkUse> route{{l, 1.0}};
  SimTime delivered;
  e.start_flow(route, 1e6, SimTime::ns(700), [&] { delivered = e.now(); });
  e.run();
  CHECK(delivered == SimTime::ns(1'000'000 + 700));  // 1 MB at 1 GB/s = 1 ms
}

TEST_CASE("rates change when a flow departs: the survivor speeds up", "[engine]") {
  // Two flows on 1 GB/s: 1 MB and 3 MB. Shared at 0.5 GB/s until the small one is done at 2 ms
  // (1 MB each moved); the big one has 2 MB left at 1 GB/s -> done at 4 ms.
  Engine e;
  const auto l = e.add_link(1e9);
  std::vector<LinkUse> route{{l, 1.0}};
  SimTime small, big;
  e.start_flow(route, 1e6, SimTime{}, [&] { small = e.now(); });
  e.start_flow(route, 3e6, SimTime{}, [&] { big = e.now(); });
  e.run();
  CHECK(small == SimTime::ns(2'000'000));
  CHECK(big == SimTime::ns(4'000'000));
  CHECK(e.idle());
}

TEST_CASE("a flow arriving later slows the first one down", "[engine]") {
  // 2 MB at 1 GB/s starts at 0; at 1 ms a second 0.5 MB flow arrives. Shared 0.5 GB/s: second
  // finishes at 2 ms, first has 0.5 MB left at 2 ms -> 2.5 ms.
  Engine e;
  const auto l = e.add_link(1e9);
  std::vector<LinkUse> route{{l, 1.0}};
  SimTime first, second;
  e.start_flow(route, 2e6, SimTime{}, [&] { first = e.now(); });
  e.at(SimTime::ns(1'000'000), [&] { e.start_flow(route, 0.5e6, SimTime{}, [&] { second = e.now(); }); });
  e.run();
  CHECK(second == SimTime::ns(2'000'000));
  CHECK(first == SimTime::ns(2'500'000));
}

TEST_CASE("a link capacity change re-solves the flows crossing it", "[engine]") {
  // 3 MB at 1 GB/s; at 1 ms the link drops to 0.5 GB/s (1 MB moved, 2 MB left -> 4 ms more), at
  // 3 ms it is back to 1 GB/s (1 MB left) -> done at 4 ms. A link without flows takes the change
  // silently; a bad capacity is refused.
  Engine e;
  const auto l = e.add_link(1e9);
  const auto idle = e.add_link(1e9);
  std::vector<LinkUse> route{{l, 1.0}};
  SimTime done;
  e.start_flow(route, 3e6, SimTime{}, [&] { done = e.now(); });
  e.at(SimTime::ns(1'000'000), [&] { e.set_link_capacity(l, 0.5e9); });
  e.at(SimTime::ns(3'000'000), [&] { e.set_link_capacity(l, 1e9); });
  e.set_link_capacity(idle, 2e9);
  e.run();
  CHECK(done == SimTime::ns(4'000'000));
  CHECK(e.network().capacity_Bps(idle) == 2e9);
  CHECK_THROWS_AS(e.set_link_capacity(l, 0.0), std::invalid_argument);
  CHECK_THROWS_AS(e.set_link_capacity(99, 1e9), std::invalid_argument);
}

TEST_CASE("zero-byte and local flows pay only latency", "[engine]") {
  Engine e;
  SimTime t;
  e.start_flow({}, 1e9, SimTime::ns(3), [&] { t = e.now(); });
  e.run();
  CHECK(t == SimTime::ns(3));
}

TEST_CASE("engines are independent", "[engine]") {
  Engine a, b;
  a.at(SimTime::ns(10), [] {});
  a.run();
  CHECK(a.now() == SimTime::ns(10));
  CHECK(b.now() == SimTime{});
}
