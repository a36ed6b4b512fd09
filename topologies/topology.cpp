#include "topologies/topology.hpp"

#include <algorithm>
#include <cmath>
#include <list>
#include <mutex>
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

const char* to_string(TunerPlugin t) {
  switch (t) {
    case TunerPlugin::none: return "none";
    case TunerPlugin::aws_ofi_p5: return "aws-ofi-p5";
    case TunerPlugin::aws_ofi_p5en: return "aws-ofi-p5en";
    case TunerPlugin::aws_ofi_p6: return "aws-ofi-p6";
    case TunerPlugin::aws_ofi_p6_b300: return "aws-ofi-p6-b300";
  }
  return "?";
}

const char* to_string(Network network) {
  switch (network) {
    case Network::infiniband: return "infiniband";
    case Network::roce: return "roce";
    case Network::efa: return "efa";
  }
  return "?";
}

std::string describe(const FabricSpec& s) {
  std::ostringstream o;
  o << s.name << ": " << s.gpus_per_host << " GPUs per host, " << s.gpus_per_nvlink_domain
    << " per NVLink domain (NVLink " << s.nvlink_generation << ", " << s.nvlink_GBps << " GB/s per GPU), "
    << to_string(s.network) << ' ' << s.nic_GBps << " GB/s per GPU" << (s.nic.empty() ? "" : " (" + s.nic + ")")
    << ", " << to_string(s.layout) << ", " << s.leaf_radix << "-port leaves, " << s.planes << " plane"
    << (s.planes == 1 ? "" : "s") << ", oversubscription " << s.oversubscription
    << (s.tuner_plugin == TunerPlugin::none ? "" : std::string(", NCCL tuner plugin ") + to_string(s.tuner_plugin))
    << (s.nvls_multicast ? "" : ", no NVLS multicast");
  return o.str();
}

FabricSpec with_gpus_per_host(FabricSpec spec, int gpus_per_host) {
  if (gpus_per_host < 1) throw_bad_usage("--gpus-per-node", std::to_string(gpus_per_host), "an integer >= 1");
  if (gpus_per_host == spec.gpus_per_host) return spec;  // as described (validate() judges it)
  if (spec.gpus_per_nvlink_domain == spec.gpus_per_host) {
    spec.gpus_per_nvlink_domain = gpus_per_host;
  } else {
    // A domain spanning hosts (NVL72) holds whole hosts: 16-GPU hosts fill 64 of a rack's 72.
    spec.gpus_per_nvlink_domain = std::max(gpus_per_host, spec.gpus_per_nvlink_domain / gpus_per_host * gpus_per_host);
  }
  // A node-layout leaf's GPU ports take whole hosts: 32 ports hold ten 3-GPU hosts.
  if (spec.layout == Layout::node && spec.leaf_radix % gpus_per_host != 0)
    spec.leaf_radix = std::max(gpus_per_host, spec.leaf_radix / gpus_per_host * gpus_per_host);
  spec.gpus_per_host = gpus_per_host;
  return spec;
}

void validate(const FabricSpec& s, const std::string& where, bool usage) {
  const auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  const auto fraction = [](double v) { return std::isfinite(v) && v > 0 && v <= 1; };
  const auto nonneg = [](double v) { return std::isfinite(v) && v >= 0; };
  check(s.gpus_per_host >= 1, where, "gpus_per_host", s.gpus_per_host, "an integer >= 1", usage);
  check(s.gpus_per_nvlink_domain >= s.gpus_per_host, where, "gpus_per_nvlink_domain", s.gpus_per_nvlink_domain,
        ("an integer >= gpus_per_host (" + std::to_string(s.gpus_per_host) + "): a host is never larger than its NVLink domain").c_str(),
        usage);
  check(s.gpus_per_nvlink_domain % s.gpus_per_host == 0, where, "gpus_per_nvlink_domain", s.gpus_per_nvlink_domain,
        ("a multiple of gpus_per_host (" + std::to_string(s.gpus_per_host) + "): a domain is whole hosts").c_str(), usage);
  check(s.nvlink_generation >= 1 && s.nvlink_generation <= 9, where, "nvlink_generation", s.nvlink_generation,
        "an NVLink generation in [1, 9]", usage);
  check(positive(s.nvlink_GBps), where, "nvlink_GBps", s.nvlink_GBps, "a positive finite number of GB/s", usage);
  check(positive(s.nic_GBps), where, "nic_GBps", s.nic_GBps, "a positive finite number of GB/s", usage);
  check(nonneg(s.nvlink_latency_us), where, "nvlink_latency_us", s.nvlink_latency_us, "a finite number >= 0", usage);
  check(nonneg(s.nic_latency_us), where, "nic_latency_us", s.nic_latency_us, "a finite number >= 0", usage);
  check(nonneg(s.net_step_latency_us), where, "net_step_latency_us", s.net_step_latency_us, "a finite number >= 0", usage);
  check(fraction(s.nvlink_efficiency), where, "nvlink_efficiency", s.nvlink_efficiency, "a number in (0, 1]", usage);
  check(fraction(s.nic_efficiency), where, "nic_efficiency", s.nic_efficiency, "a number in (0, 1]", usage);
  check(s.planes >= 1 && s.planes <= 64, where, "planes", s.planes, "an integer in [1, 64]", usage);
  check(s.leaf_radix >= 1, where, "leaf_radix", s.leaf_radix, "an integer >= 1", usage);
  check(std::isfinite(s.oversubscription) && s.oversubscription >= 1, where, "oversubscription",
        s.oversubscription, "a finite number >= 1 (1 = non-blocking)", usage);
  if (s.layout == Layout::node) {
    check(s.leaf_radix % s.gpus_per_host == 0, where, "leaf_radix", s.leaf_radix,
          ("a multiple of the GPUs per host (" + std::to_string(s.gpus_per_host) + ") with layout 'node'").c_str(),
          usage);
  }
}

Topology::Topology(const FabricSpec& spec, int nodes, int gpus_per_node)
    : Topology(with_gpus_per_host(spec, gpus_per_node), nodes) {}

Topology::Topology(const FabricSpec& spec, int hosts) : spec_(spec), hosts_(hosts) {
  if (hosts < 1) throw_bad_usage("--nodes", std::to_string(hosts), "an integer >= 1");
  validate(spec, spec.name, true);
  const int g = spec.gpus_per_host;
  if (spec.layout == Layout::rail) {
    nodes_per_leaf_ = spec.leaf_radix;  // one port per host on each rail leaf
    leaves_ = (hosts + nodes_per_leaf_ - 1) / nodes_per_leaf_ * g;
  } else {
    nodes_per_leaf_ = spec.leaf_radix / g;
    leaves_ = (hosts + nodes_per_leaf_ - 1) / nodes_per_leaf_;
  }
  const int w = ranks();
  domains_ = (w + spec.gpus_per_nvlink_domain - 1) / spec.gpus_per_nvlink_domain;
  for (int r = 0; r < w; ++r) boost::add_vertex(VertexProps{VertexKind::gpu, r}, graph_);
  for (int d = 0; d < domains_; ++d) boost::add_vertex(VertexProps{VertexKind::nvswitch, d}, graph_);
  for (int l = 0; l < leaves_; ++l) boost::add_vertex(VertexProps{VertexKind::leaf, l}, graph_);
  const std::size_t spine = boost::add_vertex(VertexProps{VertexKind::spine, 0}, graph_);
  const auto switch_v = [&](int d) { return static_cast<std::size_t>(w + d); };
  const auto leaf_v = [&](int l) { return static_cast<std::size_t>(w + domains_ + l); };

  const double nvlink = spec.nvlink_GBps * 1e9 * spec.nvlink_efficiency;
  const double nic = spec.nic_GBps * 1e9 * spec.nic_efficiency;
  const double uplink = nic * spec.leaf_radix / spec.oversubscription;
  for (int r = 0; r < w; ++r) {
    nvlink_up_.push_back(add_link(r, switch_v(domain_of(r)), LinkKind::nvlink_up, nvlink, r));
    nvlink_down_.push_back(add_link(switch_v(domain_of(r)), r, LinkKind::nvlink_down, nvlink, r));
    nic_up_.push_back(add_link(r, leaf_v(leaf_of(r)), LinkKind::nic_up, nic, r));
    nic_down_.push_back(add_link(leaf_v(leaf_of(r)), r, LinkKind::nic_down, nic, r));
  }
  for (int l = 0; l < leaves_; ++l) {
    leaf_up_.push_back(add_link(leaf_v(l), spine, LinkKind::leaf_up, uplink, l));
    leaf_down_.push_back(add_link(spine, leaf_v(l), LinkKind::leaf_down, uplink, l));
  }
}

std::shared_ptr<const Topology> shared_topology(const FabricSpec& spec, int nodes, int gpus_per_node) {
  constexpr std::size_t kKept = 8;
  struct Kept {
    FabricSpec spec;  // as asked for (the built Topology's spec has gpus_per_host applied)
    int nodes, gpus_per_node;
    std::shared_ptr<const Topology> topology;
  };
  static std::mutex mutex;
  static std::list<Kept> kept;  // most recent first
  {
    const std::lock_guard lock(mutex);
    for (auto it = kept.begin(); it != kept.end(); ++it) {
      if (it->nodes != nodes || it->gpus_per_node != gpus_per_node || !(it->spec == spec)) continue;
      kept.splice(kept.begin(), kept, it);
      return kept.front().topology;
    }
  }
  auto built = std::make_shared<const Topology>(spec, nodes, gpus_per_node);  // outside the lock: may throw
  const std::lock_guard lock(mutex);
  kept.push_front({spec, nodes, gpus_per_node, built});
  if (kept.size() > kKept) kept.pop_back();
  return built;
}

int Topology::domain_size_of(int rank) const {
  const int d = domain_of(rank);
  return std::min(spec_.gpus_per_nvlink_domain, ranks() - d * spec_.gpus_per_nvlink_domain);
}

LinkIndex Topology::add_link(std::size_t from, std::size_t to, LinkKind kind, double capacity_Bps, int owner) {
  const EdgeProps props{kind, capacity_Bps, static_cast<std::uint32_t>(links_.size())};
  boost::add_edge(from, to, props, graph_);
  links_.push_back(props);
  link_owner_.push_back(owner);
  return props.id;
}

int Topology::leaf_of(int rank) const {
  const int host = host_of(rank);
  if (spec_.layout == Layout::rail) return (host / nodes_per_leaf_) * spec_.gpus_per_host + local_of(rank);
  return host / nodes_per_leaf_;
}

std::vector<LinkIndex> Topology::route(int src, int dst) const {
  if (src == dst) return {};
  if (same_domain(src, dst)) return {nvlink_up_[src], nvlink_down_[dst]};
  const int ls = leaf_of(src);
  const int ld = leaf_of(dst);
  if (ls == ld) return {nic_up_[src], nic_down_[dst]};
  return {nic_up_[src], leaf_up_[ls], leaf_down_[ld], nic_down_[dst]};
}

std::int64_t Topology::latency_ps(int src, int dst) const {
  if (src == dst) return 0;
  const double us = same_domain(src, dst) ? spec_.nvlink_latency_us : spec_.nic_latency_us;
  return std::llround(us * 1e6);
}

bool Topology::symmetric() const {
  const bool leaves_even = hosts_ <= nodes_per_leaf_ || hosts_ % nodes_per_leaf_ == 0;
  const bool domains_even = ranks() <= spec_.gpus_per_nvlink_domain || ranks() % spec_.gpus_per_nvlink_domain == 0;
  return leaves_even && domains_even;
}

void Topology::write_dot(std::ostream& out) const {
  out << "digraph fabric {\n  // " << spec_.name << ": " << hosts_ << " hosts x " << spec_.gpus_per_host
      << " GPUs, " << domains_ << " NVLink domain(s) of up to " << spec_.gpus_per_nvlink_domain << ", layout "
      << to_string(spec_.layout) << ", oversubscription " << spec_.oversubscription << "\n";
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
