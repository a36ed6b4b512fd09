#include "analysis/calibration/published_evidence.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "topologies/topology.hpp"

namespace dionsim::analysis {

namespace {

double round3(double v) { return std::floor(v * 1000.0 + 0.5) / 1000.0; }

}  // namespace

std::vector<PresetEvidence> preset_evidence(const std::vector<RowPrediction>& predictions) {
  std::map<std::string, std::array<std::vector<double>, 3>> ratios;
  for (const auto& p : predictions) {
    if (!p.skipped.empty()) continue;
    ratios[p.preset][static_cast<int>(regime_of(p.row->size_bytes))].push_back(p.dionsim_us / p.row->time_us);
  }
  std::vector<PresetEvidence> out;
  for (auto& [preset, by_regime] : ratios) {
    PresetEvidence e;
    e.preset = preset;
    for (int k = 0; k < 3; ++k) {
      auto& v = by_regime[static_cast<std::size_t>(k)];
      if (v.empty()) continue;
      std::sort(v.begin(), v.end());
      const std::size_t n = v.size();
      RegimeEvidence& r = e.regimes[static_cast<std::size_t>(k)];
      r.rows = static_cast<int>(n);
      for (const double q : v) r.within_goal += within_goal(static_cast<SizeRegime>(k), q);
      r.median_ratio = round3(n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
      r.ratio_low = round3(v[static_cast<std::size_t>(std::floor(0.05 * static_cast<double>(n - 1)))]);
      r.ratio_high = round3(v[static_cast<std::size_t>(std::ceil(0.95 * static_cast<double>(n - 1)))]);
    }
    out.push_back(std::move(e));
  }
  return out;
}

const std::vector<PresetEvidence>& published_preset_evidence() {
  // preset_evidence on ../shared/data/nccl-published/measurements.csv; {rows, within goal, median,
  // 5th, 95th percentile of dionsim / measured} for latency (<= 64 KiB), middle, bandwidth
  // (>= 64 MiB). tests/calibration/test_published_extrapolation.cpp recomputes it.
  static const std::vector<PresetEvidence> table = {
      {"a100-hdr200", {{{30, 28, 0.936, 0.732, 1.631}, {18, 6, 0.675, 0.399, 2.414}, {12, 0, 0.313, 0.245, 0.354}}}},
      {"a100-roce100", {{{}, {}, {8, 8, 0.95, 0.93, 1.008}}}},
      {"b200-ndr400", {{{28, 26, 0.69, 0.565, 1.168}, {18, 10, 0.88, 0.257, 1.688}, {12, 10, 1.047, 1.015, 1.116}}}},
      {"b200-roce400", {{{}, {6, 6, 1.052, 0.843, 1.17}, {16, 15, 0.979, 0.967, 1.143}}}},
      {"gb200-nvl72", {{{28, 0, 0.347, 0.334, 0.373}, {18, 0, 0.33, 0.264, 0.706}, {90, 35, 0.799, 0.376, 1.01}}}},
      {"gb300-nvl72", {{{}, {112, 68, 0.812, 0.13, 1.085}, {144, 94, 0.931, 0.281, 1.046}}}},
      {"h100-ndr400", {{{28, 26, 0.836, 0.623, 1.376}, {82, 66, 0.954, 0.461, 1.132}, {352, 311, 0.995, 0.842, 1.063}}}},
      {"p4d-efa", {{{28, 28, 1.008, 0.874, 1.029}, {18, 17, 1.017, 0.812, 1.264}, {12, 0, 1.283, 1.251, 1.653}}}},
      {"p5-efa", {{{142, 126, 0.826, 0.608, 0.982}, {110, 95, 0.903, 0.706, 1.13}, {242, 162, 1.004, 0.709, 1.187}}}},
      {"p5en-efa", {{{4, 3, 0.941, 0.162, 0.959}, {}, {2, 0, 1.247, 1.247, 1.248}}}},
  };
  return table;
}

std::optional<PresetEvidence> published_evidence_of(const std::string& preset) {
  // Part of each rack ("gb200-nvl72@64"): the racks' record, whose published runs span 4 to
  // 72 GPUs per domain.
  if (const std::size_t at = preset.find('@'); at != std::string::npos) return published_evidence_of(preset.substr(0, at));
  for (const auto& e : published_preset_evidence())
    if (e.preset == preset) return e;
  const auto known = topo::preset_names();
  if (std::find(known.begin(), known.end(), preset) == known.end()) return std::nullopt;
  // The fields that are output only (the name, the NIC's label) aside.
  const auto fabric_of = [](const std::string& name) {
    topo::FabricSpec s = topo::preset(name);
    s.name.clear();
    s.nic.clear();
    return s;
  };
  const topo::FabricSpec fabric = fabric_of(preset);
  for (const auto& e : published_preset_evidence())
    if (fabric_of(e.preset) == fabric) return e;
  return std::nullopt;
}

}  // namespace dionsim::analysis
