#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "sim/kernel_model.hpp"

using namespace dionsim;
using namespace dionsim::sim;

TEST_CASE("compiled-in H200 anchors equal ../shared/data/h200-anchors.csv", "[kernel_model]") {
  const auto file = read_gemm_anchors(std::string(DIONSIM_SHARED_DIR) + "/data/h200-anchors.csv");
  const auto built = h200_gemm_anchors();
  REQUIRE(file.size() == built.size());
  for (std::size_t i = 0; i < file.size(); ++i) {
    CHECK(file[i].m == built[i].m);
    CHECK(file[i].n == built[i].n);
    CHECK(file[i].k == built[i].k);
    CHECK(file[i].TFLOPs == Approx(built[i].TFLOPs));
  }
}

TEST_CASE("GEMM efficiency goes through the anchors and is flat beyond them", "[kernel_model]") {
  const double peak = 989.4;
  const GemmEfficiency eff(h200_gemm_anchors(), peak);
  // 8192^3: 775.4 TFLOP/s; 5120^3: 701.
  CHECK(eff.at_flops(2.0 * 8192.0 * 8192 * 8192) == Approx(775.4 / peak));
  CHECK(eff.at_flops(2.0 * 5120.0 * 5120 * 5120) == Approx(701.0 / peak));
  // 1280x1280x5120 and 1280x5120x1280 have equal FLOPs: their mean.
  CHECK(eff.at_flops(2.0 * 1280.0 * 1280 * 5120) == Approx((475.0 + 453.4) / 2 / peak));
  // beyond the ends: clamped
  CHECK(eff.at_flops(1e6) == eff.at_flops(2.0 * 1280.0 * 1280 * 5120));
  CHECK(eff.at_flops(1e16) == Approx(775.4 / peak));
  // monotone between 5120^3 and 8192^3, strictly inside
  const double mid = eff.at_flops(1e12);
  CHECK(mid > 701.0 / peak);
  CHECK(mid < 775.4 / peak);
}

TEST_CASE("roofline: compute-bound GEMMs and memory-bound kernels", "[kernel_model]") {
  const auto hw = hardware_preset("h200", "--hardware");
  const KernelModel model(default_kernel_model_config(hw));
  const double gap_ns = hw.launch_gap_us * 1e3, eff = hw.hbm_efficiency;
  CHECK(eff == Approx(0.907));  // measured: bench/whatif/h200_probe_result.csv
  // One 8192^3 GEMM: 1.0995e12 FLOPs at 775.4 TFLOP/s = 1.418 ms, plus one launch gap.
  KernelQuery gemm{"ns_gemm", 2.0 * 8192.0 * 8192 * 8192, 0, 1, 8192, 8192};
  CHECK(model.time_ns(gemm) == Approx(2.0 * 8192.0 * 8192 * 8192 / 775.4e12 * 1e9 + gap_ns).epsilon(1e-6));
  // 4.8 GB of HBM traffic at 4.8 TB/s · eff = 1 ms / eff, plus 3 launch gaps
  KernelQuery ew{"momentum_norms", 0.0, 4'800'000'000, 3, 0, 0};
  CHECK(model.time_ns(ew) == Approx(1e6 / eff + 3 * gap_ns).epsilon(1e-6));
  // roofline is the max of both bounds
  KernelQuery both{"x_gemm", 1e9, 48'000'000'000, 0, 0, 0};
  CHECK(model.time_ns(both) == Approx(10.0 / eff * 1e6).epsilon(1e-6));
  // H100 has less HBM bandwidth than H200: the same memory-bound kernel is slower
  const KernelModel h100(default_kernel_model_config(hardware_preset("h100-sxm", "--hardware")));
  CHECK(h100.time_ns(ew) > model.time_ns(ew));
}

TEST_CASE("measured kernel times win over the roofline and interpolate", "[kernel_model]") {
  MeasuredKernelTimes table;
  table.add("pack", 1e6, 10'000);
  table.add("pack", 3e6, 20'000);
  const KernelModel model(default_kernel_model_config(hardware_preset("h100-sxm", "--hardware")), table);
  CHECK(model.time_ns({"pack", 0, 2'000'000, 1, 0, 0}) == 15'000);  // halfway
  CHECK(model.time_ns({"pack", 0, 6'000'000, 1, 0, 0}) == 40'000);  // proportional beyond
  CHECK(model.time_ns({"pack", 0, 500'000, 1, 0, 0}) == 5'000);
  // another class still takes the roofline
  KernelQuery unpack{"unpack", 0, 2'000'000, 1, 0, 0};
  CHECK(model.time_ns(unpack) == model.roofline_ns(unpack));
  CHECK(model.measured("pack"));
  CHECK_FALSE(model.measured("unpack"));
}

TEST_CASE("kernel model bad input", "[kernel_model]") {
  CHECK_THROWS_AS(hardware_preset("a100", "--hardware"), UsageError);
  MeasuredKernelTimes table;
  CHECK_THROWS_AS(table.add("pack", 0.0, 5), InputError);
  CHECK_THROWS_AS(table.add("pack", 1.0, 0), InputError);
  CHECK_THROWS_AS(read_gemm_anchors("/nonexistent/anchors.csv"), IoError);
  auto config = default_kernel_model_config(hardware_preset("h200", "--hardware"));
  config.hardware.hbm_efficiency = 1.5;
  CHECK_THROWS_AS(KernelModel(config), InputError);
}

TEST_CASE("a measured GEMM timing becomes an anchor", "[kernel_model]") {
  // 8192^3 in 1.418 ms = 775.4 TFLOP/s; a batch of 4 in 4x the time runs at the same rate
  const auto a = gemm_anchor_from_timing(8192, 8192, 8192, 1, 2.0 * 8192.0 * 8192 * 8192 / 775.4e12 * 1e6);
  CHECK(a.TFLOPs == Approx(775.4));
  const auto b = gemm_anchor_from_timing(1280, 1280, 5120, 4, 4 * 2.0 * 1280.0 * 1280 * 5120 / 475e12 * 1e6);
  CHECK(b.TFLOPs == Approx(475.0));
  CHECK(b.m == 1280);
  CHECK_THROWS_AS(gemm_anchor_from_timing(0, 1, 1, 1, 1.0), InputError);
  // anchors from timings drive the efficiency curve like the CSV's
  const GemmEfficiency eff({a, b}, 989.4);
  CHECK(eff.at_flops(2.0 * 8192.0 * 8192 * 8192) == Approx(775.4 / 989.4));
}

TEST_CASE("GPU presets: the datasheet figures, and GPU files for any other GPU", "[kernel_model]") {
  CHECK(hardware_preset_names() == std::vector<std::string>{"a100-sxm", "h100-sxm", "h200", "b200", "b300", "gb200", "gb300"});
  for (const auto& name : hardware_preset_names()) {
    INFO(name);
    const auto hw = hardware_preset(name, "--hardware");
    validate(hw, name);
    CHECK(hw.hbm_GB > 0);
    CHECK(hw.power_W > 0);
    CHECK(hw.nvlink_GBps == (hw.nvlink_generation == 3 ? 300 : hw.nvlink_generation == 4 ? 450 : 900));
  }
  CHECK(hardware_preset("b200", "x").peak_bf16_TFLOPs == 2250.0);  // 36 PFLOP/s sparse / 8 / 2
  CHECK(hardware_preset("gb200", "x").peak_bf16_TFLOPs == 2500.0);  // 360 PFLOP/s sparse / 72 / 2
  CHECK(hardware_preset("a100-sxm", "x").hbm_GBps == 2039.0);
  CHECK_THROWS_WITH(hardware_preset("h300", "--hardware"),
                    Catch::Contains("--hardware: got 'h300', expected one of a100-sxm, h100-sxm, h200, b200, b300, gb200, gb300"));
  const auto file = parse_hardware("base = \"b200\"\npower_W = 700\n", "b200-700W.toml");
  CHECK(file.name == "b200-700W.toml");
  CHECK(file.peak_bf16_TFLOPs == 2250.0);
  CHECK(file.power_W == 700.0);
  const auto fresh = parse_hardware("name = \"x\"\npeak_bf16_TFLOPs = 100\nhbm_GBps = 1000\nhbm_GB = 16\n", "x.toml");
  CHECK(fresh.hbm_efficiency == Approx(0.907));
  const auto fails = [](const std::string& text, const std::string& expected) {
    INFO(text);
    CHECK_THROWS_AS(parse_hardware(text, "g.toml"), InputError);
    CHECK_THROWS_WITH(parse_hardware(text, "g.toml"), Catch::Contains(expected));
  };
  fails("name = \"x\"\npeak_bf16_TFLOPs = 100\nhbm_GBps = 1000\n", "g.toml: hbm_GB: got '(missing)'");
  fails("base = \"h200\"\nhbm_GBps = -1\n", "g.toml:2: hbm_GBps: got '-1', expected a positive number");
  fails("base = \"h200\"\npeak_bf16_TFLOPs = nan\n", "g.toml:2: peak_bf16_TFLOPs: got 'nan', expected a finite number");
  fails("base = \"h200\"\nhbm_efficiency = 1.5\n", "g.toml:2: hbm_efficiency: got '1.5', expected a number in (0, 1]");
  fails("base = \"h200\"\nhbm_gbps = 1\n", "g.toml:2: hbm_gbps: got '1', expected no such key");
  fails("base = \"h900\"\n", "g.toml:1: base: got 'h900', expected one of a100-sxm");
  CHECK_THROWS_AS(resolve_hardware("/nonexistent/gpu.toml", "--hardware"), IoError);
}
