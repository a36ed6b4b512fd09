#include "sim/whatif_calibration.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/files.hpp"
#include "common/error.hpp"
#include "common/json_input.hpp"
#include "common/parse.hpp"
#include "sim/whatif.hpp"

namespace dionsim::sim {

namespace {

double positive(const nlohmann::json& j, const std::string& where, const std::string& key, double max = 1e300) {
  if (!j.is_number() || !(j.get<double>() > 0.0) || j.get<double>() > max || !number_problem(j.get<double>()).empty()) {
    throw_bad_input(where, key, j.dump(),
                    max < 1e300 ? "a number in (0, " + std::to_string(max) + "]" : "a positive number");
  }
  return j.get<double>();
}

}  // namespace

KernelCalibration parse_kernel_calibration(const std::string& text, const std::string& where, const Hardware& base) {
  const nlohmann::json doc = parse_json_input(text, where);
  if (!doc.is_object()) {
    throw_bad_input(where, "document", doc.type_name(), "a JSON object");
  }
  if (!doc.contains("schema") || doc["schema"] != kKernelCalibrationSchema) {
    throw_bad_input(where, "schema", doc.contains("schema") ? doc["schema"].dump() : "(missing)",
                    std::string("'") + kKernelCalibrationSchema + "' (a kernel calibration for dionsim whatif)");
  }
  static const std::set<std::string> known{"schema",
                                           "name",
                                           "hardware",
                                           "peak_bf16_TFLOPs",
                                           "hbm_GBps",
                                           "hbm_efficiency",
                                           "launch_gap_us",
                                           "gemm_efficiency_scale",
                                           "hbm_efficiency_by_kernel",
                                           "overlap_slowdown_by_kernel",
                                           "kernel_times",
                                           "notes"};
  for (const auto& [key, value] : doc.items()) {
    if (!known.count(key)) {
      throw_bad_input(where, key, value.dump(), "one of the keys of the calibration schema (unknown key)");
    }
  }
  Hardware hw = base;
  if (doc.contains("hardware")) {
    if (!doc["hardware"].is_string()) throw_bad_input(where, "hardware", doc["hardware"].dump(), "a preset name");
    hw = hardware_preset(doc["hardware"].get<std::string>(), where + ": hardware");
  }
  if (doc.contains("peak_bf16_TFLOPs"))
    hw.peak_bf16_TFLOPs = positive(doc["peak_bf16_TFLOPs"], where, "peak_bf16_TFLOPs");
  if (doc.contains("hbm_GBps")) hw.hbm_GBps = positive(doc["hbm_GBps"], where, "hbm_GBps");
  if (doc.contains("hbm_efficiency")) hw.hbm_efficiency = positive(doc["hbm_efficiency"], where, "hbm_efficiency", 1.0);
  if (doc.contains("launch_gap_us")) {
    const auto& j = doc["launch_gap_us"];
    if (!j.is_number() || !(j.get<double>() >= 0.0)) throw_bad_input(where, "launch_gap_us", j.dump(), "a number >= 0");
    hw.launch_gap_us = j.get<double>();
  }
  for (const char* text_key : {"name", "notes"}) {  // doc.value() on a non-string threw a bare type_error
    if (doc.contains(text_key) && !doc[text_key].is_string()) {
      throw_bad_input(where, text_key, doc[text_key].dump(), "a string");
    }
  }
  KernelCalibration cal;
  cal.name = doc.value("name", where);
  cal.config = default_kernel_model_config(hw);
  if (doc.contains("gemm_efficiency_scale")) {
    cal.config.gemm_efficiency_scale = positive(doc["gemm_efficiency_scale"], where, "gemm_efficiency_scale");
  }
  if (doc.contains("hbm_efficiency_by_kernel")) {
    const auto& m = doc["hbm_efficiency_by_kernel"];
    if (!m.is_object()) throw_bad_input(where, "hbm_efficiency_by_kernel", m.dump(), "an object {kernel: efficiency}");
    for (const auto& [kernel, eff] : m.items()) {
      cal.config.hbm_efficiency_by_kernel[kernel] = positive(eff, where, "hbm_efficiency_by_kernel." + kernel, 1.0);
    }
  }
  if (doc.contains("overlap_slowdown_by_kernel")) {
    const auto& m = doc["overlap_slowdown_by_kernel"];
    if (!m.is_object())
      throw_bad_input(where, "overlap_slowdown_by_kernel", m.dump(), "an object {kernel: factor >= 1}");
    for (const auto& [kernel, f] : m.items()) {
      if (!f.is_number() || !(f.get<double>() >= 1.0)) {
        throw_bad_input(where, "overlap_slowdown_by_kernel." + kernel, f.dump(), "a factor >= 1");
      }
      cal.config.overlap_slowdown_by_kernel[kernel] = f.get<double>();
    }
  }
  if (doc.contains("kernel_times")) {
    const auto& list = doc["kernel_times"];
    if (!list.is_array()) throw_bad_input(where, "kernel_times", list.dump(), "an array of {kernel, size, time_us}");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const auto& e = list[i];
      const std::string key = "kernel_times[" + std::to_string(i) + "]";
      if (!e.is_object() || !e.contains("kernel") || !e["kernel"].is_string() || e.size() != 3 || !e.contains("size") ||
          !e.contains("time_us")) {
        throw_bad_input(where, key, e.dump(), "{\"kernel\": name, \"size\": FLOPs or bytes, \"time_us\": t}");
      }
      const double size = positive(e["size"], where, key + ".size");
      const double us = positive(e["time_us"], where, key + ".time_us");
      cal.measured.add(e["kernel"].get<std::string>(), size, std::llround(us * 1e3));
    }
  }
  return cal;
}

KernelCalibration load_kernel_calibration(const std::string& path, const Hardware& base) {
  return parse_kernel_calibration(read_input_file(path, "a kernel calibration JSON file", 64 << 20), path, base);
}


bool calibrated_fabric(const StepCalibration& step, const topo::FabricSpec& fabric) {
  if (step.fabric.empty()) return true;
  return fabric.name.substr(0, fabric.name.find('@')) == step.fabric;  // "h100-ndr400@25" is h100-ndr400
}

namespace {

void apply_gpu_part(const StepCalibration& step, WhatifConfig& config) {
  if (step.fwd_bwd_ms && !config.fwd_bwd_ms && !config.mfu) config.fwd_bwd_ms = step.fwd_bwd_ms;
  if (step.collective_hbm_slowdown && !config.collective_hbm_slowdown)
    config.collective_hbm_slowdown = step.collective_hbm_slowdown;
  if (step.host_launch_us && config.host_launch_us == 0.0) {
    config.host_launch_us = *step.host_launch_us;
    config.host_ahead = true;  // fitted on steady-state training steps: the host runs ahead
  }
}

void apply_fabric_part(const StepCalibration& step, WhatifConfig& config) {
  if (step.nic_efficiency) config.fabric.nic_efficiency = *step.nic_efficiency;
  if (step.alltoall_intra_efficiency) config.alltoall_intra_efficiency = *step.alltoall_intra_efficiency;
  if (step.alltoall_inter_efficiency) config.alltoall_inter_efficiency = *step.alltoall_inter_efficiency;
  if (step.alltoall_latency_us) config.alltoall_latency_us = *step.alltoall_latency_us;
  if (step.rank_skew_ms && !config.rank_skew_ms) config.rank_skew_ms = step.rank_skew_ms;
  if (step.collective_call_overhead_us) config.collective_options.call_overhead_us = *step.collective_call_overhead_us;
  if (step.collective_net_hop_extra_us) config.collective_options.net_hop_extra_us = *step.collective_net_hop_extra_us;
  if (step.collective_nvlink_scale) config.collective_options.nvlink_scale = *step.collective_nvlink_scale;
  if (step.collective_p2p_channel_GBps) config.collective_options.p2p_channel_GBps = *step.collective_p2p_channel_GBps;
}

}  // namespace

bool apply_step_calibration(const StepCalibration& step, WhatifConfig& config) {
  apply_gpu_part(step, config);
  if (!calibrated_fabric(step, config.fabric)) return false;
  apply_fabric_part(step, config);
  return true;
}

void apply_step_calibration(const StepCalibration& step, WhatifStudy& study) { apply_gpu_part(step, study.base); }

std::vector<std::string> apply_fabric_calibration(const StepCalibration& step, const WhatifStudy& study,
                                                  std::vector<WhatifConfig>& configs) {
  std::vector<std::string> others;
  for (auto& c : configs) {
    if (calibrated_fabric(step, c.fabric)) {
      apply_fabric_part(step, c);
      continue;
    }
    // The calibration's measured all-to-all bandwidths are of its fabric too.
    if (!study.base.alltoall_algbw_GBps) c.alltoall_algbw_GBps.reset();
    c.calibration += "; not on " + step.fabric + ": GPU parameters only";
    if (std::find(others.begin(), others.end(), c.fabric.name) == others.end()) others.push_back(c.fabric.name);
  }
  return others;
}

}  // namespace dionsim::sim
