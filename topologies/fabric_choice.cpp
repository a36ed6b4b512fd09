#include "topologies/fabric_choice.hpp"

#include "common/error.hpp"
#include "topologies/topology_file.hpp"

namespace dionsim::topo {

FabricSpec resolve_fabric(const FabricChoice& c, int gpus_per_node) {
  const bool custom = c.nvlink_GBps.has_value() || c.nic_GBps.has_value();
  if (static_cast<int>(c.preset.has_value()) + static_cast<int>(c.topology_file.has_value()) +
          static_cast<int>(custom) != 1) {
    throw UsageError("give exactly one of --fabric PRESET, --topology FILE, or --nvlink-GBps X --nic-GBps Y");
  }
  FabricSpec spec;
  if (c.preset) {
    spec = preset(*c.preset);
  } else if (c.topology_file) {
    const TopologyFile file = load_topology_file(*c.topology_file);
    if (file.gpus_per_node && *file.gpus_per_node != gpus_per_node) {
      throw_bad_usage("--gpus-per-node", std::to_string(gpus_per_node),
                      std::to_string(*file.gpus_per_node) + " as in " + *c.topology_file);
    }
    spec = file.spec;
  } else {
    if (!c.nvlink_GBps || !c.nic_GBps) throw UsageError("--nvlink-GBps and --nic-GBps go together");
    if (!(*c.nvlink_GBps > 0)) throw_bad_usage("--nvlink-GBps", std::to_string(*c.nvlink_GBps), "a positive number of GB/s");
    if (!(*c.nic_GBps > 0)) throw_bad_usage("--nic-GBps", std::to_string(*c.nic_GBps), "a positive number of GB/s");
    spec.name = "custom";
    spec.gpus_per_host = spec.gpus_per_nvlink_domain = gpus_per_node;  // HGX-like: the host is the domain
    spec.nvlink_GBps = *c.nvlink_GBps;
    spec.nic_GBps = *c.nic_GBps;
  }
  if (c.oversubscription) {
    if (!(*c.oversubscription >= 1)) {
      throw_bad_usage("--oversubscription", std::to_string(*c.oversubscription), "a number >= 1 (1 = non-blocking)");
    }
    spec.oversubscription = *c.oversubscription;
  }
  if (c.latency_us) {
    if (!(*c.latency_us >= 0)) throw_bad_usage("--latency-us", std::to_string(*c.latency_us), "a number >= 0");
    spec.nvlink_latency_us = spec.nic_latency_us = spec.net_step_latency_us = *c.latency_us;
  }
  if (gpus_per_node < 1) throw_bad_usage("--gpus-per-node", std::to_string(gpus_per_node), "an integer >= 1");
  spec = with_gpus_per_host(spec, gpus_per_node);
  validate(spec, spec.name, true);
  return spec;
}

}  // namespace dionsim::topo
