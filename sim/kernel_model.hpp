#pragma once
// Kernel-time model: how long one GPU kernel class of an optimizer phase runs on one GPU.
//
//   time = measured (by kernel class and size, interpolated)            when a table has the class
//        = max(FLOPs / (peak · eff_gemm(shape)), bytes / (HBM · eff_hbm)) + launches · launch_gap
//                                                                        otherwise (roofline)
//
// eff_gemm(shape) comes from measured bf16 GEMM throughputs (../shared/data/h200-anchors.csv),
// interpolated in log(FLOPs of one GEMM): small GEMMs (1280×1280×5120: 475 TFLOP/s on H200) run
// far below large ones (8192³: 775 TFLOP/s). A calibration may scale it (the seed's H100 Gram-NS
// ran at 97–99 % of peak, above what torch.matmul reaches, because Gram NS counts nominal FLOPs).
// Times are integer nanoseconds (STYLE.md point 6).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dionsim::sim {

using DurationNs = std::int64_t;
[[nodiscard]] inline double ns_to_ms(DurationNs ns) { return static_cast<double>(ns) * 1e-6; }

// A GPU model. Sources of the presets: kernel_model.cpp and docs/whatif.md ("GPU presets").
struct Hardware {
  std::string name;
  double peak_bf16_TFLOPs = 0.0;  // dense bf16 tensor-core peak, TFLOP/s (1e12)
  double hbm_GBps = 0.0;          // HBM bandwidth, GB/s (1e9)
  double hbm_efficiency = 0.0;    // fraction of hbm_GBps a streaming elementwise kernel reaches
  double launch_gap_us = 0.0;     // GPU-side gap per kernel launch (back-to-back launches)
  // Descriptive (not used by the kernel model; what the preset's datasheet says, for output):
  double hbm_GB = 0.0;            // HBM capacity, GB (1e9)
  int nvlink_generation = 0;      // 3, 4, 5
  double nvlink_GBps = 0.0;       // per GPU and direction (the datasheet's bidirectional total / 2)
  double power_W = 0.0;           // maximum board / module power of the GPU
};

// a100-sxm, h100-sxm, h200, b200, b300, gb200, gb300. Throws UsageError naming `flag` (and the
// known names) for another name.
[[nodiscard]] Hardware hardware_preset(std::string_view name, std::string_view flag);
[[nodiscard]] std::vector<std::string> hardware_preset_names();
[[nodiscard]] std::string hardware_preset_list();  // "a100-sxm, h100-sxm, …" for help texts
// Checks every field; throws InputError naming `where`, the field, the value and the expectation.
void validate(const Hardware& hardware, const std::string& where);

// `--hardware` value: a preset name, or a TOML file describing another GPU (a path with '/' or a
// name ending in .toml). File keys (units in the names; unknown keys are errors):
//   base = "h200"              # optional: start from a preset, the keys below override it
//   name, peak_bf16_TFLOPs, hbm_GBps, hbm_GB, hbm_efficiency, launch_gap_us, nvlink_generation,
//   nvlink_GBps, power_W
// Without base, name, peak_bf16_TFLOPs, hbm_GBps and hbm_GB are required; hbm_efficiency and
// launch_gap_us then default to the H200's measured 0.907 and 0.93 µs. Throws UsageError for an
// unknown preset, InputError ("FILE:LINE: KEY: got 'X', expected Y") for a bad file, IoError when
// it cannot be read.
[[nodiscard]] Hardware resolve_hardware(const std::string& preset_or_file, std::string_view flag);
[[nodiscard]] Hardware parse_hardware(const std::string& toml_text, const std::string& source_name);

// One measured GEMM throughput: an m×n×k bf16 GEMM (2·m·n·k FLOPs) at `TFLOPs`.
struct GemmAnchor {
  std::int64_t m = 0, n = 0, k = 0;
  double TFLOPs = 0.0;
};
// The gemm_bf16 rows of an anchors CSV (h200-anchors.csv format: what,world,shape,…,value,unit,…).
// Throws InputError (file:line) on a malformed gemm_bf16 row, IoError when the file can't be read.
[[nodiscard]] std::vector<GemmAnchor> read_gemm_anchors(const std::string& csv_path);
// The six gemm_bf16 rows of ../shared/data/h200-anchors.csv, compiled in so that the binary works
// without the shared folder (a test checks they equal the file).
[[nodiscard]] std::vector<GemmAnchor> h200_gemm_anchors();

// A measured GEMM (the DB's kernel_timings: (m × k)·(k × n) batched `batch` times in `time_us`)
// as an anchor: TFLOP/s = 2·m·n·k·batch / time.
[[nodiscard]] GemmAnchor gemm_anchor_from_timing(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
                                                 double time_us);

// GEMM efficiency (achieved / peak) vs the FLOPs of one GEMM: piecewise linear in log(FLOPs)
// through the anchors (anchors of equal FLOPs averaged), constant beyond the ends.
class GemmEfficiency {
 public:
  GemmEfficiency(const std::vector<GemmAnchor>& anchors, double anchor_peak_TFLOPs);
  [[nodiscard]] double at_flops(double gemm_flops) const;

 private:
  std::vector<std::pair<double, double>> points_;  // (log flops, efficiency), increasing x
};

// One kernel of a phase, as the plan describes it (optimizer/plan.hpp KernelWork) plus the NS
// matrix shape for GEMMs. rows/cols: the [rows, cols] matrix the kernel works on (0 = unknown).
struct KernelQuery {
  std::string kernel;          // class: ns_gemm, momentum_norms, select, pack, assemble, …
  double gemm_flops = 0.0;     // nominal GEMM FLOPs (0 for memory-bound classes)
  std::int64_t hbm_bytes = 0;  // bytes read + written
  std::int64_t launches = 0;
  std::int64_t rows = 0, cols = 0;
};

// Measured kernel times by class, interpolated in a size measure (FLOPs for GEMM classes, HBM
// bytes for the others). The DB's kernel_timings table and calibration files fill it.
class MeasuredKernelTimes {
 public:
  // size: FLOPs or bytes of the measured instance; time_ns > 0.
  void add(const std::string& kernel, double size, DurationNs time_ns);
  [[nodiscard]] bool has(std::string_view kernel) const;
  // Linear interpolation between the two nearest measured sizes; outside the measured range the
  // time scales proportionally from the nearest point (time/size constant), never below 1 ns.
  [[nodiscard]] std::optional<DurationNs> lookup(std::string_view kernel, double size) const;
  [[nodiscard]] bool empty() const { return table_.empty(); }

 private:
  std::map<std::string, std::vector<std::pair<double, DurationNs>>, std::less<>> table_;
};

struct KernelModelConfig {
  Hardware hardware;
  std::vector<GemmAnchor> gemm_anchors;  // measured GEMM throughputs
  double anchors_peak_TFLOPs = 0.0;      // peak of the GPU the anchors were measured on
  double gemm_efficiency_scale = 1.0;    // calibration multiplier on eff_gemm (capped at 1)
  std::map<std::string, double, std::less<>> hbm_efficiency_by_kernel;  // overrides hardware.hbm_efficiency
  std::map<std::string, double, std::less<>> TFLOPs_by_kernel;          // measured throughput: replaces peak·eff_gemm
  std::map<std::string, double, std::less<>> launch_gap_us_by_kernel;   // overrides hardware.launch_gap_us
  // >= 1: how much slower a kernel class runs while a collective is in flight on its GPU (NCCL
  // kernels take SMs and HBM bandwidth): e.g. NS GEMMs 753 vs 402 TFLOP/s in the H200 traces.
  std::map<std::string, double, std::less<>> overlap_slowdown_by_kernel;
};

// Default config for a preset: H200 anchors, the preset's HBM efficiency, no measured table.
[[nodiscard]] KernelModelConfig default_kernel_model_config(const Hardware& hardware);

class KernelModel {
 public:
  explicit KernelModel(KernelModelConfig config, MeasuredKernelTimes measured = {});

  // GPU time of the kernel (all its launches), ns, >= 0.
  [[nodiscard]] DurationNs time_ns(const KernelQuery& q) const;
  // The roofline alone (ignores measured times).
  [[nodiscard]] DurationNs roofline_ns(const KernelQuery& q) const;
  [[nodiscard]] double gemm_efficiency(const KernelQuery& q) const;
  [[nodiscard]] const KernelModelConfig& config() const { return config_; }
  [[nodiscard]] bool measured(std::string_view kernel) const { return measured_.has(kernel); }
  // 1 when the class has no slowdown configured.
  [[nodiscard]] double overlap_slowdown(std::string_view kernel) const;
  [[nodiscard]] bool models_contention() const { return !config_.overlap_slowdown_by_kernel.empty(); }

 private:
  KernelModelConfig config_;
  GemmEfficiency gemm_eff_;
  MeasuredKernelTimes measured_;
};

}  // namespace dionsim::sim
