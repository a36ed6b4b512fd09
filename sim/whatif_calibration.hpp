#pragma once
// Calibration file of the kernel-time model (`dionsim whatif --calibration FILE`), JSON:
//
//   {
//     "schema": "dionsim.kernel-calibration/1",     required, exactly this
//     "name": "seed-h100-1node",                    optional, shown in output
//     "hardware": "h100-sxm",                       optional base preset (else --hardware)
//     "peak_bf16_TFLOPs": 989.4, "hbm_GBps": 3350,  optional overrides of the preset
//     "hbm_efficiency": 0.8, "launch_gap_us": 2.0,
//     "gemm_efficiency_scale": 1.4,                 multiplier on the anchors' GEMM efficiency
//     "hbm_efficiency_by_kernel": {"post": 0.7},    per kernel class
//     "overlap_slowdown_by_kernel": {"ns_gemm": 1.87}, slower while a collective is in flight
//     "kernel_times": [{"kernel": "pack", "size": 1.2e9, "time_us": 850.0}],
//     "notes": "free text"
//   }
//
// `size` is FLOPs for GEMM classes (name contains "gemm") and HBM bytes for the others, as in
// KernelModel. Unknown keys are errors; every error names the file and the key.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/kernel_model.hpp"

namespace dionsim::sim {

struct WhatifConfig;
struct WhatifStudy;

// What a step-model calibration (`dionsim calibrate --measured CSV|--db`) sets beside the kernel
// model: forward/backward compute, the NIC efficiency the FSDP rings and all-to-alls see, and the
// all-to-all calibration of WhatifConfig. Absent = the preset / command line as is.
struct StepCalibration {
  std::optional<double> fwd_bwd_ms;
  std::optional<double> nic_efficiency;
  std::optional<double> alltoall_intra_efficiency, alltoall_inter_efficiency, alltoall_latency_us;
  std::optional<double> rank_skew_ms;  // WhatifConfig::rank_skew_ms unless the command line set it
  std::optional<double> collective_hbm_slowdown;  // likewise WhatifConfig::collective_hbm_slowdown
  std::optional<double> host_launch_us;  // WhatifConfig::host_launch_us unless the command line set it
};

inline constexpr const char* kKernelCalibrationSchema = "dionsim.kernel-calibration/1";

struct KernelCalibration {
  std::string name;
  KernelModelConfig config;
  MeasuredKernelTimes measured;
  std::map<std::int64_t, double> alltoall_algbw_GBps_by_world;  // measured all-to-alls, by world size
  std::vector<std::string> unused_parameters;                   // of a `dionsim calibrate` file
  StepCalibration step;
};

// Sets the fitted values on a configuration: the all-to-all calibration, the fabric's
// nic_efficiency, and fwd_bwd_ms when the configuration has neither fwd_bwd_ms nor mfu.
void apply_step_calibration(const StepCalibration& step, WhatifConfig& config);
// The same for a study: its base and every fabric of the sweep.
void apply_step_calibration(const StepCalibration& step, WhatifStudy& study);

// `base` is the preset the file's overrides apply to (unless the file names its own "hardware").
// Throws IoError (unreadable), InputError (bad JSON, wrong schema, unknown key, bad value).
[[nodiscard]] KernelCalibration load_kernel_calibration(const std::string& path, const Hardware& base);
[[nodiscard]] KernelCalibration parse_kernel_calibration(const std::string& text, const std::string& where,
                                                         const Hardware& base);

// The fitted parameters of a `dionsim calibrate` file become a KernelCalibration through the
// calibration parameter table (analysis/calibration/parameters.hpp).

}  // namespace dionsim::sim
