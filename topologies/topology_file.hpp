#pragma once
// Topology files (TOML). Keys carry their units; unknown keys are errors; every error names
// file:line and the key. Example (docs/simulator.md has the full reference):
//
//   base = "h200-ndr400"      # optional: start from a preset, the keys below override it
//   name = "my-cluster"
//   gpus_per_node = 8         # optional: when present it must match --gpus-per-node
//   nvlink_GBps = 450.0
//   nvlink_latency_us = 3.0
//   nvlink_efficiency = 0.8
//   nic_GBps = 50.0
//   nic_latency_us = 8.0
//   nic_efficiency = 0.9
//   layout = "rail"           # or "node"
//   leaf_radix = 32
//   oversubscription = 2.0
#include <optional>
#include <string>

#include "topologies/topology.hpp"

namespace dionsim::topo {

struct TopologyFile {
  FabricSpec spec;
  std::optional<int> gpus_per_node;
};

// Throws InputError ("FILE:LINE: KEY: got 'X', expected Y"; parse errors also name file:line),
// IoError when the file cannot be read.
[[nodiscard]] TopologyFile load_topology_file(const std::string& path);
[[nodiscard]] TopologyFile parse_topology(const std::string& text, const std::string& source_name);

}  // namespace dionsim::topo
