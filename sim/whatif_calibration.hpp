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
#include "topologies/topology.hpp"

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
  // The collective model's own parameters (`calibrate --nccl-tests`, analysis/calibration/
  // collective_fit.hpp): WhatifConfig::collective_options.
  std::optional<double> collective_call_overhead_us, collective_net_hop_extra_us, collective_nvlink_scale,
      collective_p2p_channel_GBps;
  // The fabric preset the calibration was fitted on: the fabric-scoped values (NIC and all-to-all
  // efficiencies, all-to-all latency, rank skew, the collective model's parameters, measured
  // all-to-all bandwidths) apply to
  // configurations on that fabric only — a NIC efficiency fitted on InfiniBand says nothing about
  // EFA. A fabric matches by its preset name (an overridden NIC bandwidth, "h100-ndr400@25", is
  // still that fabric: X GB/s × the fitted efficiency). "" = every fabric (kernel calibrations).
  std::string fabric;
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

// Whether the fabric-scoped values of `step` apply on `fabric` (StepCalibration::fabric).
[[nodiscard]] bool calibrated_fabric(const StepCalibration& step, const topo::FabricSpec& fabric);

// Sets the fitted values on a configuration: fwd_bwd_ms when the configuration has neither
// fwd_bwd_ms nor mfu, the host launch cost; and, when its fabric is the calibration's, the
// fabric's nic_efficiency and the all-to-all calibration. Returns whether the fabric part applied.
bool apply_step_calibration(const StepCalibration& step, WhatifConfig& config);
// A study's base, before expand(): the GPU-scoped values only (fwd/bwd, host launch).
void apply_step_calibration(const StepCalibration& step, WhatifStudy& study);
// Each expanded configuration of `study` on the calibration's fabric gets the fabric-scoped
// values; the others keep their presets (and lose the calibration's measured all-to-all
// bandwidths unless the command line pinned one), and their `calibration` record says so
// ("<label>; not on <fabric>: GPU parameters only"). Returns the names of those other fabrics,
// once each, in sweep order (for one line on stderr each).
std::vector<std::string> apply_fabric_calibration(const StepCalibration& step, const WhatifStudy& study,
                                                  std::vector<WhatifConfig>& configs);

// `base` is the preset the file's overrides apply to (unless the file names its own "hardware").
// Throws IoError (unreadable), InputError (bad JSON, wrong schema, unknown key, bad value).
[[nodiscard]] KernelCalibration load_kernel_calibration(const std::string& path, const Hardware& base);
[[nodiscard]] KernelCalibration parse_kernel_calibration(const std::string& text, const std::string& where,
                                                         const Hardware& base);

// The fitted parameters of a `dionsim calibrate` file become a KernelCalibration through the
// calibration parameter table (analysis/calibration/parameters.hpp).

}  // namespace dionsim::sim
