#include "topologies/topology_file.hpp"

#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <toml++/toml.h>

#include "common/files.hpp"
#include "common/parse.hpp"
#include "common/error.hpp"
#include "topologies/toml_values.hpp"

namespace dionsim::topo {
namespace {

int integer(const std::string& source, const std::string& key, const toml::node& node) {
  if (const auto* v = node.as_integer(); v != nullptr && v->get() >= 1 && v->get() <= 1'000'000) {
    return static_cast<int>(v->get());
  }
  throw_bad_input(toml_where(source, node), key, toml_text(node), "an integer >= 1");
}

bool boolean(const std::string& source, const std::string& key, const toml::node& node) {
  if (const auto* v = node.as_boolean()) return v->get();
  throw_bad_input(toml_where(source, node), key, toml_text(node), "true or false (a TOML boolean, unquoted)");
}

std::string string(const std::string& source, const std::string& key, const toml::node& node) {
  if (const auto* v = node.as_string()) return v->get();
  throw_bad_input(toml_where(source, node), key, toml_text(node), "a string");
}

}  // namespace

TopologyFile parse_topology(const std::string& text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw InputError(source + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
  TopologyFile out;
  std::optional<int> domain;
  std::string domain_line;
  const bool has_base = root.get("base") != nullptr;
  // `base` first, so that the other keys override the preset whatever their order in the file.
  if (const toml::node* base = root.get("base")) {
    const std::string name = string(source, "base", *base);
    try {
      out.spec = preset(name);
    } catch (const UsageError&) {
      std::string known;
      for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
      throw_bad_input(toml_where(source, *base), "base", name, "one of " + known);
    }
  }
  out.spec.name = source;

  std::map<std::string, const toml::node*> seen;
  for (const auto& [key, node] : root) seen[std::string(key.str())] = &node;

  // Every key with what it sets; a value is checked where it is read so the error has its line.
  FabricSpec& s = out.spec;
  const auto positive = [&](const std::string& key, const toml::node& n, double& field, bool fraction) {
    const double v = toml_number(source, key, n);
    // A bandwidth below 1 MB/s (1e-12 GB/s was taken for the default) or above 1 PB/s is no fabric.
    const bool bandwidth = key.ends_with("_GBps");
    const bool ok = fraction ? (v > 0 && v <= 1) : bandwidth ? (v >= 1e-3 && v <= 1e6) : v > 0;
    if (!ok) {
      throw_bad_input(toml_where(source, n), key, toml_text(n),
                      fraction ? "a number in (0, 1]" : bandwidth ? "a positive number (a bandwidth in [0.001, 1e6] GB/s)" : "a positive number");
    }
    field = v;
  };
  const auto nonnegative = [&](const std::string& key, const toml::node& n, double& field) {
    const double v = toml_number(source, key, n);
    if (!(v >= 0 && v <= 1e9)) throw_bad_input(toml_where(source, n), key, toml_text(n), "a number in [0, 1e9]");
    field = v;
  };
  for (const auto& [key, node] : seen) {
    const toml::node& n = *node;
    if (key == "base") {
      continue;
    } else if (key == "name") {
      s.name = string(source, key, n);
    } else if (key == "gpus_per_host" || key == "gpus_per_node") {  // gpus_per_node: the older name
      if (out.gpus_per_node) throw_bad_input(toml_where(source, n), key, toml_text(n), "one of gpus_per_host, gpus_per_node");
      out.gpus_per_node = integer(source, key, n);
    } else if (key == "gpus_per_nvlink_domain") {
      domain = integer(source, key, n);
      domain_line = toml_where(source, n);
    } else if (key == "nvlink_generation") {
      s.nvlink_generation = integer(source, key, n);
      if (s.nvlink_generation > 9) throw_bad_input(toml_where(source, n), key, toml_text(n), "an NVLink generation in [1, 9]");
    } else if (key == "planes") {
      s.planes = integer(source, key, n);
      if (s.planes > 64) throw_bad_input(toml_where(source, n), key, toml_text(n), "an integer in [1, 64]");
    } else if (key == "nic") {
      s.nic = string(source, key, n);
    } else if (key == "network") {
      const std::string v = string(source, key, n);
      if (v == "infiniband") {
        s.network = Network::infiniband;
      } else if (v == "roce") {
        s.network = Network::roce;
      } else if (v == "efa") {
        s.network = Network::efa;
      } else {
        throw_bad_input(toml_where(source, n), key, v, "'infiniband', 'roce' or 'efa'");
      }
    } else if (key == "nvlink_GBps") {
      positive(key, n, s.nvlink_GBps, false);
    } else if (key == "nic_GBps") {
      positive(key, n, s.nic_GBps, false);
    } else if (key == "nvlink_efficiency") {
      positive(key, n, s.nvlink_efficiency, true);
    } else if (key == "nic_efficiency") {
      positive(key, n, s.nic_efficiency, true);
    } else if (key == "nvlink_latency_us") {
      nonnegative(key, n, s.nvlink_latency_us);
    } else if (key == "nic_latency_us") {
      nonnegative(key, n, s.nic_latency_us);
    } else if (key == "net_step_latency_us") {
      nonnegative(key, n, s.net_step_latency_us);
    } else if (key == "leaf_radix") {
      s.leaf_radix = integer(source, key, n);
    } else if (key == "oversubscription") {
      const double v = toml_number(source, key, n);
      if (!(v >= 1)) throw_bad_input(toml_where(source, n), key, toml_text(n), "a number >= 1 (1 = non-blocking)");
      s.oversubscription = v;
    } else if (key == "nvls_multicast") {
      s.nvls_multicast = boolean(source, key, n);
    } else if (key == "tuner_plugin") {
      const std::string v = string(source, key, n);
      bool known = false;
      for (const auto t : {TunerPlugin::none, TunerPlugin::aws_ofi_p5, TunerPlugin::aws_ofi_p5en, TunerPlugin::aws_ofi_p6,
                             TunerPlugin::aws_ofi_p6_b300}) {
        if (v != to_string(t)) continue;
        s.tuner_plugin = t;
        known = true;
      }
      if (!known) throw_bad_input(toml_where(source, n), key, v, "'none', 'aws-ofi-p5', 'aws-ofi-p5en', 'aws-ofi-p6' or 'aws-ofi-p6-b300'");
    } else if (key == "layout") {
      const std::string v = string(source, key, n);
      if (v == "rail") {
        s.layout = Layout::rail;
      } else if (v == "node") {
        s.layout = Layout::node;
      } else {
        throw_bad_input(toml_where(source, n), key, v, "'rail' or 'node'");
      }
    } else {
      throw_bad_input(toml_where(source, n), key, toml_text(n),
                      "no such key (known: base, name, gpus_per_host, gpus_per_nvlink_domain, nvlink_generation, "
                      "nvlink_GBps, nvlink_latency_us, nvlink_efficiency, network, nic, nic_GBps, nic_latency_us, net_step_latency_us, "
                      "nic_efficiency, planes, layout, leaf_radix, oversubscription, tuner_plugin, nvls_multicast; gpus_per_node = "
                      "gpus_per_host)");
    }
  }
  // Without a base the bandwidths and the host size must be given.
  if (s.nvlink_GBps <= 0) throw_bad_input(source, "nvlink_GBps", "(missing)", "a positive number (or a 'base' preset)");
  if (s.nic_GBps <= 0) throw_bad_input(source, "nic_GBps", "(missing)", "a positive number (or a 'base' preset)");
  if (!has_base && !out.gpus_per_node) {
    throw_bad_input(source, "gpus_per_host", "(missing)", "an integer >= 1 (or a 'base' preset)");
  }
  // The host size first (an HGX base's NVLink domain follows it), then an explicit domain.
  if (out.gpus_per_node) s = with_gpus_per_host(s, *out.gpus_per_node);
  if (!has_base && !domain) s.gpus_per_nvlink_domain = s.gpus_per_host;  // a host is its own NVLink domain
  if (domain) s.gpus_per_nvlink_domain = *domain;
  if (s.gpus_per_nvlink_domain < s.gpus_per_host || s.gpus_per_nvlink_domain % s.gpus_per_host != 0) {
    throw_bad_input(domain ? domain_line : source, "gpus_per_nvlink_domain", std::to_string(s.gpus_per_nvlink_domain),
                    "a multiple of gpus_per_host (" + std::to_string(s.gpus_per_host) +
                        ") and no smaller: a host is never larger than its NVLink domain");
  }
  validate(s, source, false);  // what the keys cannot check one by one (e.g. leaf_radix vs the host)
  return out;
}

TopologyFile load_topology_file(const std::string& path) {
  return parse_topology(read_input_file(path, "a topology TOML file", 16 << 20), path);
}

}  // namespace dionsim::topo
