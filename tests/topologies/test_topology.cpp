// Fabric graphs: structure, routing (checked against a breadth-first search of the Boost graph),
// presets, and topology files with file:line errors.
#include <boost/graph/breadth_first_search.hpp>
#include <catch2/catch.hpp>
#include <sstream>

#include "common/error.hpp"
#include "topologies/topology.hpp"
#include "topologies/topology_file.hpp"

using namespace dionsim::topo;

namespace {

FabricSpec simple(Layout layout, int radix, double oversub) {
  FabricSpec s;
  s.name = "test";
  s.nvlink_GBps = 400;
  s.nic_GBps = 50;
  s.layout = layout;
  s.leaf_radix = radix;
  s.oversubscription = oversub;
  return s;
}

// Hop count of the shortest directed path src -> dst in the graph.
int bfs_hops(const Topology& t, int src, int dst) {
  std::vector<int> dist(boost::num_vertices(t.graph()), -1);
  dist[static_cast<std::size_t>(src)] = 0;
  boost::breadth_first_search(
      t.graph(), static_cast<std::size_t>(src),
      boost::visitor(boost::make_bfs_visitor(boost::record_distances(dist.data(), boost::on_tree_edge()))));
  return dist[static_cast<std::size_t>(dst)];
}

}  // namespace

TEST_CASE("structure: vertices, links and capacities", "[topology]") {
  const Topology t(simple(Layout::rail, 2, 2.0), 4, 8);  // 2 groups of 2 nodes, 8 rails
  CHECK(t.ranks() == 32);
  CHECK(t.leaves() == 16);
  CHECK(boost::num_vertices(t.graph()) == 32 + 4 + 16 + 1);
  CHECK(t.link_count() == 4 * 32 + 2 * 16);
  CHECK(t.link_capacity_Bps(t.route(0, 1)[0]) == Approx(400e9));
  const auto r = t.route(0, 8 * 2 + 1);  // other group, other rail
  REQUIRE(r.size() == 4);
  CHECK(t.link_kind(r[1]) == LinkKind::leaf_up);
  CHECK(t.link_capacity_Bps(r[1]) == Approx(2 * 50e9 / 2.0));  // radix x nic / oversubscription
}

TEST_CASE("routing: minimal and consistent with the graph", "[topology]") {
  for (const Layout layout : {Layout::rail, Layout::node}) {
    const Topology t(simple(layout, 4, 1.0), 5, 2);  // partial last leaf on purpose
    for (int a = 0; a < t.ranks(); ++a) {
      for (int b = 0; b < t.ranks(); ++b) {
        const auto r = t.route(a, b);
        INFO(to_string(layout) << " " << a << " -> " << b);
        CHECK(static_cast<int>(r.size()) == (a == b ? 0 : bfs_hops(t, a, b)));
        // the route is a connected path from a to b
        if (!r.empty()) {
          std::size_t at = static_cast<std::size_t>(a);
          for (const auto l : r) {
            bool found = false;
            for (auto [e, end] = boost::out_edges(at, t.graph()); e != end; ++e) {
              if (t.graph()[*e].id == l) {
                at = boost::target(*e, t.graph());
                found = true;
              }
            }
            REQUIRE(found);
          }
          CHECK(at == static_cast<std::size_t>(b));
        }
      }
    }
  }
}

TEST_CASE("rail layout: same rail stays on its leaf, other rails cross the spine", "[topology]") {
  const Topology t(simple(Layout::rail, 32, 1.0), 4, 8);
  CHECK(t.route(0, 8).size() == 2);    // GPU 0 of node 0 -> GPU 0 of node 1: rail leaf 0
  CHECK(t.route(0, 9).size() == 4);    // GPU 0 -> GPU 1 of node 1: via the spine
  CHECK(t.latency_ps(0, 1) == 0);
  CHECK(t.symmetric());
  CHECK_FALSE(Topology(simple(Layout::rail, 2, 1.0), 3, 8).symmetric());
  CHECK_FALSE(Topology(simple(Layout::node, 16, 1.0), 3, 8).symmetric());
  CHECK(Topology(simple(Layout::node, 16, 1.0), 4, 8).symmetric());
}

TEST_CASE("presets: documented bandwidths", "[topology]") {
  for (const auto& name : preset_names()) {
    const FabricSpec s = preset(name);
    CHECK(s.nvlink_GBps == 450);
    CHECK(s.nic_GBps == 50);  // NDR400 and 400 Gb/s EFA per GPU
    validate(s, name, false);
  }
  CHECK(preset("p5-efa").layout == Layout::node);
  CHECK(preset("h200-ndr400").layout == Layout::rail);
  CHECK_THROWS_AS(preset("h300-magic"), dionsim::UsageError);
  CHECK_THROWS_WITH(preset("h300-magic"), Catch::Contains("h300-magic") && Catch::Contains("h200-ndr400"));
}

TEST_CASE("bad parameters are refused before anything is built", "[topology]") {
  FabricSpec s = simple(Layout::rail, 32, 1.0);
  s.nic_GBps = 0;
  CHECK_THROWS_AS(Topology(s, 2, 8), dionsim::UsageError);
  s.nic_GBps = -5;
  CHECK_THROWS_WITH(Topology(s, 2, 8), Catch::Contains("nic_GBps") && Catch::Contains("-5"));
  s = simple(Layout::rail, 32, 0.5);
  CHECK_THROWS_WITH(Topology(s, 2, 8), Catch::Contains("oversubscription"));
  CHECK_THROWS_WITH(Topology(simple(Layout::node, 12, 1.0), 2, 8), Catch::Contains("leaf_radix"));
}

TEST_CASE("topology files: keys with units, base preset, overrides", "[topology][file]") {
  const auto f = parse_topology(
      "base = \"h200-ndr400\"\n"
      "name = \"lab\"\n"
      "nic_GBps = 25\n"
      "oversubscription = 2.5\n"
      "layout = \"node\"\n"
      "gpus_per_node = 4\n",
      "lab.toml");
  CHECK(f.spec.name == "lab");
  CHECK(f.spec.nvlink_GBps == 450);
  CHECK(f.spec.nic_GBps == 25);
  CHECK(f.spec.oversubscription == 2.5);
  CHECK(f.spec.layout == Layout::node);
  CHECK(f.gpus_per_node == 4);
}

TEST_CASE("topology files: errors name file:line and key", "[topology][file]") {
  const auto fails_with = [](const std::string& text, const std::string& expected) {
    INFO(text);
    CHECK_THROWS_AS(parse_topology(text, "t.toml"), dionsim::InputError);
    CHECK_THROWS_WITH(parse_topology(text, "t.toml"), Catch::Contains(expected));
  };
  fails_with("nvlink_GBps = 450\nnic_GBps = -5\n", "t.toml:2: nic_GBps: got '-5', expected a positive number");
  fails_with("nvlink_GBps = 450\nnic_GBps = 0\n", "t.toml:2: nic_GBps: got '0'");
  fails_with("base = \"h200-ndr400\"\n\nnic_gbps = 50\n", "t.toml:3: nic_gbps: got '50', expected no such key");
  fails_with("base = \"h900\"\n", "t.toml:1: base: got 'h900', expected one of");
  fails_with("base = \"h200-ndr400\"\nlayout = \"torus\"\n", "t.toml:2: layout: got 'torus'");
  fails_with("base = \"h200-ndr400\"\nnic_GBps = \"fast\"\n", "t.toml:2: nic_GBps: got 'fast', expected a number");
  fails_with("base = \"h200-ndr400\"\nnic_GBps = = 3\n", "t.toml:2:");
  fails_with("nvlink_GBps = 450\n", "nic_GBps: got '(missing)'");
  CHECK_THROWS_AS(load_topology_file("/nonexistent/t.toml"), dionsim::IoError);
}

TEST_CASE("GraphViz dump names every vertex and link", "[topology]") {
  const Topology t(simple(Layout::rail, 32, 1.0), 2, 2);
  std::ostringstream out;
  t.write_dot(out);
  const std::string dot = out.str();
  CHECK(dot.rfind("digraph fabric {", 0) == 0);
  CHECK(dot.find("gpu3 -> nvswitch1 [label=\"nvlink_up 400 GB/s\"]") != std::string::npos);
  CHECK(dot.find("leaf1 -> spine") != std::string::npos);
  std::size_t edges = 0;
  for (std::size_t p = dot.find("->"); p != std::string::npos; p = dot.find("->", p + 2)) ++edges;
  CHECK(edges == t.link_count());
}

#include "topologies/fabric_choice.hpp"

TEST_CASE("fabric choice: exactly one source, overrides applied and checked", "[topology]") {
  FabricChoice c;
  CHECK_THROWS_WITH(resolve_fabric(c, 8), Catch::Contains("exactly one of"));
  c.preset = "p5-efa";
  c.oversubscription = 3;
  c.latency_us = 4;
  const FabricSpec s = resolve_fabric(c, 8);
  CHECK(s.oversubscription == 3);
  CHECK(s.nic_latency_us == 4);
  CHECK(s.nvlink_latency_us == 4);
  CHECK(s.nic_efficiency == preset("p5-efa").nic_efficiency);
  c.nic_GBps = 10;
  CHECK_THROWS_WITH(resolve_fabric(c, 8), Catch::Contains("exactly one of"));
  c.preset.reset();
  CHECK_THROWS_WITH(resolve_fabric(c, 8), Catch::Contains("go together"));
  c.nvlink_GBps = -3;
  CHECK_THROWS_WITH(resolve_fabric(c, 8), Catch::Contains("--nvlink-GBps: got '-3"));
  c.nvlink_GBps = 100;
  c.oversubscription = 0.5;
  CHECK_THROWS_WITH(resolve_fabric(c, 8), Catch::Contains("--oversubscription"));
  c.oversubscription.reset();
  CHECK(resolve_fabric(c, 8).name == "custom");
}
