#include "analysis/calibration/parameters.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "common/error.hpp"

namespace dionsim::analysis {

namespace {

using sim::KernelCalibration;
using sim::Hardware;

// Each apply sets one field; `s` is a family's suffix.
void ns_tflops(double v, std::string_view, KernelCalibration& c, const Hardware&) {
  c.config.TFLOPs_by_kernel["ns_gemm"] = v;
}
void ns_efficiency(double v, std::string_view, KernelCalibration& c, const Hardware& base) {
  c.config.TFLOPs_by_kernel["ns_gemm"] = v * base.peak_bf16_TFLOPs;
}
void ns_overhead(double v, std::string_view, KernelCalibration& c, const Hardware&) {
  c.config.launch_gap_us_by_kernel["ns_gemm"] = v;
}
void ns_overlap(double v, std::string_view, KernelCalibration& c, const Hardware&) {
  c.config.overlap_slowdown_by_kernel["ns_gemm"] = v;
}
void hbm_by_class(double v, std::string_view s, KernelCalibration& c, const Hardware&) {
  c.config.hbm_efficiency_by_kernel[std::string(s)] = v;
}
void non_gemm_hbm(double v, std::string_view, KernelCalibration& c, const Hardware& base) {
  c.config.hbm_efficiency_by_kernel.emplace("ns_gemm", base.hbm_efficiency);  // NS operands keep the preset's
  c.config.hardware.hbm_efficiency = v;
}
void launch_gap(double v, std::string_view, KernelCalibration& c, const Hardware&) {
  c.config.hardware.launch_gap_us = v;
}
// A step-model field of the calibration (sim::StepCalibration), set as it is.
using Step = sim::StepCalibration;
template <std::optional<double> Step::*field>
void step(double v, std::string_view, KernelCalibration& c, const Hardware&) {
  c.step.*field = v;
}
void a2a_algbw(double v, std::string_view s, KernelCalibration& c, const Hardware&) {
  c.alltoall_algbw_GBps_by_world[std::stoll(std::string(s))] = v;
}
// Read with its isolated twin (kernel_calibration_from_parameters), nothing of its own.
void with_isolated(double, std::string_view, KernelCalibration&, const Hardware&) {}

using R = ParameterRange;
using S = ParameterScope;

// The step fit frees the rows with fit bounds, in this order (the order is part of the fit's
// numerics: keep it). fwd_bwd_ms's start is derived from the runs (step wall − optimizer window).
const std::vector<ParameterSpec> kParameters = {
    {"fwd_bwd_ms", "", "ms", R::time, 0, 0, S::hardware, FitBounds{1.0, 1e5, 400.0}, step<&Step::fwd_bwd_ms>,
     "forward+backward compute per step"},
    {"ns_gemm_efficiency", "", "", R::efficiency, 0, 0, S::hardware, FitBounds{0.01, 1.0, 0.7}, ns_efficiency,
     "NS GEMM throughput / dense bf16 peak"},
    {"hbm_efficiency.", "*", "", R::efficiency, 0, 0, S::hardware, FitBounds{0.01, 1.0, 0.5}, hbm_by_class,
     "HBM efficiency of a non-GEMM kernel class (the fit joins classes used by the same scopes)"},
    {"nic_efficiency", "", "", R::efficiency, 0, 0, S::fabric, FitBounds{0.01, 1.0, 0.7}, step<&Step::nic_efficiency>,
     "achieved / nominal NIC bandwidth (FSDP rings, all-to-all base)"},
    {"alltoall_intra_efficiency", "", "", R::efficiency, 0, 0, S::fabric, FitBounds{0.01, 1.0, 0.7},
     step<&Step::alltoall_intra_efficiency>,
     "one-node all-to-all: achieved / the fabric's NVLink time"},
    {"alltoall_inter_efficiency", "", "", R::efficiency, 0, 0, S::fabric, FitBounds{0.01, 1.0, 0.7},
     step<&Step::alltoall_inter_efficiency>,
     "multi-node all-to-all: achieved / the fabric's NIC time"},
    {"alltoall_latency_us", "", "us", R::time, 0, 0, S::fabric, FitBounds{0.0, 5000.0, 20.0},
     step<&Step::alltoall_latency_us>,
     "fixed cost per all-to-all"},
    {"rank_skew_ms", "", "ms", R::time, 0, 0, S::fabric, FitBounds{0.0, 100.0, 0.5}, step<&Step::rank_skew_ms>,
     "spread of the ranks' arrival at the step's first collective (sigma)"},
    // Not fitted: collective_hbm_slowdown (fitted with the skew on the seed runs it comes out at
    // 1.02 ± 1.95; docs/calibration.md).
    {"ns_gemm_overlap_slowdown", "", "", R::factor, 0, 0, S::hardware, FitBounds{1.0, 4.0, 1.2}, ns_overlap,
     "NS GEMMs run this much slower beside a collective"},
    {"host_launch_us", "", "us", R::time, 0, 0, S::hardware, FitBounds{0.0, 1000.0, 5.0}, step<&Step::host_launch_us>,
     "host time per launch (the host runs ahead of the GPU)"},
    {"launch_gap_us", "", "us", R::time, 0, 0, S::hardware, std::nullopt, launch_gap,
     "GPU gap per kernel launch (the step fit holds it at 0)"},
    {"non_gemm_hbm_efficiency", "", "", R::efficiency, 0, 0, S::hardware, std::nullopt, non_gemm_hbm,
     "HBM efficiency of every non-GEMM kernel (NS GEMM operands keep the preset's)"},
    {"collective_hbm_slowdown", "", "", R::bounded, 1.0, 100.0, S::hardware, std::nullopt,
     step<&Step::collective_hbm_slowdown>,
     "collectives run this much slower beside a memory-bound kernel"},
    {"ns_gemm_isolated_tflops", "", "TFLOP/s", R::throughput, 0, 0, S::hardware, std::nullopt, ns_tflops,
     "NS GEMM throughput with no collective in flight (traces)"},
    {"ns_gemm_overlapped_tflops", "", "TFLOP/s", R::throughput, 0, 0, S::hardware, std::nullopt, with_isolated,
     "NS GEMM throughput beside an NCCL kernel (traces; with the isolated one: the overlap slowdown)"},
    {"ns_gemm_isolated_overhead_us", "", "us", R::time, 0, 0, S::hardware, std::nullopt, ns_overhead,
     "fixed cost per NS GEMM (traces)"},
    // The collective model's parameters (calibrate --nccl-tests, collective_fit.hpp; its bounds).
    {"collective_call_overhead_us", "", "us", R::bounded, 0.0, 1e4, S::fabric, std::nullopt,
     step<&Step::collective_call_overhead_us>,
     "collective model: cost once per call (launch, group, proxy wake-up)"},
    {"collective_net_hop_extra_us", "", "us", R::bounded, -2.5, 1e3, S::fabric, std::nullopt,
     step<&Step::collective_net_hop_extra_us>,
     "collective model: added to every inter-node step, beyond NCCL's / the fabric's"},
    {"collective_nvlink_scale", "", "", R::bounded, 0.01, 100.0, S::fabric, std::nullopt,
     step<&Step::collective_nvlink_scale>,
     "collective model: factor on NCCL's NVLink rate (the model caps it at the nominal rate)"},
    {"collective_p2p_channel_GBps", "", "GB/s", R::bounded, 1.0, 1e3, S::fabric, std::nullopt,
     step<&Step::collective_p2p_channel_GBps>,
     "collective model: the rate one NCCL p2p channel moves a send's part at (send/recv, all-to-all)"},
    {"nccl_all_to_all_w", "_algbw_GBps", "GB/s", R::throughput, 0, 0, S::fabric, std::nullopt, a2a_algbw,
     "all-to-alls of world W pinned to this algorithm bandwidth (anchors: _w<W>_, nccl-tests: _w<W>_n<N>_)"},
};

// %g: "0.5", "1e+300", "nan" — the value as a user would have written it.
std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// At most 7 digits: a world size, and std::stoll in a2a_algbw cannot overflow (issue 18).
bool all_digits(std::string_view s) {
  return !s.empty() && s.size() <= 7 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

const std::vector<ParameterSpec>& calibration_parameters() { return kParameters; }

const ParameterSpec* find_parameter(std::string_view name, std::string* suffix) {
  for (const auto& p : kParameters) {
    if (!p.family()) {
      if (name == p.name) return &p;
      continue;
    }
    if (!name.starts_with(p.name) || name.size() <= p.name.size()) continue;
    std::string_view rest = name.substr(p.name.size());
    if (p.suffix != "*") {  // a numeric middle: nccl_all_to_all_w<W>_algbw_GBps
      if (!rest.ends_with(p.suffix)) continue;
      rest.remove_suffix(p.suffix.size());
      // "<W>" (anchors) or "<W>_n<N>" (nccl-tests: W ranks on N hosts); the world pins.
      const auto n = rest.find("_n");
      if (!all_digits(rest.substr(0, n)) || (n != std::string_view::npos && !all_digits(rest.substr(n + 2)))) continue;
    }
    if (suffix) *suffix = std::string(rest);
    return &p;
  }
  return nullptr;
}

std::string parameter_name(const ParameterSpec& spec, std::string_view suffix) {
  if (!spec.family()) return std::string(spec.name);
  return std::string(spec.name) + std::string(suffix) + (spec.suffix == "*" ? "" : std::string(spec.suffix));
}

void check_parameter(const ParameterSpec& spec, const std::string& name, double value, const std::string& where) {
  const auto bad = [&](const char* expected) { throw_bad_input(where, name, number(value), expected); };
  switch (spec.range) {
    case R::efficiency:
      if (!(value > 0.0 && value <= 1.0)) bad("an efficiency in (0, 1]");
      break;
    case R::time:
      if (!(value >= 0.0 && std::isfinite(value))) bad("a time >= 0");
      break;
    case R::factor:
      if (!(value >= 1.0 && std::isfinite(value))) bad("a factor >= 1");
      break;
    case R::throughput:
      if (!(value > 0.0 && std::isfinite(value))) bad("a positive throughput");
      break;
    case R::bounded:
      if (!(value >= spec.valid_lower && value <= spec.valid_upper)) {
        throw_bad_input(where, name, number(value),
                        "a factor in [" + number(spec.valid_lower) + ", " + number(spec.valid_upper) + "]");
      }
      break;
  }
}

std::optional<GpuPreset> gpu_preset_of(const std::string& hardware_label) {
  std::string l;
  for (char c : hardware_label) l.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (l.find("pcie") != std::string::npos) return std::nullopt;  // no PCIe preset: other clocks and power
  // Longest names first: "gb200" contains "b200".
  static const std::pair<const char*, GpuPreset> kGpus[] = {
      {"gb300", {"gb300", "gb300-nvl72"}}, {"gb200", {"gb200", "gb200-nvl72"}}, {"b300", {"b300", "b300-ndr400"}},
      {"b200", {"b200", "b200-ndr400"}},   {"h200", {"h200", "h200-ndr400"}},   {"h100", {"h100-sxm", "h100-ndr400"}},
      {"a100", {"a100-sxm", "a100-hdr200"}},
  };
  for (const auto& [key, preset] : kGpus) {
    if (l.find(key) != std::string::npos) return preset;
  }
  return std::nullopt;
}

std::optional<std::string> gpu_label_of_fabric(const std::string& fabric_preset) {
  const std::string base = fabric_preset.substr(0, fabric_preset.find('@'));
  // Longest prefixes first: "p5en-" before "p5-", "gb200-" before "b200-".
  static const std::pair<const char*, const char*> kFabrics[] = {
      {"gb300-", "GB300"}, {"gb200-", "GB200"}, {"b300-", "B300"}, {"b200-", "B200"}, {"h200-", "H200"},
      {"h100-", "H100"},   {"a100-", "A100"},   {"p5en-", "H200"}, {"p5e-", "H200"},  {"p5-", "H100"},
      {"p4d-", "A100"},    {"p6-b200-", "B200"}, {"p6-b300-", "B300"},
  };
  for (const auto& [prefix, gpu] : kFabrics) {
    if (base.rfind(prefix, 0) == 0) return std::string(gpu);
  }
  return std::nullopt;
}

std::string known_gpu_labels() {
  return "a GPU with a preset: A100, H100, H200, B200, B300, GB200 or GB300 (SXM; a label containing one, e.g. "
         "'NVIDIA H100 80GB HBM3')";
}

std::map<std::string, double> parameters_for_ns(const std::map<std::string, double>& parameters,
                                                const std::string& ns_variant) {
  std::map<std::string, double> out;
  for (const auto& [key, value] : parameters) {
    if (key.find('@') == std::string::npos) out.emplace(key, value);
  }
  for (const auto& [key, value] : parameters) {
    const auto at = key.find('@');
    if (at != std::string::npos && key.substr(at + 1) == ns_variant) out[key.substr(0, at)] = value;
  }
  return out;
}

sim::KernelCalibration kernel_calibration_from_parameters(const std::string& name, const std::string& hardware_label,
                                                          const std::map<std::string, double>& parameters,
                                                          const sim::Hardware& base, const std::string& fabric) {
  // "H200" / "NVIDIA H200" vs preset "h200"; "H100 …" vs "h100-sxm"; "GB200" is not "b200". A GPU
  // file is not its base preset (sim/hardware_file.cpp names it after the file): no calibration
  // of a preset GPU applies to it.
  const auto of_label = gpu_preset_of(hardware_label);
  if (!hardware_label.empty() && (!of_label || of_label->hardware != base.name)) {
    throw_bad_input(name, "hardware", hardware_label,
                    "the GPU of --hardware (" + base.name + "): a calibration applies to the GPU it was fitted on");
  }
  sim::KernelCalibration cal;
  cal.name = name;
  cal.config = sim::default_kernel_model_config(base);
  cal.step.fabric = fabric;
  // In name order: of two rows setting one field (ns_gemm_efficiency, ns_gemm_isolated_tflops) the
  // later name wins, as the calibration file has always been read.
  for (const auto& [key, value] : parameters) {
    std::string suffix;
    const ParameterSpec* spec = find_parameter(key, &suffix);
    if (spec == nullptr || key.find('@') != std::string::npos) {
      cal.unused_parameters.push_back(key);
      continue;
    }
    check_parameter(*spec, key, value, name);
    spec->apply(value, suffix, cal, base);
  }
  // NS GEMMs beside an NCCL kernel: the traced slowdown (isolated / overlapped throughput).
  const auto iso = parameters.find("ns_gemm_isolated_tflops");
  const auto ovl = parameters.find("ns_gemm_overlapped_tflops");
  if (iso != parameters.end() && ovl != parameters.end()) {
    cal.config.overlap_slowdown_by_kernel["ns_gemm"] = std::max(1.0, iso->second / ovl->second);
  } else if (ovl != parameters.end()) {
    cal.unused_parameters.push_back(ovl->first);
  }
  return cal;
}

}  // namespace dionsim::analysis
