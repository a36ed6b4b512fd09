// The max-min solver on its own: textbook cases with hand-derived allocations, then randomized
// networks checked against the defining property of max-min fairness and against a
// from-scratch reference solve after random arrivals and departures.
#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <vector>

#include "sim/maxmin.hpp"

using dionsim::sim::FlowId;
using dionsim::sim::LinkId;
using dionsim::sim::LinkUse;
using dionsim::sim::MaxMinSolver;

namespace {

FlowId flow(MaxMinSolver& s, std::initializer_list<LinkId> links) {
  std::vector<LinkUse> route;
  for (const LinkId l : links) route.push_back(LinkUse{l, 1.0});
  return s.add_flow(route);
}

// Max-min fairness, by definition: every flow has a bottleneck link that is saturated and on
// which no flow gets a higher rate. Returns the first violation or "" (independent of how the
// solver computes it).
std::string check_max_min(const MaxMinSolver& s, const std::vector<FlowId>& flows) {
  std::vector<std::vector<FlowId>> on_link(s.link_count());
  for (const FlowId f : flows) {
    for (const auto& u : s.route(f)) on_link[u.link].push_back(f);
  }
  for (std::size_t l = 0; l < s.link_count(); ++l) {
    if (s.load_Bps(static_cast<LinkId>(l)) > s.capacity_Bps(static_cast<LinkId>(l)) * (1 + 1e-9)) {
      return "link " + std::to_string(l) + " over capacity";
    }
  }
  for (const FlowId f : flows) {
    bool has_bottleneck = false;
    for (const auto& u : s.route(f)) {
      const bool saturated = s.load_Bps(u.link) >= s.capacity_Bps(u.link) * (1 - 1e-9);
      const bool highest = std::all_of(on_link[u.link].begin(), on_link[u.link].end(), [&](FlowId g) {
        return s.rate_Bps(g) <= s.rate_Bps(f) * (1 + 1e-9);
      });
      if (saturated && highest) has_bottleneck = true;
    }
    if (!has_bottleneck) return "flow " + std::to_string(f) + " has no bottleneck";
  }
  return "";
}

// Brute-force reference, written independently of the solver: every round recomputes each
// link's fair share from scratch (capacity minus what frozen flows use, over the unfrozen
// coefficients) and freezes every unfrozen flow of the tightest link at that share.
std::vector<double> brute_force(const std::vector<double>& caps, const std::vector<std::vector<LinkUse>>& routes) {
  const std::size_t n = routes.size();
  std::vector<double> rate(n, 0);
  std::vector<bool> frozen(n, false);
  for (std::size_t left = n; left > 0;) {
    double best = 1e300;
    std::size_t best_link = 0;
    for (std::size_t l = 0; l < caps.size(); ++l) {
      double used = 0, weight = 0;
      for (std::size_t f = 0; f < n; ++f) {
        for (const auto& u : routes[f]) {
          if (u.link != l) continue;
          if (frozen[f]) used += u.coeff * rate[f];
          else weight += u.coeff;
        }
      }
      if (weight > 0 && (caps[l] - used) / weight < best) {
        best = (caps[l] - used) / weight;
        best_link = l;
      }
    }
    for (std::size_t f = 0; f < n; ++f) {
      if (frozen[f]) continue;
      for (const auto& u : routes[f]) {
        if (u.link == best_link) {
          frozen[f] = true;
          rate[f] = best;
          --left;
          break;
        }
      }
    }
  }
  return rate;
}

}  // namespace

TEST_CASE("single bottleneck: n flows share one link equally", "[maxmin]") {
  MaxMinSolver s;
  const LinkId l = s.add_link(100.0);
  std::vector<FlowId> f;
  for (int i = 0; i < 4; ++i) f.push_back(flow(s, {l}));
  s.solve();
  for (const FlowId id : f) CHECK(s.rate_Bps(id) == Approx(25.0));
}

TEST_CASE("parking lot: the long flow gets what the short ones leave", "[maxmin]") {
  // Links A, B, C of capacity 1; long flow crosses all three; one short flow per link.
  // Every link has two flows -> everyone gets 1/2.
  MaxMinSolver s;
  const LinkId a = s.add_link(1.0), b = s.add_link(1.0), c = s.add_link(1.0);
  const FlowId lng = flow(s, {a, b, c});
  const FlowId sa = flow(s, {a}), sb = flow(s, {b}), sc = flow(s, {c});
  s.solve();
  CHECK(s.rate_Bps(lng) == Approx(0.5));
  CHECK(s.rate_Bps(sa) == Approx(0.5));
  CHECK(s.rate_Bps(sb) == Approx(0.5));
  CHECK(s.rate_Bps(sc) == Approx(0.5));
  // Two short flows on B: B is the bottleneck at 1/3; A and C short flows take 2/3.
  const FlowId sb2 = flow(s, {b});
  s.solve();
  CHECK(s.rate_Bps(lng) == Approx(1.0 / 3));
  CHECK(s.rate_Bps(sb2) == Approx(1.0 / 3));
  CHECK(s.rate_Bps(sa) == Approx(2.0 / 3));
  CHECK(s.rate_Bps(sc) == Approx(2.0 / 3));
}

TEST_CASE("cross traffic: a flow limited elsewhere frees capacity for the others", "[maxmin]") {
  // Link X (10) carries f1, f2, f3; f3 also crosses Y (2). f3 = 2, f1 = f2 = 4.
  MaxMinSolver s;
  const LinkId x = s.add_link(10.0), y = s.add_link(2.0);
  const FlowId f1 = flow(s, {x}), f2 = flow(s, {x}), f3 = flow(s, {x, y});
  s.solve();
  CHECK(s.rate_Bps(f3) == Approx(2.0));
  CHECK(s.rate_Bps(f1) == Approx(4.0));
  CHECK(s.rate_Bps(f2) == Approx(4.0));
}

TEST_CASE("a flow bottlenecked twice: two links saturate at the same level", "[maxmin]") {
  // f0 crosses A (2) and B (2); f1 on A, f2 on B: all three at 1, both links saturated.
  MaxMinSolver s;
  const LinkId a = s.add_link(2.0), b = s.add_link(2.0);
  const FlowId f0 = flow(s, {a, b}), f1 = flow(s, {a}), f2 = flow(s, {b});
  s.solve();
  CHECK(s.rate_Bps(f0) == Approx(1.0));
  CHECK(s.rate_Bps(f1) == Approx(1.0));
  CHECK(s.rate_Bps(f2) == Approx(1.0));
  CHECK(s.load_Bps(a) == Approx(2.0));
  CHECK(s.load_Bps(b) == Approx(2.0));
}

TEST_CASE("coefficients: a class of k identical flows as one variable", "[maxmin]") {
  // 3 flows on link (12) and 1 other flow: exact = 3 each. As a class: coeff 3 -> rate 3.
  MaxMinSolver s;
  const LinkId l = s.add_link(12.0);
  std::vector<LinkUse> cls{LinkUse{l, 3.0}};
  const FlowId c = s.add_flow(cls);
  const FlowId o = flow(s, {l});
  s.solve();
  CHECK(s.rate_Bps(c) == Approx(3.0));
  CHECK(s.rate_Bps(o) == Approx(3.0));
}

TEST_CASE("incremental: solve only touches the affected component", "[maxmin]") {
  MaxMinSolver s;
  const LinkId a = s.add_link(1.0), b = s.add_link(1.0);
  const FlowId fa = flow(s, {a});
  const FlowId fb = flow(s, {b});
  s.solve();
  CHECK(s.last_recomputed_flows() == 2);
  const FlowId fa2 = flow(s, {a});
  const auto& changed = s.solve();
  CHECK(s.last_recomputed_flows() == 2);  // fa, fa2; fb's component is untouched
  CHECK(changed.size() == 2);
  CHECK(s.rate_Bps(fa) == Approx(0.5));
  CHECK(s.rate_Bps(fa2) == Approx(0.5));
  CHECK(s.rate_Bps(fb) == Approx(1.0));
  s.remove_flow(fa);
  s.solve();
  CHECK(s.rate_Bps(fa2) == Approx(1.0));
  CHECK(s.active_flows() == 2);
}

TEST_CASE("bad arguments are rejected", "[maxmin]") {
  MaxMinSolver s;
  CHECK_THROWS(s.add_link(0.0));
  CHECK_THROWS(s.add_link(-1.0));
  const LinkId l = s.add_link(1.0);
  CHECK_THROWS(s.add_flow(std::vector<LinkUse>{}));
  CHECK_THROWS(s.add_flow(std::vector<LinkUse>{{l, 1.0}, {l, 1.0}}));
  CHECK_THROWS(s.add_flow(std::vector<LinkUse>{{l + 1, 1.0}}));
  CHECK_THROWS(s.remove_flow(7));
}

TEST_CASE("randomized: max-min property, incremental == from scratch == brute force", "[maxmin]") {
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < 200; ++trial) {
    const int links = 1 + static_cast<int>(rng() % 12);
    std::uniform_real_distribution<double> cap(0.5, 20.0);
    std::vector<double> caps;
    MaxMinSolver inc;
    for (int l = 0; l < links; ++l) {
      caps.push_back(cap(rng));
      inc.add_link(caps.back());
    }
    std::vector<std::vector<LinkUse>> routes;  // by FlowId of `inc`, empty = removed
    std::vector<FlowId> alive;
    for (int op = 0; op < 40; ++op) {
      if (!alive.empty() && rng() % 3 == 0) {
        const std::size_t k = rng() % alive.size();
        inc.remove_flow(alive[k]);
        routes[alive[k]].clear();
        alive.erase(alive.begin() + static_cast<std::ptrdiff_t>(k));
      } else {
        std::vector<LinkUse> route;
        for (int l = 0; l < links; ++l) {
          if (rng() % 3 == 0) route.push_back(LinkUse{static_cast<LinkId>(l), 1.0 + static_cast<double>(rng() % 3)});
        }
        if (route.empty()) route.push_back(LinkUse{static_cast<LinkId>(rng() % links), 1.0});
        const FlowId id = inc.add_flow(route);
        if (routes.size() <= id) routes.resize(id + 1);
        routes[id] = route;
        alive.push_back(id);
      }
      if (rng() % 2 == 0) continue;  // several changes between solves, too
      inc.solve();
      INFO("trial " << trial << " op " << op);
      REQUIRE(check_max_min(inc, alive).empty());
      MaxMinSolver ref;
      for (const double c : caps) ref.add_link(c);
      std::vector<FlowId> ref_ids;
      for (const FlowId id : alive) ref_ids.push_back(ref.add_flow(routes[id]));
      ref.solve();
      std::vector<std::vector<LinkUse>> alive_routes;
      for (const FlowId id : alive) alive_routes.push_back(routes[id]);
      const std::vector<double> brute = brute_force(caps, alive_routes);
      for (std::size_t i = 0; i < alive.size(); ++i) {
        REQUIRE(inc.rate_Bps(alive[i]) == Approx(ref.rate_Bps(ref_ids[i])).epsilon(1e-9));
        REQUIRE(inc.rate_Bps(alive[i]) == Approx(brute[i]).epsilon(1e-9));
      }
    }
  }
}
