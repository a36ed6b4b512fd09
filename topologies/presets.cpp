// Built-in fabric presets. Bandwidths are vendor figures per GPU and per direction; latencies
// and efficiencies are the per-fabric parameters calibration pins (`dionsim calibrate`); the
// defaults below and where they come from are listed in docs/simulator.md.
#include <map>

#include "common/error.hpp"
#include "topologies/topology.hpp"

namespace dionsim::topo {
namespace {

// NVLink 4 (H100/H200 SXM): 18 links x 25 GB/s = 450 GB/s per direction per GPU (NVIDIA H100
// datasheet: "900 GB/s" bidirectional). Latency and efficiency: the fit of the 2 x H200 NCCL
// all-to-all at 8 and 64 MiB in ../shared/data/h200-anchors.csv (60.0 us, 0.666; see
// docs/simulator.md, "Against measurement", and tests/sim/test_anchors.cpp).
FabricSpec nvlink4(std::string name) {
  FabricSpec s;
  s.name = std::move(name);
  s.nvlink_GBps = 450;
  s.nvlink_latency_us = 60;
  s.nvlink_efficiency = 0.666;
  return s;
}

// InfiniBand NDR400: one ConnectX-7 400 Gb/s = 50 GB/s per GPU (DGX H100/H200 reference
// architecture), rail-optimized, Quantum-2 leaves with 32 ports down and 32 up (non-blocking).
// Latency/efficiency: not measured here; 10 us per NCCL message and 0.9 of line rate are the
// usual nccl-tests orders of magnitude, to be replaced by calibration.
FabricSpec ndr400(FabricSpec s) {
  s.nic_GBps = 50;
  s.nic_latency_us = 10;
  s.nic_efficiency = 0.9;
  s.layout = Layout::rail;
  s.leaf_radix = 32;
  s.oversubscription = 1;
  return s;
}

// AWS EFA on p5 (H100) and p5en (H200): 3200 Gb/s per instance over 8 GPUs = 400 Gb/s = 50 GB/s
// per GPU (AWS instance-type pages). SRD adds latency and achieves less of line rate than IB;
// 20 us and 0.75 are assumptions to be replaced by calibration. Leaves take whole nodes.
FabricSpec efa(FabricSpec s) {
  s.nic_GBps = 50;
  s.nic_latency_us = 20;
  s.nic_efficiency = 0.75;
  s.layout = Layout::node;
  s.leaf_radix = 32;
  s.oversubscription = 1;
  return s;
}

const std::map<std::string, FabricSpec>& table() {
  static const std::map<std::string, FabricSpec> presets = {
      {"h100-ndr400", ndr400(nvlink4("h100-ndr400"))},
      {"h200-ndr400", ndr400(nvlink4("h200-ndr400"))},
      {"p5-efa", efa(nvlink4("p5-efa"))},
      {"p5en-efa", efa(nvlink4("p5en-efa"))},
  };
  return presets;
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, spec] : table()) names.push_back(name);
  return names;
}

FabricSpec preset(const std::string& name, const std::string& flag) {
  const auto it = table().find(name);
  if (it == table().end()) {
    std::string known;
    for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
    throw_bad_usage(flag, name, "one of " + known);
  }
  return it->second;
}

}  // namespace dionsim::topo
