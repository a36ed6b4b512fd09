#include "sim/kernel_model.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <utility>

#include "common/csv.hpp"
#include "common/files.hpp"
#include "common/parse.hpp"
#include "common/error.hpp"

namespace dionsim::sim {

namespace {

// Sources of the presets (docs/whatif.md "GPU presets" has the table with links):
//  * dense bf16 peak: the datasheets quote bf16 tensor-core throughput with 2:4 sparsity; dense
//    is half. A100 SXM4 312 (datasheet: 312 dense / 624 sparse); H100 SXM5 and H200 SXM 989.4
//    (1,979 sparse); HGX B200 and HGX B300 36 PFLOP/s sparse per 8 GPUs = 2,250 dense per GPU;
//    GB200 NVL72 and GB300 NVL72 360 PFLOP/s sparse per 72 GPUs = 2,500 dense per GPU.
//  * HBM bandwidth / capacity: A100 80GB 2,039 GB/s, 80 GB (HBM2e); H100 SXM5 3,350 GB/s, 80 GB
//    (HBM3); H200 4,800 GB/s, 141 GB (HBM3e); HGX B200 64 TB/s and 1,440 GB per 8 GPUs = 8,000
//    GB/s, 180 GB; HGX B300 64 TB/s, 2.3 TB per 8 = 8,000 GB/s, 288 GB; GB200 NVL72 576 TB/s,
//    13.4 TB per 72 = 8,000 GB/s, 186 GB; GB300 NVL72 576 TB/s, 20.7 TB per 72 = 8,000 GB/s, 288 GB.
//  * NVLink: 3 = 600 GB/s, 4 = 900 GB/s, 5 = 1,800 GB/s bidirectional per GPU (halved here).
//  * power: A100 SXM 400 W, H100 SXM / H200 SXM up to 700 W, B200 (HGX) 1,000 W, B300 (HGX)
//    1,100 W, GB200 1,200 W and GB300 1,400 W per GPU (NVL72 module configurations).
//  * hbm_efficiency and launch_gap_us measured on one H200 (bench/whatif/probe_hbm_launch.py,
//    PyTorch 2.11, results in bench/whatif/h200_probe_result.csv): fp32 M += G streams at
//    4355 GB/s = 0.907 of 4800; 2000 one-element kernels replayed from a CUDA graph take 0.93 µs
//    each on the device. Every other preset carries both over (not measured on those GPUs; the
//    Blackwell memory system may reach another fraction). A calibration file overrides them.
const std::vector<Hardware>& presets() {
  static const std::vector<Hardware> table{
      {"a100-sxm", 312.0, 2039.0, 0.907, 0.93, 80.0, 3, 300.0, 400.0},
      {"h100-sxm", 989.4, 3350.0, 0.907, 0.93, 80.0, 4, 450.0, 700.0},
      {"h200", 989.4, 4800.0, 0.907, 0.93, 141.0, 4, 450.0, 700.0},
      {"b200", 2250.0, 8000.0, 0.907, 0.93, 180.0, 5, 900.0, 1000.0},
      {"b300", 2250.0, 8000.0, 0.907, 0.93, 288.0, 5, 900.0, 1100.0},
      {"gb200", 2500.0, 8000.0, 0.907, 0.93, 186.0, 5, 900.0, 1200.0},
      {"gb300", 2500.0, 8000.0, 0.907, 0.93, 288.0, 5, 900.0, 1400.0},
  };
  return table;
}

std::string trim(std::string s) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

bool is_gemm_class(std::string_view kernel) { return kernel.find("gemm") != std::string_view::npos; }

}  // namespace

Hardware hardware_preset(std::string_view name, std::string_view flag) {
  for (const auto& hw : presets()) {
    if (hw.name == name) {
      return hw;
    }
  }
  throw_bad_usage(flag, name, "one of " + hardware_preset_list() + " or a GPU file (.toml)");
}

std::string hardware_preset_list() {
  std::string out;
  for (const auto& hw : presets()) out += (out.empty() ? "" : ", ") + hw.name;
  return out;
}

void validate(const Hardware& hw, const std::string& where) {
  const auto positive = [](double v) { return std::isfinite(v) && v > 0.0; };
  const auto bad = [&where](const char* field, double v, const char* expected) {
    std::ostringstream s;
    s << v;
    throw_bad_input(where, field, s.str(), expected);
  };
  if (hw.name.empty()) throw_bad_input(where, "name", "(empty)", "a name for the GPU");
  if (!positive(hw.peak_bf16_TFLOPs)) bad("peak_bf16_TFLOPs", hw.peak_bf16_TFLOPs, "a positive finite TFLOP/s");
  if (!positive(hw.hbm_GBps)) bad("hbm_GBps", hw.hbm_GBps, "a positive finite GB/s");
  if (!positive(hw.hbm_GB)) bad("hbm_GB", hw.hbm_GB, "a positive finite capacity in GB");
  if (!(std::isfinite(hw.hbm_efficiency) && hw.hbm_efficiency > 0.0 && hw.hbm_efficiency <= 1.0)) {
    bad("hbm_efficiency", hw.hbm_efficiency, "a number in (0, 1]");
  }
  if (!(std::isfinite(hw.launch_gap_us) && hw.launch_gap_us >= 0.0)) bad("launch_gap_us", hw.launch_gap_us, "a finite number >= 0");
  if (hw.nvlink_generation < 0 || hw.nvlink_generation > 9) {
    bad("nvlink_generation", hw.nvlink_generation, "0 (none) or a generation in [1, 9]");
  }
  if (!(std::isfinite(hw.nvlink_GBps) && hw.nvlink_GBps >= 0.0)) bad("nvlink_GBps", hw.nvlink_GBps, "a finite GB/s >= 0");
  if (!(std::isfinite(hw.power_W) && hw.power_W >= 0.0)) bad("power_W", hw.power_W, "a finite number of W >= 0 (0 = unknown)");
}

std::vector<std::string> hardware_preset_names() {
  std::vector<std::string> names;
  for (const auto& hw : presets()) {
    names.push_back(hw.name);
  }
  return names;
}

std::vector<GemmAnchor> read_gemm_anchors(const std::string& csv_path) {
  const auto records = parse_csv(read_input_file(csv_path, "a GEMM anchors CSV file", 64 << 20), csv_path);
  std::vector<GemmAnchor> anchors;
  for (std::size_t r = 1; r < records.size(); ++r) {  // record 0 is the header
    const auto& fields = records[r].fields;
    if (is_blank(records[r]) || fields[0] != "gemm_bf16") {
      continue;
    }
    const std::string where = csv_path + ":" + std::to_string(records[r].line);
    if (fields.size() < 8) {
      throw_bad_input(where, "row", csv_row(fields), "at least 8 comma-separated fields");
    }
    GemmAnchor a;
    char x1 = 0, x2 = 0;
    std::istringstream shape(fields[2]);
    if (!(shape >> a.m >> x1 >> a.n >> x2 >> a.k) || x1 != 'x' || x2 != 'x' || a.m <= 0 || a.n <= 0 || a.k <= 0) {
      throw_bad_input(where, "shape", fields[2], "MxNxK with positive integers");
    }
    const std::optional<double> tflops = to_number(fields[6]);
    if (!tflops) throw_bad_input(where, "value", fields[6], "a number (TFLOP/s)");
    a.TFLOPs = *tflops;
    if (!(a.TFLOPs > 0.0) || trim(fields[7]) != "TFLOP/s") {
      throw_bad_input(where, "value", fields[6] + " " + fields[7], "a positive number in TFLOP/s");
    }
    anchors.push_back(a);
  }
  if (anchors.empty()) {
    throw_bad_input(csv_path, "gemm_bf16", "no rows", "at least one gemm_bf16 row");
  }
  return anchors;
}

std::vector<GemmAnchor> h200_gemm_anchors() {
  // ../shared/data/h200-anchors.csv, torch.matmul bf16 on one H200, mean of 50 after 5 warm-ups.
  return {{8192, 8192, 8192, 775.4}, {1280, 1280, 5120, 475.0}, {1280, 5120, 1280, 453.4},
          {5120, 5120, 5120, 701.0}, {2560, 2560, 5120, 580.7}, {1280, 1280, 20480, 644.6}};
}

GemmAnchor gemm_anchor_from_timing(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, double time_us) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0 || !(time_us > 0.0)) {
    throw_bad_input("kernel_timings", "gemm", std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k),
                    "positive dimensions, batch and time");
  }
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(batch);
  return {m, n, k, flops / (time_us * 1e-6) / 1e12};  // the batch runs at the rate of its GEMMs
}

GemmEfficiency::GemmEfficiency(const std::vector<GemmAnchor>& anchors, double anchor_peak_TFLOPs) {
  if (anchors.empty() || !(anchor_peak_TFLOPs > 0.0)) {
    throw InputError("GEMM efficiency: need at least one anchor and a positive peak");
  }
  std::map<double, std::pair<double, int>> by_flops;  // flops -> (sum of efficiencies, count)
  for (const auto& a : anchors) {
    const double flops = 2.0 * static_cast<double>(a.m) * static_cast<double>(a.n) * static_cast<double>(a.k);
    auto& slot = by_flops[flops];
    slot.first += a.TFLOPs / anchor_peak_TFLOPs;
    slot.second += 1;
  }
  for (const auto& [flops, acc] : by_flops) {
    points_.emplace_back(std::log(flops), std::min(1.0, acc.first / acc.second));
  }
}

double GemmEfficiency::at_flops(double gemm_flops) const {
  if (!(gemm_flops > 0.0)) {
    return points_.front().second;
  }
  const double x = std::log(gemm_flops);
  if (x <= points_.front().first) {
    return points_.front().second;
  }
  if (x >= points_.back().first) {
    return points_.back().second;
  }
  const auto hi =
      std::upper_bound(points_.begin(), points_.end(), x, [](double v, const auto& p) { return v < p.first; });
  const auto lo = hi - 1;
  const double t = (x - lo->first) / (hi->first - lo->first);
  return lo->second + t * (hi->second - lo->second);
}

void MeasuredKernelTimes::add(const std::string& kernel, double size, DurationNs time_ns) {
  if (!(size > 0.0) || time_ns <= 0) {
    throw_bad_input("measured kernel times", kernel, std::to_string(size) + " / " + std::to_string(time_ns) + " ns",
                    "a positive size and a positive time");
  }
  auto& points = table_[kernel];
  points.emplace_back(size, time_ns);
  std::sort(points.begin(), points.end());
}

bool MeasuredKernelTimes::has(std::string_view kernel) const { return table_.find(kernel) != table_.end(); }

std::optional<DurationNs> MeasuredKernelTimes::lookup(std::string_view kernel, double size) const {
  const auto it = table_.find(kernel);
  if (it == table_.end()) {
    return std::nullopt;
  }
  const auto& pts = it->second;
  const auto scaled = [size](const std::pair<double, DurationNs>& p) {
    return std::max<DurationNs>(1, std::llround(static_cast<double>(p.second) * size / p.first));
  };
  if (size <= pts.front().first) {
    return scaled(pts.front());
  }
  if (size >= pts.back().first) {
    return scaled(pts.back());
  }
  const auto hi = std::upper_bound(pts.begin(), pts.end(), size, [](double v, const auto& p) { return v < p.first; });
  const auto lo = hi - 1;
  const double t = (size - lo->first) / (hi->first - lo->first);
  return std::llround(static_cast<double>(lo->second) + t * static_cast<double>(hi->second - lo->second));
}

KernelModelConfig default_kernel_model_config(const Hardware& hardware) {
  KernelModelConfig config;
  config.hardware = hardware;
  config.gemm_anchors = h200_gemm_anchors();
  config.anchors_peak_TFLOPs = hardware_preset("h200", "anchors").peak_bf16_TFLOPs;
  return config;
}

KernelModel::KernelModel(KernelModelConfig config, MeasuredKernelTimes measured)
    : config_(std::move(config)),
      gemm_eff_(config_.gemm_anchors, config_.anchors_peak_TFLOPs),
      measured_(std::move(measured)) {
  const auto& hw = config_.hardware;
  if (!(hw.peak_bf16_TFLOPs > 0.0) || !(hw.hbm_GBps > 0.0) || !(hw.hbm_efficiency > 0.0) || hw.hbm_efficiency > 1.0 ||
      hw.launch_gap_us < 0.0) {
    throw_bad_input("hardware", hw.name, "peak/HBM/efficiency/launch gap",
                    "positive peak and HBM bandwidth, efficiency in (0, 1], launch gap >= 0");
  }
  for (const auto& [kernel, slowdown] : config_.overlap_slowdown_by_kernel) {
    if (!(slowdown >= 1.0)) {
      throw_bad_input("kernel model", "overlap_slowdown_by_kernel." + kernel, std::to_string(slowdown), "a factor >= 1");
    }
  }
  if (!(config_.gemm_efficiency_scale > 0.0)) {
    throw_bad_input("kernel model", "gemm_efficiency_scale", std::to_string(config_.gemm_efficiency_scale),
                    "a positive number");
  }
}

double KernelModel::overlap_slowdown(std::string_view kernel) const {
  const auto it = config_.overlap_slowdown_by_kernel.find(kernel);
  return it == config_.overlap_slowdown_by_kernel.end() ? 1.0 : it->second;
}

double KernelModel::gemm_efficiency(const KernelQuery& q) const {
  // One NS iteration's dominant GEMM on an [r, c] matrix is X·Xᵀ (or its Gram): m × m × n with
  // m = min(r, c), n = max(r, c) — the anchors 1280×1280×5120 and 1280×1280×20480 are these.
  double per_gemm_flops = q.gemm_flops;
  if (q.rows > 0 && q.cols > 0) {
    const double m = static_cast<double>(std::min(q.rows, q.cols));
    const double n = static_cast<double>(std::max(q.rows, q.cols));
    per_gemm_flops = 2.0 * m * m * n;
  }
  return std::min(1.0, gemm_eff_.at_flops(per_gemm_flops) * config_.gemm_efficiency_scale);
}

DurationNs KernelModel::roofline_ns(const KernelQuery& q) const {
  const auto& hw = config_.hardware;
  double seconds = 0.0;
  if (q.gemm_flops > 0.0) {
    const auto measured = config_.TFLOPs_by_kernel.find(q.kernel);
    const double flops_per_s = measured != config_.TFLOPs_by_kernel.end()
                                   ? measured->second * 1e12
                                   : hw.peak_bf16_TFLOPs * 1e12 * gemm_efficiency(q);
    seconds = q.gemm_flops / flops_per_s;
  }
  if (q.hbm_bytes > 0) {
    const auto it = config_.hbm_efficiency_by_kernel.find(q.kernel);
    const double eff = it != config_.hbm_efficiency_by_kernel.end() ? it->second : hw.hbm_efficiency;
    seconds = std::max(seconds, static_cast<double>(q.hbm_bytes) / (hw.hbm_GBps * 1e9 * eff));
  }
  const auto gap = config_.launch_gap_us_by_kernel.find(q.kernel);
  const double gap_us = gap != config_.launch_gap_us_by_kernel.end() ? gap->second : hw.launch_gap_us;
  seconds += static_cast<double>(q.launches) * gap_us * 1e-6;
  return std::llround(seconds * 1e9);
}

DurationNs KernelModel::time_ns(const KernelQuery& q) const {
  const double size = is_gemm_class(q.kernel) ? q.gemm_flops : static_cast<double>(q.hbm_bytes);
  if (size > 0.0) {
    if (auto t = measured_.lookup(q.kernel, size)) {
      return *t;
    }
  }
  return roofline_ns(q);
}

}  // namespace dionsim::sim
