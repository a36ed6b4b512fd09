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
//     "kernel_times": [{"kernel": "pack", "size": 1.2e9, "time_us": 850.0}],
//     "notes": "free text"
//   }
//
// `size` is FLOPs for GEMM classes (name contains "gemm") and HBM bytes for the others, as in
// KernelModel. Unknown keys are errors; every error names the file and the key.
#include <string>

#include "sim/kernel_model.hpp"

namespace dionsim::sim {

inline constexpr const char* kKernelCalibrationSchema = "dionsim.kernel-calibration/1";

struct KernelCalibration {
  std::string name;
  KernelModelConfig config;
  MeasuredKernelTimes measured;
};

// `base` is the preset the file's overrides apply to (unless the file names its own "hardware").
// Throws IoError (unreadable), InputError (bad JSON, wrong schema, unknown key, bad value).
[[nodiscard]] KernelCalibration load_kernel_calibration(const std::string& path, const Hardware& base);
[[nodiscard]] KernelCalibration parse_kernel_calibration(const std::string& text, const std::string& where,
                                                         const Hardware& base);

}  // namespace dionsim::sim
