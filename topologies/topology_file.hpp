#pragma once
// Topology files (TOML). Keys carry their units; unknown keys are errors; every error names
// file:line and the key. Example (docs/simulator.md has the full reference):
//
//   base = "h200-ndr400"      # optional: start from a preset, the keys below override it
//   name = "my-cluster"
//   gpus_per_host = 8         # required without base; when present it must match --gpus-per-node
//   gpus_per_nvlink_domain = 8  # optional: default the host (HGX), 72 for an NVL72 rack
//   nvlink_generation = 4
//   nvlink_GBps = 450.0
//   nvlink_latency_us = 3.0
//   nvlink_efficiency = 0.8
//   nic_GBps = 50.0
//   nic_latency_us = 8.0
//   nic_efficiency = 0.9
//   network = "infiniband"    # or "roce", "efa"
//   nic = "ConnectX-7"        # free text, for output
//   planes = 1
//   layout = "rail"           # or "node"
//   leaf_radix = 32
//   oversubscription = 2.0
#include <optional>
#include <string>

#include "topologies/topology.hpp"

namespace dionsim::topo {

struct TopologyFile {
  FabricSpec spec;
  std::optional<int> gpus_per_node;  // gpus_per_host (or its older name gpus_per_node) when the file gives it
};

// Throws InputError ("FILE:LINE: KEY: got 'X', expected Y"; parse errors also name file:line),
// IoError when the file cannot be read.
[[nodiscard]] TopologyFile load_topology_file(const std::string& path);
[[nodiscard]] TopologyFile parse_topology(const std::string& text, const std::string& source_name);

}  // namespace dionsim::topo
