// Fabric graphs: structure, routing (checked against a breadth-first search of the Boost graph),
// presets, and topology files with file:line errors.
#include <boost/graph/breadth_first_search.hpp>
#include <catch2/catch.hpp>
#include <map>
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
  // name -> (GPUs per host, per NVLink domain, NVLink GB/s, NIC GB/s per GPU, network, layout)
  struct Expected {
    int host, domain;
    double nvlink, nic;
    Network network;
    Layout layout;
  };
  const std::map<std::string, Expected> expected = {
      {"a100-hdr200", {8, 8, 300, 25, Network::infiniband, Layout::rail}},
      {"a100-roce100", {8, 8, 300, 25, Network::roce, Layout::node}},
      {"h100-ndr400", {8, 8, 450, 50, Network::infiniband, Layout::rail}},
      {"h100-roce400", {8, 8, 450, 50, Network::roce, Layout::rail}},
      {"h200-ndr400", {8, 8, 450, 50, Network::infiniband, Layout::rail}},
      {"h200-roce400", {8, 8, 450, 50, Network::roce, Layout::rail}},
      {"h800-ndr400", {8, 8, 200, 50, Network::infiniband, Layout::rail}},
      {"h800-roce400", {8, 8, 200, 50, Network::roce, Layout::rail}},
      {"a800-hdr200", {8, 8, 200, 25, Network::infiniband, Layout::rail}},
      {"b200-ndr400", {8, 8, 900, 50, Network::infiniband, Layout::rail}},
      {"b200-roce400", {8, 8, 900, 50, Network::roce, Layout::rail}},
      {"b200-xdr800", {8, 8, 900, 100, Network::infiniband, Layout::rail}},
      {"b300-ndr400", {8, 8, 900, 50, Network::infiniband, Layout::rail}},
      {"b300-xdr800", {8, 8, 900, 100, Network::infiniband, Layout::rail}},
      {"b300-xdr800-2plane", {8, 8, 900, 100, Network::infiniband, Layout::rail}},
      {"gb200-nvl72", {4, 72, 900, 50, Network::infiniband, Layout::rail}},
      {"gb200-nvl72-efa", {4, 72, 900, 50, Network::efa, Layout::node}},
      {"gb300-nvl72", {4, 72, 900, 50, Network::infiniband, Layout::rail}},
      {"gb300-nvl72-xdr800", {4, 72, 900, 100, Network::infiniband, Layout::rail}},
      {"p4d-efa", {8, 8, 300, 6.25, Network::efa, Layout::node}},
      {"p5-efa", {8, 8, 450, 50, Network::efa, Layout::node}},
      {"p5e-efa", {8, 8, 450, 50, Network::efa, Layout::node}},
      {"p5en-efa", {8, 8, 450, 50, Network::efa, Layout::node}},
      {"p6-b200-efa", {8, 8, 900, 50, Network::efa, Layout::node}},
      {"p6-b300-efa", {8, 8, 900, 100, Network::efa, Layout::node}},
  };
  CHECK(preset_names().size() == expected.size());
  for (const auto& name : preset_names()) {
    INFO(name);
    REQUIRE(expected.count(name) == 1);
    const FabricSpec s = preset(name);
    const Expected& e = expected.at(name);
    CHECK(s.name == name);
    CHECK(s.gpus_per_host == e.host);
    CHECK(s.gpus_per_nvlink_domain == e.domain);
    CHECK(s.nvlink_GBps == e.nvlink);
    CHECK(s.nic_GBps == e.nic);
    CHECK(s.network == e.network);
    CHECK(s.layout == e.layout);
    CHECK_FALSE(s.nic.empty());
    validate(s, name, false);
  }
  CHECK(preset("b300-xdr800-2plane").planes == 2);
  CHECK(preset("b300-xdr800-2plane").leaf_radix == 2 * preset("b300-xdr800").leaf_radix);
  CHECK_THROWS_AS(preset("h300-magic"), dionsim::UsageError);
  CHECK_THROWS_WITH(preset("h300-magic"), Catch::Contains("h300-magic") && Catch::Contains("h200-ndr400"));
}

TEST_CASE("NVLink domains: an NVL72 rack routes over NVLink inside, NICs between racks", "[topology]") {
  const FabricSpec s = preset("gb200-nvl72");
  const Topology two_racks(s, 36);  // 36 trays of 4 = 144 GPUs = 2 domains
  CHECK(two_racks.ranks() == 144);
  CHECK(two_racks.domains() == 2);
  CHECK(two_racks.hosts() == 36);
  // 36 trays on 32-port rail leaves: the second leaf group holds 4 trays, so the fabric is not
  // symmetric (the fast path's flow classes give its parts types of their own); 64-GPU domains
  // on 32 trays are
  CHECK_FALSE(two_racks.symmetric());
  FabricSpec racks64 = s;
  racks64.gpus_per_nvlink_domain = 64;
  CHECK(Topology(racks64, 32).symmetric());
  // GPU 0 (tray 0) to GPU 71 (tray 17): another host, the same rack -> NVLink only
  REQUIRE(two_racks.route(0, 71).size() == 2);
  CHECK(two_racks.link_kind(two_racks.route(0, 71)[0]) == LinkKind::nvlink_up);
  CHECK(two_racks.link_capacity_Bps(two_racks.route(0, 71)[0]) == Approx(900e9 * 0.666));
  CHECK(two_racks.latency_ps(0, 71) == 60'000'000);
  // GPU 0 to GPU 72 (rack 1, the same rail 0): NIC up, NIC down on rail leaf 0
  REQUIRE(two_racks.route(0, 72).size() == 2);
  CHECK(two_racks.link_kind(two_racks.route(0, 72)[0]) == LinkKind::nic_up);
  CHECK(two_racks.latency_ps(0, 72) == 10'000'000);
  // GPU 0 to GPU 73 (rack 1, rail 1): through the spine
  CHECK(two_racks.route(0, 73).size() == 4);
  // one NVSwitch vertex per domain
  int switches = 0;
  for (auto [v, end] = boost::vertices(two_racks.graph()); v != end; ++v) {
    switches += two_racks.graph()[*v].kind == VertexKind::nvswitch ? 1 : 0;
  }
  CHECK(switches == 2);

  // 64 GPUs of one rack: valid, one partial domain, never a NIC
  const Topology part(s, 16);
  CHECK(part.ranks() == 64);
  CHECK(part.domains() == 1);
  CHECK(part.domain_size_of(63) == 64);
  CHECK(part.symmetric());
  for (int b = 1; b < 64; ++b) CHECK(part.link_kind(part.route(0, b)[0]) == LinkKind::nvlink_up);
  // 128 GPUs: a full rack and 56 GPUs of the next: valid, but not symmetric
  const Topology uneven(s, 32);
  CHECK(uneven.domains() == 2);
  CHECK(uneven.domain_size_of(127) == 56);
  CHECK_FALSE(uneven.symmetric());
}

TEST_CASE("hosts and domains: the HGX domain follows the host, an NVL72 keeps its size", "[topology]") {
  const FabricSpec hgx = with_gpus_per_host(preset("b200-ndr400"), 2);
  CHECK(hgx.gpus_per_host == 2);
  CHECK(hgx.gpus_per_nvlink_domain == 2);  // 2 GPUs of an 8-GPU HGX node: NVLink joins those 2
  const Topology t(preset("b200-ndr400"), 2, 2);
  CHECK(t.link_kind(t.route(0, 2)[0]) == LinkKind::nic_up);
  const FabricSpec rack = with_gpus_per_host(preset("gb200-nvl72"), 2);
  CHECK(rack.gpus_per_nvlink_domain == 72);
  FabricSpec bad = preset("gb200-nvl72");
  bad.gpus_per_host = 5;  // 72 is not whole hosts of 5
  CHECK_THROWS_WITH(validate(bad, "x", false), Catch::Contains("gpus_per_nvlink_domain") && Catch::Contains("72"));
  bad.gpus_per_host = 96;  // a host larger than its NVLink domain
  CHECK_THROWS_AS(validate(bad, "x", false), dionsim::InputError);
  CHECK_THROWS_WITH(validate(bad, "x", false),
                    Catch::Contains("x: gpus_per_nvlink_domain: got '72', expected an integer >= gpus_per_host (96)"));
}

TEST_CASE("part of each rack: preset@GPUs is the rack with a smaller NVLink domain", "[topology]") {
  const FabricSpec part = preset("gb200-nvl72@64");
  CHECK(part.name == "gb200-nvl72@64");
  CHECK(part.gpus_per_nvlink_domain == 64);
  CHECK(part.gpus_per_host == 4);
  FabricSpec rack = preset("gb200-nvl72");
  rack.gpus_per_nvlink_domain = 64;
  rack.name = part.name;
  CHECK(part == rack);  // only the domain (and its name) differ from the whole rack
  // The same fabric as the topology file the demo uses for it.
  CHECK(load_topology_file(std::string(DIONSIM_SOURCE_DIR) + "/docs/gb200-nvl72-64.toml").spec == part);
  CHECK(preset("gb300-nvl72-xdr800@8").gpus_per_nvlink_domain == 8);
  CHECK(preset("gb200-nvl72@72") == preset("gb200-nvl72"));  // the whole rack is the preset
  CHECK_THROWS_WITH(preset("gb200-nvl72@66"),
                    Catch::Contains("--fabric: got 'gb200-nvl72@66', expected <preset>@<GPUs per NVLink domain>: a whole "
                                    "number of 4-GPU trays from 8 to 72"));
  for (const char* bad : {"gb200-nvl72@4", "gb200-nvl72@76", "gb200-nvl72@0", "gb200-nvl72@", "gb200-nvl72@6x", "gb200-nvl72@-8",
                          "gb200-nvl72@99999999999"}) {
    CHECK_THROWS_AS(preset(bad), dionsim::UsageError);
  }
  CHECK_THROWS_WITH(preset("h100-ndr400@4", "--fabric"),
                    Catch::Contains("only on presets whose NVLink domain spans hosts") && Catch::Contains("--gpus-per-node"));
  CHECK_THROWS_WITH(preset("nvl73@64"), Catch::Contains("got 'nvl73@64', expected one of"));
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
  CHECK(f.spec.tuner_plugin == TunerPlugin::none);
  // A p5 base brings aws-ofi-nccl's tuner; a file can name it or turn it off.
  CHECK(parse_topology("base = \"p5-efa\"\n", "p.toml").spec.tuner_plugin == TunerPlugin::aws_ofi_p5);
  CHECK(parse_topology("base = \"p5-efa\"\ntuner_plugin = \"none\"\n", "p.toml").spec.tuner_plugin == TunerPlugin::none);
  CHECK(parse_topology("base = \"h100-ndr400\"\ntuner_plugin = \"aws-ofi-p5en\"\n", "p.toml").spec.tuner_plugin ==
        TunerPlugin::aws_ofi_p5en);
}

TEST_CASE("topology files: a GPU cluster the presets do not have", "[topology][file]") {
  const auto f = parse_topology(
      "name = \"nvl36x2\"\n"
      "gpus_per_host = 4\n"
      "gpus_per_nvlink_domain = 36\n"
      "nvlink_generation = 5\n"
      "nvlink_GBps = 900\n"
      "network = \"roce\"\n"
      "nic = \"ConnectX-8\"\n"
      "nic_GBps = 100\n"
      "planes = 2\n"
      "leaf_radix = 128\n",
      "x.toml");
  CHECK(f.spec.gpus_per_host == 4);
  CHECK(f.spec.gpus_per_nvlink_domain == 36);
  CHECK(f.spec.network == Network::roce);
  CHECK(f.spec.planes == 2);
  CHECK(f.gpus_per_node == 4);
  const Topology t(f.spec, 18);  // 72 GPUs = two 36-GPU domains
  CHECK(t.domains() == 2);
  CHECK(t.link_kind(t.route(0, 36)[0]) == LinkKind::nic_up);
  CHECK(t.link_kind(t.route(0, 35)[0]) == LinkKind::nvlink_up);
  // no domain given and no base: the host is its own NVLink domain
  CHECK(parse_topology("gpus_per_host = 4\nnvlink_GBps = 1\nnic_GBps = 1\n", "y.toml").spec.gpus_per_nvlink_domain == 4);
  // an HGX base with a smaller host: the domain follows
  CHECK(parse_topology("base = \"b200-ndr400\"\ngpus_per_host = 4\n", "z.toml").spec.gpus_per_nvlink_domain == 4);
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
  fails_with("base = \"p5-efa\"\ntuner_plugin = \"ofi\"\n",
             "t.toml:2: tuner_plugin: got 'ofi', expected 'none', 'aws-ofi-p5', 'aws-ofi-p5en', 'aws-ofi-p6' or "
             "'aws-ofi-p6-b300'");
  fails_with("base = \"h200-ndr400\"\nnic_GBps = \"fast\"\n", "t.toml:2: nic_GBps: got 'fast', expected a number");
  fails_with("base = \"h200-ndr400\"\nnic_GBps = = 3\n", "t.toml:2:");
  fails_with("nvlink_GBps = 450\n", "nic_GBps: got '(missing)'");
  fails_with("nvlink_GBps = 450\nnic_GBps = 50\n", "t.toml: gpus_per_host: got '(missing)', expected an integer >= 1");
  fails_with("base = \"h200-ndr400\"\nnic_GBps = inf\n", "t.toml:2: nic_GBps: got 'inf', expected a finite number");
  fails_with("base = \"h200-ndr400\"\nnvlink_GBps = nan\n", "t.toml:2: nvlink_GBps: got 'nan', expected a finite number");
  fails_with("base = \"h200-ndr400\"\nnic_latency_us = -1\n", "t.toml:2: nic_latency_us: got '-1', expected a number in [0, 1e9]");
  fails_with("base = \"gb200-nvl72\"\ngpus_per_nvlink_domain = 2\n",
             "t.toml:2: gpus_per_nvlink_domain: got '2', expected a multiple of gpus_per_host (4) and no smaller");
  fails_with("base = \"h200-ndr400\"\ngpus_per_host = 16\ngpus_per_nvlink_domain = 8\n",
             "t.toml:3: gpus_per_nvlink_domain: got '8'");
  fails_with("base = \"h200-ndr400\"\nnetwork = \"myrinet\"\n", "t.toml:2: network: got 'myrinet', expected 'infiniband', 'roce' or 'efa'");
  fails_with("base = \"h200-ndr400\"\nplanes = 0\n", "t.toml:2: planes: got '0', expected an integer >= 1");
  fails_with("base = \"p5-efa\"\nleaf_radix = 12\n", "t.toml: leaf_radix: got '12', expected a multiple of the GPUs per host (8)");
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

TEST_CASE("shared_topology: one build per fabric and size, a changed field is another fabric", "[topology]") {
  const auto spec = dionsim::topo::preset("h100-ndr400");
  const auto a = shared_topology(spec, 4, 8);
  const auto b = shared_topology(spec, 4, 8);
  CHECK(a.get() == b.get());
  CHECK(a->ranks() == 32);
  auto slower = spec;
  slower.nic_efficiency = 0.5;
  const auto c = shared_topology(slower, 4, 8);
  CHECK(c.get() != a.get());
  CHECK(c->spec().nic_efficiency == 0.5);
  CHECK(shared_topology(spec, 8, 8).get() != a.get());
  CHECK(shared_topology(spec, 4, 4)->ranks() == 16);
  // A bad fabric is refused each time, never kept.
  auto bad = spec;
  bad.nic_GBps = -1;
  CHECK_THROWS_WITH(shared_topology(bad, 4, 8), Catch::Contains("nic_GBps"));
  CHECK_THROWS_WITH(shared_topology(bad, 4, 8), Catch::Contains("nic_GBps"));
  // Only the last few are kept: after many others the first is built again (memory stays bounded).
  for (int n = 10; n < 30; ++n) (void)shared_topology(spec, n, 8);
  const auto again = shared_topology(spec, 4, 8);
  CHECK(again.get() != a.get());
  CHECK(again->ranks() == a->ranks());
}
