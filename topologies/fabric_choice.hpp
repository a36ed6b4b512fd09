#pragma once
// How a command line picks a fabric — exactly one of a preset, a topology file, or explicit
// NVLink/NIC bandwidths — plus overrides. Shared by every subcommand that takes a fabric
// (collective, whatif) so they accept the same flags and say the same things about them.
#include <optional>
#include <string>

#include "topologies/topology.hpp"

namespace dionsim::topo {

struct FabricChoice {
  std::optional<std::string> preset;         // --fabric
  std::optional<std::string> topology_file;  // --topology
  std::optional<double> nvlink_GBps;         // --nvlink-GBps
  std::optional<double> nic_GBps;            // --nic-GBps
  std::optional<double> oversubscription;    // --oversubscription (overrides any source)
  std::optional<double> latency_us;          // --latency-us (NVLink and network; overrides)
};

// Validated spec with hosts of `gpus_per_node` GPUs (with_gpus_per_host: an HGX domain follows
// the host, an NVL72 domain keeps its 72); UsageError for bad flags (naming them), InputError for
// a bad file.
// A custom fabric (bandwidths only) is rail-optimized with 32-port leaves, efficiency 1 and
// latency 0 unless overridden.
[[nodiscard]] FabricSpec resolve_fabric(const FabricChoice& choice, int gpus_per_node);

}  // namespace dionsim::topo
