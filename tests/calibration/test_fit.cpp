#include <catch2/catch.hpp>
#include <unistd.h>  // getpid: per-process temporary files
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "analysis/calibration/fit.hpp"
#include "analysis/calibration/fit_calibration.hpp"
#include "common/error.hpp"

using namespace dionsim;
using namespace dionsim::analysis;
using nlohmann::json;

namespace {

const std::filesystem::path kData = std::filesystem::path(DIONSIM_SHARED_DIR) / "data";

bool within(double estimate, double truth, double std_error, double sigmas) {
  return std::abs(estimate - truth) <= sigmas * std_error;
}

std::string input_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("linear least squares: exact data gives exact parameters and zero errors", "[fit]") {
  Eigen::MatrixXd x(4, 2);
  x << 1, 0, 1, 1, 1, 2, 1, 3;
  const Eigen::VectorXd y = x * Eigen::Vector2d(3.0, -2.0);
  const LinearFit f = fit_weighted_linear(x, y);
  CHECK(f.params[0] == Approx(3.0));
  CHECK(f.params[1] == Approx(-2.0));
  CHECK(f.std_errors[0] == Approx(0.0).margin(1e-9));
  CHECK(f.r_squared == Approx(1.0));
  CHECK(f.dof == 2);
}

TEST_CASE("weighted mean: parameter and standard error match the closed form", "[fit]") {
  // y = β with weights w: β̂ = Σwy/Σw, se² = σ̂²/Σw with σ̂² = Σw(y−β̂)²/(n−1).
  const Eigen::VectorXd y = (Eigen::VectorXd(5) << 1.0, 2.0, 4.0, 3.5, 2.5).finished();
  const Eigen::VectorXd w = (Eigen::VectorXd(5) << 1.0, 2.0, 0.5, 1.0, 4.0).finished();
  const LinearFit f = fit_weighted_linear(Eigen::MatrixXd::Ones(5, 1), y, w);
  const double mean = (w.array() * y.array()).sum() / w.sum();
  const double s2 = (w.array() * (y.array() - mean).square()).sum() / 4.0;
  CHECK(f.params[0] == Approx(mean));
  CHECK(f.std_errors[0] == Approx(std::sqrt(s2 / w.sum())));
}

TEST_CASE("synthetic noisy lines: the truth lies within one standard error about 68% of the time", "[fit]") {
  std::mt19937_64 rng(42);
  std::normal_distribution<double> noise(0.0, 0.5);
  int inside_intercept = 0, inside_slope = 0;
  const int trials = 400;
  for (int t = 0; t < trials; ++t) {
    Eigen::MatrixXd x(20, 2);
    Eigen::VectorXd y(20);
    for (int i = 0; i < 20; ++i) {
      x(i, 0) = 1;
      x(i, 1) = i * 0.5;
      y[i] = 1.5 + 0.8 * x(i, 1) + noise(rng);
    }
    const LinearFit f = fit_weighted_linear(x, y);
    inside_intercept += within(f.params[0], 1.5, f.std_errors[0], 1.0) ? 1 : 0;
    inside_slope += within(f.params[1], 0.8, f.std_errors[1], 1.0) ? 1 : 0;
  }
  // Student-t with 18 dof: P(|t| < 1) = 0.67; 400 trials → ±0.07 is more than 3 binomial sigmas.
  CHECK(inside_intercept / double(trials) == Approx(0.67).margin(0.07));
  CHECK(inside_slope / double(trials) == Approx(0.67).margin(0.07));
}

TEST_CASE("Levenberg–Marquardt recovers an exponential and agrees with linear least squares on a line", "[fit]") {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0.0, 0.02);
  const int n = 30;
  Eigen::MatrixXd x(n, 1);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    x(i, 0) = i * 0.2;
    y[i] = 2.0 * std::exp(-0.7 * x(i, 0)) + noise(rng);
  }
  const ModelFunction decay = [](const Eigen::VectorXd& p, const Eigen::VectorXd& xi) {
    return p[0] * std::exp(-p[1] * xi[0]);
  };
  const NonlinearFit f = fit_levenberg_marquardt(decay, x, y, Eigen::Vector2d(1.0, 0.1));
  CHECK(f.converged);
  CHECK(within(f.params[0], 2.0, f.std_errors[0], 3.0));
  CHECK(within(f.params[1], 0.7, f.std_errors[1], 3.0));
  CHECK(f.std_errors[1] < 0.05);

  Eigen::MatrixXd design(n, 2);
  design.col(0).setOnes();
  design.col(1) = x.col(0);
  const Eigen::VectorXd line = 0.3 + 1.7 * x.col(0).array() + y.array() * 0.1;  // any data
  const LinearFit lin = fit_weighted_linear(design, line);
  const ModelFunction affine = [](const Eigen::VectorXd& p, const Eigen::VectorXd& xi) { return p[0] + p[1] * xi[0]; };
  const NonlinearFit nl = fit_levenberg_marquardt(affine, x, line, Eigen::Vector2d(0.0, 0.0));
  CHECK(nl.params[0] == Approx(lin.params[0]).epsilon(1e-6));
  CHECK(nl.params[1] == Approx(lin.params[1]).epsilon(1e-6));
  CHECK(nl.std_errors[1] == Approx(lin.std_errors[1]).epsilon(1e-4));
}

TEST_CASE("fit inputs that cannot determine the parameters are InputErrors", "[fit]") {
  CHECK_THAT(input_error([] { (void)fit_weighted_linear(Eigen::MatrixXd::Ones(2, 2), Eigen::VectorXd::Ones(2)); }),
             Catch::Contains("got 2 points, expected more than 2"));
  Eigen::MatrixXd collinear(4, 2);
  collinear << 1, 2, 2, 4, 3, 6, 4, 8;
  CHECK_THAT(input_error([&] { (void)fit_weighted_linear(collinear, Eigen::VectorXd::Ones(4)); }),
             Catch::Contains("do not determine all 2 parameters"));
  CHECK_THAT(input_error([] {
               (void)fit_weighted_linear(Eigen::MatrixXd::Ones(3, 1), Eigen::VectorXd::Ones(3),
                                         Eigen::Vector3d(1, -1, 1));
             }),
             Catch::Contains("weight 1: got '-1.000000', expected a finite number >= 0"));
  CHECK_THAT(input_error([] {
               (void)fit_collective("all_to_all", 2, {{1 << 20, 100.0}, {1 << 21, 90.0}, {1 << 22, 80.0}});
             }),
             Catch::Contains("time does not grow with size"));
  CHECK_THAT(input_error([] {
               (void)fit_kernel_time("x", {{0, 0, 1.0}, {0, 0, 2.0}, {0, 0, 3.0}});
             }),
             Catch::Contains("no FLOPs and no bytes"));
}

TEST_CASE("collective fit recovers latency and bandwidth from synthetic nccl-tests rows", "[fit]") {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> rel(0.0, 0.02);  // 2% timing noise
  std::vector<CollectivePoint> points;
  for (std::int64_t bytes = 1 << 16; bytes <= (std::int64_t{1} << 32); bytes *= 4) {
    const double t = 25.0 + static_cast<double>(bytes) / (300.0 * 1e3);  // 25 µs + bytes / 300 GB/s
    points.push_back({bytes, t * (1.0 + rel(rng))});
  }
  const CollectiveFit f = fit_collective("all_to_all", 8, points);
  CHECK(within(f.latency_us.value, 25.0, f.latency_us.std_error, 3.0));
  CHECK(within(f.algbw_GBps.value, 300.0, f.algbw_GBps.std_error, 3.0));
  CHECK(f.busbw_GBps.value == Approx(f.algbw_GBps.value * 7.0 / 8.0));
  CHECK(f.latency_us.std_error < 2.0);
  CHECK(f.time_us(std::int64_t{1} << 30) == Approx(25.0 + (1 << 30) / 3e5).epsilon(0.03));
}

TEST_CASE("kernel-time roofline fit recovers throughput and bandwidth", "[fit]") {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> rel(0.0, 0.01);
  std::vector<KernelPoint> points;
  for (int i = 0; i < 40; ++i) {
    const double flops = 1e9 * std::pow(1.3, i % 20);
    const double bytes = 1e6 * std::pow(1.25, (i * 7) % 23);
    const double t = 4.0 + flops / (600.0 * 1e6) + bytes / (3000.0 * 1e3);
    points.push_back({flops, bytes, t * (1.0 + rel(rng))});
  }
  const KernelFit f = fit_kernel_time("synthetic", points, true);
  CHECK(within(f.overhead_us.value, 4.0, f.overhead_us.std_error, 3.0));
  CHECK(within(f.tflops.value, 600.0, f.tflops.std_error, 3.0));
  CHECK(within(f.hbm_GBps.value, 3000.0, f.hbm_GBps.std_error, 3.0));
}

TEST_CASE("fits on the H200 anchors", "[fit][shared]") {
  const AnchorFits fits = fit_anchors(read_anchors_csv(kData / "h200-anchors.csv"));
  REQUIRE(fits.collectives.size() == 2);
  for (const auto& c : fits.collectives) {
    INFO(c.op);
    CHECK(c.world == 2);
    CHECK(c.points == 5);
    CHECK(c.latency_us.value > 0);
    CHECK(c.latency_us.value < 150);  // the 1 MiB points take ~0.07-0.1 ms
    // Below the NVLink 4 peak, above the largest measured busbw minus the latency it hides.
    CHECK(c.busbw_GBps.value < kH200NvlinkGBps);
    CHECK(c.busbw_GBps.value > 200);
    CHECK(c.busbw_GBps.std_error > 0);
    CHECK(c.r_squared > 0.9);
  }
  // The largest message (1 GiB) is predicted within the fit's scatter.
  const auto& a2a = fits.collectives[1];
  CHECK(a2a.op == "all_to_all");
  CHECK(a2a.time_us(1073741824) == Approx(1730.0).epsilon(0.1));
  CHECK(fits.gemm.points == 6);
  CHECK(fits.gemm.tflops.value > 650);
  CHECK(fits.gemm.tflops.value < kH200DenseBf16Tflops);
  CHECK(fits.gemm.overhead_us.value > 0);
  CHECK(fits.gemm.max_rel_residual < 0.15);
  CHECK(8192.0 * 8192 * 8192 * 2 / fits.gemm.time_us(8192.0 * 8192 * 8192 * 2) / 1e6 == Approx(775.4).epsilon(0.1));
}

TEST_CASE("trace GEMMs: NS GEMMs overlapping a spinning NCCL kernel run slower than isolated ones", "[fit][shared]") {
  const auto isolated_trace = read_kineto_trace(kData / "traces" / "trace_global_rank1.json.gz");
  const auto isolated = kernel_points(isolated_trace, KernelRole::ns_gemm, CollectiveOverlap::isolated);
  CHECK(isolated.size() == 135);  // 3 steps × 45 GEMMs, none overlaps this rank's short a2a
  const KernelFit fast = fit_kernel_time("ns_gemm", isolated);
  CHECK(fast.tflops.value > 600);
  CHECK(fast.tflops.value < kH200DenseBf16Tflops);
  const auto waiting_trace = read_kineto_trace(kData / "traces" / "trace_local_rank1.json.gz");
  const auto overlapped = kernel_points(waiting_trace, KernelRole::ns_gemm, CollectiveOverlap::overlapping);
  REQUIRE(overlapped.size() >= 30);
  const KernelFit slow = fit_kernel_time("ns_gemm", overlapped);
  CHECK(slow.tflops.value + 3 * slow.tflops.std_error < fast.tflops.value - 3 * fast.tflops.std_error);
}

TEST_CASE("calibration JSON: round trip and a strict reader", "[fit][calibration]") {
  const AnchorFits fits = fit_anchors(read_anchors_csv(kData / "h200-anchors.csv"));
  const Calibration c = calibration_from_anchors(fits, "h200-anchors", "h200-anchors.csv", "dionsim test");
  CHECK(c.parameters.count("nccl_all_to_all_w2_busbw_GBps") == 1);
  CHECK(c.parameters.at("gemm_bf16_tflops").units == "TFLOP/s");
  const auto path = std::filesystem::temp_directory_path() / ("dionsim_test_calibration." + std::to_string(::getpid()) + ".json");
  write_calibration(path, c);
  const Calibration back = read_calibration(path);
  CHECK(back.name == c.name);
  CHECK(back.hardware == "H200");
  CHECK(back.sources == c.sources);
  REQUIRE(back.parameters.size() == c.parameters.size());
  for (const auto& [name, p] : c.parameters) {
    CHECK(back.parameters.at(name).value == p.value);  // full double precision survives
    CHECK(back.parameters.at(name).std_error == p.std_error);
    CHECK(back.parameters.at(name).units == p.units);
  }

  const json good = to_json(c);
  auto error_for = [&](const std::function<void(json&)>& edit) {
    json j = good;
    edit(j);
    return input_error([&] { (void)calibration_from_json(j, "cal.json"); });
  };
  CHECK(error_for([](json& j) { j["schema_version"] = 4; }) ==
        "cal.json: schema_version: got '4', expected 1, 2 or 3 (this dionsim reads calibration schemas 1 to 3; re-run "
        "dionsim calibrate)");
  CHECK(error_for([](json& j) { j["schema_version"] = 0; }) ==
        "cal.json: schema_version: got '0', expected 1, 2 or 3 (this dionsim reads calibration schemas 1 to 3; re-run "
        "dionsim calibrate)");
  CHECK(error_for([](json& j) { j.erase("schema_version"); }) ==
        "cal.json: schema_version: got '(missing)', expected 3");
  // Schema 3 says where it applies: its fabric is required and must be a preset.
  CHECK_THAT(error_for([](json& j) { j.erase("fabric"); }), Catch::Contains("cal.json: fabric: got '(missing)'"));
  CHECK_THAT(error_for([](json& j) { j["fabric"] = "h100-ndr999"; }),
             Catch::Contains("cal.json: fabric: got 'h100-ndr999', expected the fabric preset it was fitted on"));
  CHECK_THAT(error_for([](json& j) {
               j["schema_version"] = 1;
               j["covariance"] = json::object();
             }),
             Catch::StartsWith("cal.json: key: got 'covariance'"));  // schema 1 has no covariance
  CHECK_THAT(error_for([](json& j) {
               j["covariance"] = {{"parameters", {"nope"}}, {"matrix", {{1.0}}}};
             }),
             Catch::Contains("covariance: parameters: got '\"nope\"'"));
  CHECK_THAT(error_for([](json& j) { j["colour"] = "blue"; }),
             Catch::StartsWith("cal.json: key: got 'colour', expected one of"));
  CHECK_THAT(error_for([](json& j) { j["parameters"]["gemm_bf16_tflops"]["sigma"] = 1; }),
             Catch::StartsWith("cal.json: parameters.gemm_bf16_tflops: key: got 'sigma'"));
  CHECK_THAT(error_for([](json& j) { j["parameters"]["gemm_bf16_tflops"].erase("stderr"); }),
             Catch::Contains("stderr: got '(missing)'"));
  CHECK(error_for([](json& j) { j["parameters"]["gemm_bf16_tflops"]["value"] = "fast"; }) ==
        "cal.json: parameters.gemm_bf16_tflops: value: got '\"fast\"', expected a finite number");
  CHECK_THAT(error_for([](json& j) { j["provenance"].erase("method"); }),
             Catch::Contains("provenance: method: got '(missing)'"));
  std::ofstream(path) << "{not json";
  CHECK_THAT(input_error([&] { (void)read_calibration(path); }), Catch::Contains("not JSON"));
}

TEST_CASE("trace calibration: runs grouped by time, all-to-all kernel latency and bandwidth", "[fit][shared]") {
  std::vector<KinetoTrace> traces;
  std::vector<std::string> files;
  for (const char* name : {"trace_local_rank1", "trace_global_rank0", "trace_local_rank0", "trace_global_rank1"}) {
    files.push_back((kData / "traces" / (std::string(name) + ".json.gz")).string());
    traces.push_back(read_kineto_trace(files.back()));
  }
  const auto runs = group_into_runs(traces);
  REQUIRE(runs.size() == 2);  // the global and the local run, each with ranks 0 and 1
  for (const auto& run : runs) {
    REQUIRE(run.size() == 2);
    CHECK(run[0].rank == 0);
    CHECK(run[1].rank == 1);
    CHECK(run[0].source.substr(run[0].source.size() - 20, 6) == run[1].source.substr(run[1].source.size() - 20, 6));
  }
  const Calibration c = calibration_from_traces(traces, "h200-traces", files, "test");
  CHECK(c.hardware == "NVIDIA H200");
  const auto& algbw = c.parameters.at("nccl_all_to_all_w2_kernel_algbw_GBps");
  const auto& latency = c.parameters.at("nccl_all_to_all_w2_kernel_latency_us");
  // The fit reproduces the mean per-collective transfer time of both message sizes within 5%:
  // 67108864 B (global: 0.745 ms / 6) and 16777216 B (local: 0.210 ms / 6).
  const auto predict = [&](double bytes) { return latency.value + bytes / (algbw.value * 1e3); };
  CHECK(predict(67108864.0) == Approx(745.4 / 6).epsilon(0.05));
  CHECK(predict(16777216.0) == Approx(209.8 / 6).epsilon(0.05));
  CHECK(latency.value > 0);
  CHECK(latency.std_error > 0);
  CHECK(algbw.value < 2 * kH200NvlinkGBps);  // algbw counts the self chunk: at w=2 it is 2 × busbw
  CHECK(c.parameters.at("ns_gemm_isolated_tflops").value > c.parameters.at("ns_gemm_overlapped_tflops").value);
}

TEST_CASE("nccl-tests fit: the synthetic log's model is recovered, blocks must be distinct", "[fit][nccl-tests]") {
  // The fixture was generated from t = 22 us + bytes / 45 GB/s with 1.5% noise, 16 ranks on 2 hosts.
  const auto runs = read_nccl_tests_output(std::filesystem::path(DIONSIM_SOURCE_DIR) /
                                           "tests/measured/data/alltoall_perf_synthetic_2x8.txt");
  const auto fits = fit_nccl_tests(runs);
  REQUIRE(fits.size() == 1);
  CHECK(within(fits[0].latency_us.value, 22.0, fits[0].latency_us.std_error, 3.0));
  CHECK(within(fits[0].algbw_GBps.value, 45.0, fits[0].algbw_GBps.std_error, 3.0));
  CHECK(fits[0].busbw_GBps.value == Approx(fits[0].algbw_GBps.value * 15.0 / 16.0).epsilon(0.01));
  const Calibration c = calibration_from_nccl_tests(runs, "ib", "log", "test");
  CHECK(c.hardware == "NVIDIA H100 80GB HBM3");
  CHECK(c.parameters.count("nccl_all_to_all_w16_n2_latency_us") == 1);
  CHECK_THAT(input_error([&] {
               (void)fit_nccl_tests({runs[0], runs[0]});
             }),
             Catch::Contains("expected one block per collective, world and node count"));
}
