// Built-in fabric presets. Bandwidths are vendor figures per GPU and per direction (GB = 1e9 B);
// latencies and efficiencies are the per-fabric parameters calibration pins (`dionsim calibrate`).
// Every figure's public source is in docs/simulator.md ("Presets"); the comments below say which.
#include <cmath>
#include <map>
#include <optional>

#include "common/error.hpp"
#include "common/parse.hpp"
#include "topologies/topology.hpp"

namespace dionsim::topo {
namespace {

// --- NVLink domains ---------------------------------------------------------------------------
// Latency and efficiency: the fit of the 2 x H200 NCCL all-to-all at 8 and 64 MiB in
// ../shared/data/h200-anchors.csv (60.0 us, 0.666; docs/simulator.md "Against measurement",
// tests/sim/test_anchors.cpp). The only NVLink measurement dionsim has; NVLink 3 and 5 domains
// carry it over until they have their own.
FabricSpec nvlink(std::string name, int generation, double GBps, int gpus_per_host, int gpus_per_domain) {
  FabricSpec s;
  s.name = std::move(name);
  s.gpus_per_host = gpus_per_host;
  s.gpus_per_nvlink_domain = gpus_per_domain;
  s.nvlink_generation = generation;
  s.nvlink_GBps = GBps;
  s.nvlink_latency_us = 60;
  s.nvlink_efficiency = 0.666;
  return s;
}
// NVLink 3 (A100 SXM4): 12 links, 600 GB/s bidirectional = 300 GB/s per direction (A100 datasheet).
FabricSpec hgx_a100(std::string name) { return nvlink(std::move(name), 3, 300, 8, 8); }
// NVLink 4 (H100/H200 SXM): 18 links, 900 GB/s bidirectional = 450 per direction (H100/H200 datasheets).
FabricSpec hgx_h100(std::string name) { return nvlink(std::move(name), 4, 450, 8, 8); }
// H800 / A800 SXM (China's export variants of H100 / A100): 8 NVLinks, 400 GB/s bidirectional =
// 200 per direction (H800 and A800 datasheets; DeepSeek's DeepEP measures ~160 GB/s on H800,
// NCCL's 8 x 20.6 GB/s per sm90 link).
FabricSpec hgx_h800(std::string name) { return nvlink(std::move(name), 4, 200, 8, 8); }
FabricSpec hgx_a800(std::string name) { return nvlink(std::move(name), 3, 200, 8, 8); }
// NVLink 5 (B200/B300): 18 links, 1.8 TB/s bidirectional = 900 per direction (HGX B200/B300 pages).
FabricSpec hgx_b200(std::string name) { return nvlink(std::move(name), 5, 900, 8, 8); }
// GB200/GB300 NVL72: 72 GPUs on one NVLink 5 fabric (18 compute trays of 4 GPUs, 9 NVLink switch
// trays; "130 TB/s" = 72 x 1.8 TB/s), NVIDIA GB200/GB300 NVL72 pages.
FabricSpec nvl72(std::string name) { return nvlink(std::move(name), 5, 900, 4, 72); }

// --- Scale-out networks -----------------------------------------------------------------------
// Per-message latency of the DES and whatif's closed form (nic_latency_us): 10 us InfiniBand,
// 12 us RoCE, 20 us EFA, assumptions of the right order that calibration pins.
// The collective model's network step (net_step_latency_us): what one network message costs a
// NCCL step where it exceeds NCCL's own network constants (sim/collective_model.hpp).
// InfiniBand and RoCE: 0 — NCCL's IB transport reports no latency
// of its own (net_ib's properties: latency 0) and NCCL's per-protocol network constants
// (tuning.cc) are NVIDIA's figures for it. EFA: the per-step network latency of AWS's own tuner
// model for EFA (aws-ofi-nccl src/tuner/nccl_ofi_model.cpp: 20 us p5/p5e, 18 us p5en) and, for
// p4d and p6, which that model does not cover, the latency aws-ofi-nccl reports to NCCL for
// them (src/platform-aws.cpp: 75 us p4d, 35 us p5en/p6-b200, p6-b300 and the p-series entry that
// takes p6e-gb200); set per preset below.
// Efficiency, the achievable fraction of line rate: InfiniBand 0.96 — the rate NCCL's topology
// search runs a NIC at, 48 GB/s per NDR port and 24 per HDR port (search.cc speedArrayInter);
// RoCE 0.95 — the same transport, less the Ethernet/IP/UDP framing RoCEv2 adds to a 4 KiB
// payload (4096 / 4178 B against InfiniBand's 4096 / 4122 B); EFA 0.75, an assumption (AWS
// publishes no achievable rate).
FabricSpec net(FabricSpec s, Network network, std::string nic, double nic_GBps, Layout layout, int leaf_radix,
               int planes = 1) {
  s.network = network;
  s.nic = std::move(nic);
  s.nic_GBps = nic_GBps;
  switch (network) {
    case Network::infiniband: s.nic_latency_us = 10, s.nic_efficiency = 0.96; break;
    case Network::roce: s.nic_latency_us = 12, s.nic_efficiency = 0.95; break;
    case Network::efa: s.nic_latency_us = 20, s.nic_efficiency = 0.75; break;
  }
  s.layout = layout;
  s.leaf_radix = leaf_radix;
  s.planes = planes;
  s.oversubscription = 1;
  return s;
}
// InfiniBand HDR: ConnectX-6 200 Gb/s = 25 GB/s per GPU, one per GPU (DGX A100); rail-optimized
// as the DGX A100 SuperPOD: Quantum QM8700 (40 HDR ports) leaves with 20 down / 20 up.
FabricSpec hdr200(FabricSpec s) { return net(std::move(s), Network::infiniband, "ConnectX-6 HDR 200 Gb/s", 25, Layout::rail, 20); }
// InfiniBand NDR: ConnectX-7 400 Gb/s = 50 GB/s per GPU (DGX H100/H200/B200, GB200 compute tray);
// rail-optimized, Quantum-2 QM9700 (64 NDR ports) leaves with 32 down / 32 up (non-blocking).
FabricSpec ndr400(FabricSpec s, std::string nic = "ConnectX-7 NDR 400 Gb/s") {
  return net(std::move(s), Network::infiniband, std::move(nic), 50, Layout::rail, 32);
}
// InfiniBand XDR: ConnectX-8 800 Gb/s = 100 GB/s per GPU; Quantum-X800 Q3400 (144 XDR ports)
// leaves with 72 down / 72 up. With planes = 2 the NIC's 800 Gb/s runs as 2 x 400 Gb/s on two
// identical planes whose switches split their 800G ports in two (assumed: 144 down / 144 up).
FabricSpec xdr800(FabricSpec s, int planes = 1) {
  return net(std::move(s), Network::infiniband, "ConnectX-8 XDR 800 Gb/s", 100, Layout::rail, 72 * planes, planes);
}
// RoCE / Spectrum-X at 400 Gb/s per GPU (BlueField-3 or ConnectX-7 SuperNIC), rail-optimized,
// Spectrum-4 SN5600 leaves (64 x 800G = 128 x 400G ports): 64 down / 64 up.
FabricSpec roce400(FabricSpec s) { return net(std::move(s), Network::roce, "RoCE 400 Gb/s (Spectrum-X)", 50, Layout::rail, 64); }
// RoCE at 2 x 100 Gb/s per GPU: OCI BM.GPU.B4.8 / GM4 (16 x 100 Gb/s per 8-GPU host = 25 GB/s per
// GPU). OCI does not publish the leaf layout: whole hosts per leaf, 32 GPU ports (4 hosts), assumed.
FabricSpec roce100(FabricSpec s) { return net(std::move(s), Network::roce, "RoCE 2 x 100 Gb/s", 25, Layout::node, 32); }
// AWS EFA: per-instance bandwidth over 8 GPUs (AWS instance-type pages): p4d 400 Gb/s = 6.25 GB/s
// per GPU (EFA v1, 4 x 100G), p5 and p5e (H200) 3200 Gb/s = 50 GB/s (EFA v2, 32 x 100G), p5en
// 3200 Gb/s = 50 GB/s (EFA v3, 16 x 200G), p6-b200 3200 Gb/s = 50 GB/s (EFA v4, 8 x 400G),
// p6-b300 6400 Gb/s = 100 GB/s (EFA v4). AWS
// does not publish its leaf layout: whole instances per leaf, 32 GPU ports (4 instances), assumed.
// p5 / p5e / p5en / p6-b200 / p6-b300 also run aws-ofi-nccl's region tuner, which NCCL >= 2.21 loads from
// the net plugin by default (sim/aws_ofi_tuner.hpp; the plugin picks p5's tables on p5e); p4d has
// none.
FabricSpec efa(FabricSpec s, std::string nic, double nic_GBps, double step_latency_us,
               TunerPlugin tuner = TunerPlugin::none) {
  FabricSpec f = net(std::move(s), Network::efa, std::move(nic), nic_GBps, Layout::node, 32);
  f.net_step_latency_us = step_latency_us;
  f.tuner_plugin = tuner;
  return f;
}

const std::map<std::string, FabricSpec>& table() {
  static const std::map<std::string, FabricSpec> presets = [] {
    std::map<std::string, FabricSpec> m;
    const auto add = [&m](FabricSpec s) { m.emplace(s.name, std::move(s)); };
    add(hdr200(hgx_a100("a100-hdr200")));
    add(roce100(hgx_a100("a100-roce100")));
    add(ndr400(hgx_h100("h100-ndr400")));
    add(roce400(hgx_h100("h100-roce400")));
    add(ndr400(hgx_h100("h200-ndr400")));
    add(roce400(hgx_h100("h200-roce400")));
    add(ndr400(hgx_h800("h800-ndr400")));
    add(roce400(hgx_h800("h800-roce400")));
    add(hdr200(hgx_a800("a800-hdr200")));
    add(ndr400(hgx_b200("b200-ndr400")));
    add(roce400(hgx_b200("b200-roce400")));
    add(xdr800(hgx_b200("b200-xdr800")));
    add(ndr400(hgx_b200("b300-ndr400"), "ConnectX-8 at 400 Gb/s (NDR)"));
    add(xdr800(hgx_b200("b300-xdr800")));
    add(xdr800(hgx_b200("b300-xdr800-2plane"), 2));
    // NVL72 racks: one 400 Gb/s NIC per GPU by default (GB200 compute trays carry 4 x ConnectX-7);
    // --nic-GBps or a topology file override it. GB300's reference tray has ConnectX-8 at 800 Gb/s:
    // gb300-nvl72-xdr800.
    add(ndr400(nvl72("gb200-nvl72")));
    add(ndr400(nvl72("gb300-nvl72"), "400 Gb/s per GPU (default; ConnectX-8 runs 800: gb300-nvl72-xdr800)"));
    add(xdr800(nvl72("gb300-nvl72-xdr800")));
    // AWS's NVL72 (p6e-gb200 UltraServer: 18 p6e-gb200.36xlarge trays, 28.8 Tb/s of EFA v4 = 400
    // Gb/s per GPU); aws-ofi-nccl's tuner has no p6e tables, its platform table reports 35 us.
    add(efa(nvl72("gb200-nvl72-efa"), "EFA v4, 4 x 400 Gb/s per p6e-gb200 tray", 50, 35));
    add(efa(hgx_a100("p4d-efa"), "EFA v1, 4 x 100 Gb/s per instance", 6.25, 75));
    add(efa(hgx_h100("p5-efa"), "EFA v2, 32 x 100 Gb/s per instance", 50, 20, TunerPlugin::aws_ofi_p5));
    add(efa(hgx_h100("p5e-efa"), "EFA v2, 32 x 100 Gb/s per instance", 50, 20, TunerPlugin::aws_ofi_p5));
    add(efa(hgx_h100("p5en-efa"), "EFA v3, 16 x 200 Gb/s per instance", 50, 18, TunerPlugin::aws_ofi_p5en));
    add(efa(hgx_b200("p6-b200-efa"), "EFA v4, 8 x 400 Gb/s per instance", 50, 35, TunerPlugin::aws_ofi_p6));
    add(efa(hgx_b200("p6-b300-efa"), "EFA v4, 6400 Gb/s per instance", 100, 35, TunerPlugin::aws_ofi_p6_b300));
    return m;
  }();
  return presets;
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, spec] : table()) names.push_back(name);
  return names;
}

FabricSpec preset(const std::string& name, const std::string& flag) {
  const std::size_t at = name.find('@');
  const std::string base = name.substr(0, at);
  const auto it = table().find(base);
  if (it == table().end()) {
    std::string known;
    for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
    throw_bad_usage(flag, name, "one of " + known + " (an NVL72 preset optionally with @<GPUs used per rack>)");
  }
  if (at == std::string::npos) return it->second;
  // A job on part of each rack: the NVLink domain it sees is the trays it holds (a 16-tray job on
  // 18-tray NVL72 racks sees 64-GPU domains), everything else is the rack's.
  FabricSpec spec = it->second;
  const std::string count = name.substr(at + 1);
  const int per_host = spec.gpus_per_host;
  const int rack = spec.gpus_per_nvlink_domain;
  // At least two trays: a one-tray domain is the host, which --gpus-per-node would then resize.
  const std::string expected = "<preset>@<GPUs per NVLink domain>: a whole number of " + std::to_string(per_host) +
                               "-GPU trays from " + std::to_string(2 * per_host) + " to " + std::to_string(rack);
  if (rack == per_host) {
    std::string racks;
    for (const auto& [n, s] : table())
      if (s.gpus_per_nvlink_domain > s.gpus_per_host) racks += (racks.empty() ? "" : ", ") + n;
    throw_bad_usage(flag, name, "@<GPUs> only on presets whose NVLink domain spans hosts (" + racks + "); " + base +
                                    "'s domain is its host: use --gpus-per-node");
  }
  const std::optional<double> v = to_number(count);
  if (!v || *v != std::floor(*v) || *v < 2 * per_host || *v > rack) throw_bad_usage(flag, name, expected);
  const int gpus = static_cast<int>(*v);
  if (gpus % per_host != 0) throw_bad_usage(flag, name, expected);
  spec.gpus_per_nvlink_domain = gpus;
  spec.name = gpus == rack ? base : base + "@" + std::to_string(gpus);
  return spec;
}

}  // namespace dionsim::topo
