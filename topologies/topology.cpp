#include "topologies/topology.hpp"

#include <cmath>
#include <ostream>
#include <sstream>

#include "common/error.hpp"

namespace dionsim::topo {
namespace {

std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

void check(bool ok, const std::string& where, const char* field, double value, const char* expected, bool usage) {
  if (ok) return;
  if (usage) throw_bad_usage(where.empty() ? field : where + ": " + field, num(value), expected);
  throw_bad_input(where, field, num(value), expected);
}

}  // namespace

const char* to_string(LinkKind kind) {
  switch (kind) {
    case LinkKind::nvlink_up: return "nvlink_up";
    case LinkKind::nvlink_down: return "nvlink_down";
    case LinkKind::nic_up: return "nic_up";
    case LinkKind::nic_down: return "nic_down";
    case LinkKind::leaf_up: return "leaf_up";
    case LinkKind::leaf_down: return "leaf_down";
  }
  return "?";
}

const char* to_string(Layout layout) { return layout == Layout::rail ? "rail" : "node"; }

void validate(const FabricSpec& s, const std::string& where, bool usage) {
  const auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  const auto fraction = [](double v) { return std::isfinite(v) && v > 0 && v <= 1; };
  const auto nonneg = [](double v) { return std::isfinite(v) && v >= 0; };
  check(positive(s.nvlink_GBps), where, "nvlink_GBps", s.nvlink_GBps, "a positive number of GB/s", usage);
  check(positive(s.nic_GBps), where, "nic_GBps", s.nic_GBps, "a positive number of GB/s", usage);
  check(nonneg(s.nvlink_latency_us), where, "nvlink_latency_us", s.nvlink_latency_us, "a number >= 0", usage);
  check(nonneg(s.nic_latency_us), where, "nic_latency_us", s.nic_latency_us, "a number >= 0", usage);
  check(fraction(s.nvlink_efficiency), where, "nvlink_efficiency", s.nvlink_efficiency, "a number in (0, 1]", usage);
  check(fraction(s.nic_efficiency), where, "nic_efficiency", s.nic_efficiency, "a number in (0, 1]", usage);
  check(s.leaf_radix >= 1, where, "leaf_radix", s.leaf_radix, "an integer >= 1", usage);
  check(std::isfinite(s.oversubscription) && s.oversubscription >= 1, where, "oversubscription",
        s.oversubscription, "a number >= 1 (1 = non-blocking)", usage);
}

Topology::Topology(const FabricSpec& spec, int nodes, int gpus_per_node)
    : spec_(spec), nodes_(nodes), gpus_per_node_(gpus_per_node) {
  if (nodes < 1) throw_bad_usage("--nodes", std::to_string(nodes), "an integer >= 1");
  if (gpus_per_node < 1) throw_bad_usage("--gpus-per-node", std::to_string(gpus_per_node), "an integer >= 1");
  validate(spec, spec.name, true);
  if (spec.layout == Layout::rail) {
    nodes_per_leaf_ = spec.leaf_radix;  // one port per node on each rail leaf
    leaves_ = (nodes + nodes_per_leaf_ - 1) / nodes_per_leaf_ * gpus_per_node;
  } else {
    if (spec.leaf_radix % gpus_per_node != 0) {
      throw_bad_usage("leaf_radix", std::to_string(spec.leaf_radix),
                      "a multiple of --gpus-per-node (" + std::to_string(gpus_per_node) + ") with layout 'node'");
    }
    nodes_per_leaf_ = spec.leaf_radix / gpus_per_node;
    leaves_ = (nodes + nodes_per_leaf_ - 1) / nodes_per_leaf_;
  }
  const int w = ranks();
  for (int r = 0; r < w; ++r) boost::add_vertex(VertexProps{VertexKind::gpu, r}, graph_);
  for (int n = 0; n < nodes; ++n) boost::add_vertex(VertexProps{VertexKind::nvswitch, n}, graph_);
  for (int l = 0; l < leaves_; ++l) boost::add_vertex(VertexProps{VertexKind::leaf, l}, graph_);
  const std::size_t spine = boost::add_vertex(VertexProps{VertexKind::spine, 0}, graph_);
  const auto switch_v = [&](int n) { return static_cast<std::size_t>(w + n); };
  const auto leaf_v = [&](int l) { return static_cast<std::size_t>(w + nodes + l); };

  const double nvlink = spec.nvlink_GBps * 1e9 * spec.nvlink_efficiency;
  const double nic = spec.nic_GBps * 1e9 * spec.nic_efficiency;
  const double uplink = nic * spec.leaf_radix / spec.oversubscription;
  for (int r = 0; r < w; ++r) {
    nvlink_up_.push_back(add_link(r, switch_v(node_of(r)), LinkKind::nvlink_up, nvlink));
    nvlink_down_.push_back(add_link(switch_v(node_of(r)), r, LinkKind::nvlink_down, nvlink));
    nic_up_.push_back(add_link(r, leaf_v(leaf_of(r)), LinkKind::nic_up, nic));
    nic_down_.push_back(add_link(leaf_v(leaf_of(r)), r, LinkKind::nic_down, nic));
  }
  for (int l = 0; l < leaves_; ++l) {
    leaf_up_.push_back(add_link(leaf_v(l), spine, LinkKind::leaf_up, uplink));
    leaf_down_.push_back(add_link(spine, leaf_v(l), LinkKind::leaf_down, uplink));
  }
}

LinkIndex Topology::add_link(std::size_t from, std::size_t to, LinkKind kind, double capacity_Bps) {
  const EdgeProps props{kind, capacity_Bps, static_cast<std::uint32_t>(links_.size())};
  boost::add_edge(from, to, props, graph_);
  links_.push_back(props);
  return props.id;
}

int Topology::leaf_of(int rank) const {
  const int node = node_of(rank);
  if (spec_.layout == Layout::rail) return (node / nodes_per_leaf_) * gpus_per_node_ + local_of(rank);
  return node / nodes_per_leaf_;
}

std::vector<LinkIndex> Topology::route(int src, int dst) const {
  if (src == dst) return {};
  if (node_of(src) == node_of(dst)) return {nvlink_up_[src], nvlink_down_[dst]};
  const int ls = leaf_of(src);
  const int ld = leaf_of(dst);
  if (ls == ld) return {nic_up_[src], nic_down_[dst]};
  return {nic_up_[src], leaf_up_[ls], leaf_down_[ld], nic_down_[dst]};
}

std::int64_t Topology::latency_ps(int src, int dst) const {
  if (src == dst) return 0;
  const double us = node_of(src) == node_of(dst) ? spec_.nvlink_latency_us : spec_.nic_latency_us;
  return std::llround(us * 1e6);
}

bool Topology::symmetric() const { return nodes_ <= nodes_per_leaf_ || nodes_ % nodes_per_leaf_ == 0; }

void Topology::write_dot(std::ostream& out) const {
  out << "digraph fabric {\n  // " << spec_.name << ": " << nodes_ << " nodes x " << gpus_per_node_
      << " GPUs, layout " << to_string(spec_.layout) << ", oversubscription " << spec_.oversubscription << "\n";
  const auto name = [&](std::size_t v) {
    const VertexProps& p = graph_[v];
    switch (p.kind) {
      case VertexKind::gpu: return "gpu" + std::to_string(p.index);
      case VertexKind::nvswitch: return "nvswitch" + std::to_string(p.index);
      case VertexKind::leaf: return "leaf" + std::to_string(p.index);
      case VertexKind::spine: return std::string("spine");
    }
    return std::string("?");
  };
  for (auto [v, end] = boost::vertices(graph_); v != end; ++v) {
    const char* shape = graph_[*v].kind == VertexKind::gpu ? "box" : "ellipse";
    out << "  " << name(*v) << " [shape=" << shape << "];\n";
  }
  for (auto [e, end] = boost::edges(graph_); e != end; ++e) {
    const EdgeProps& p = graph_[*e];
    out << "  " << name(boost::source(*e, graph_)) << " -> " << name(boost::target(*e, graph_)) << " [label=\""
        << to_string(p.kind) << ' ' << p.capacity_Bps / 1e9 << " GB/s\"];\n";
  }
  out << "}\n";
}

}  // namespace dionsim::topo
