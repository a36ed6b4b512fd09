// Prediction intervals (analysis/calibration/intervals.hpp) and the extrapolation check
// (analysis/calibration/extrapolation.hpp): the split normal, the propagation of a known
// covariance in closed form, the published fabric spread and the seed's model-form error as
// committed, coverage on synthetic data with known truth, and the seed's 1 -> 2 node check.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <random>

#include "analysis/calibration/extrapolation.hpp"
#include "analysis/calibration/intervals.hpp"
#include "analysis/calibration/parameters.hpp"
#include "analysis/calibration/step_fit.hpp"
#include "analysis/measured/measurements.hpp"
#include "analysis/measured/nccl_published.hpp"
#include "common/error.hpp"
#include "sim/whatif.hpp"
#include "sim/whatif_calibration.hpp"

using namespace dionsim::analysis;
using namespace dionsim;

namespace {

const std::filesystem::path kShared = std::filesystem::path(DIONSIM_SHARED_DIR) / "data";

std::vector<MeasuredConfiguration> seed_runs() {
  return select_configurations(group_configurations(read_measurement_csv(kShared / "seed-measurements.csv")),
                               {"run=1node-real-step", "run=2node-real-step"});
}

// A calibration holding only fwd_bwd_ms, with this standard error, and a negligible model error.
Calibration fwd_bwd_only(double sd_ms) {
  Calibration c;
  c.name = "fwd-only";
  c.hardware = "H100 SXM";
  c.parameters["fwd_bwd_ms"] = {450.0, sd_ms, "ms"};
  c.covariance_parameters = {"fwd_bwd_ms"};
  c.covariance = Eigen::MatrixXd::Constant(1, 1, sd_ms * sd_ms);
  for (const auto& m : interval_metrics()) c.model_error[m] = 1e-9;
  c.model_error_configurations = 5;
  return c;
}

}  // namespace

TEST_CASE("the split normal: 90 % between the ends, probabilities on both sides", "[intervals]") {
  Interval iv{10.0, 10.0 - kIntervalZ * 1.0, 10.0 + kIntervalZ * 3.0, 1.0, 3.0};
  CHECK(iv.probability_above(iv.lo) == Approx(1.0 - 2.0 * 1.0 / 4.0 * 0.05).margin(1e-9));
  CHECK(iv.probability_above(iv.hi) == Approx(2.0 * 3.0 / 4.0 * 0.05).margin(1e-9));
  // Mass between the ends: exactly 90 % for any pair of sides.
  CHECK(iv.probability_above(iv.lo) - iv.probability_above(iv.hi) == Approx(0.90).margin(1e-9));
  CHECK(iv.probability_above(10.0) == Approx(0.75).margin(1e-12));  // b / (a + b) above the mode
  const Interval symmetric{5.0, 5.0 - kIntervalZ, 5.0 + kIntervalZ, 1.0, 1.0};
  CHECK(symmetric.probability_above(0.0) == Approx(1.0 - 0.5 * std::erfc(5.0 / std::sqrt(2.0))).margin(1e-9));
  CHECK(format_interval(Interval{582.31, 560.0, 604.62, 1, 1}) == "582.3 ± 22.3");
}

TEST_CASE("a known covariance propagates through the model in closed form", "[intervals]") {
  // Step wall = fwd/bwd + the rest: a 10 ms standard error on fwd_bwd_ms is a ±16.4 ms interval
  // of the step wall, and nothing of the optimizer's window. One node: no fabric term.
  const auto runs = seed_runs();
  const auto one = select_configurations(runs, {"run=1node-real-step", "scope=global"});
  IntervalOptions options;
  auto cal = fwd_bwd_only(10.0);
  // Every prior held at its preset: a calibration that holds the parameters at whatif's presets.
  for (const auto& p : parameter_priors()) options.fixed.insert(p.name);
  const auto rows = predict_with_intervals(one, cal, options);
  bool seen = false;
  for (const auto& r : rows) {
    if (r.row.metric == "step_wall_ms") {
      seen = true;
      CHECK(r.interval.half_width() == Approx(kIntervalZ * 10.0).epsilon(0.01));
    }
    if (r.row.metric == "opt_gpu_window_ms") CHECK(r.interval.half_width() < 1e-3);
  }
  CHECK(seen);
  // The difference of two scopes on one node set: the common fwd/bwd cancels.
  const auto pair = select_configurations(runs, {"run=1node-real-step", "scope=global", "scope=local"});
  for (const auto& d : predict_differences(pair, cal, options)) {
    if (d.metric == "step_wall_ms") CHECK(d.interval.half_width() < 0.5);
  }
}

TEST_CASE("the fabric spread is the published repeats' and applies only across nodes", "[intervals]") {
  const auto rows = read_published_rows((kShared / "nccl-published" / "measurements.csv").string());
  const auto e = fabric_spread_from_published(rows);
  CHECK(e.across_runs_dof > 10);
  CHECK(e.back_to_back_pairs > 100);
  CHECK(std::round(e.spread() * 1000.0) / 1000.0 == Approx(kPublishedFabricSpread).margin(1e-12));
  CHECK_THROWS_AS(uncertainty_of(nullptr, IntervalOptions{-0.1, {}}), UsageError);
  // One node: the spread changes nothing; two nodes: the inter-node metrics widen with it.
  const auto runs = seed_runs();
  auto cal = fwd_bwd_only(0.0);
  cal.covariance = Eigen::MatrixXd::Zero(1, 1);
  IntervalOptions none, wide;
  for (const auto& p : parameter_priors()) none.fixed.insert(p.name);
  none.fabric_spread = 0.0;
  wide = none;
  wide.fabric_spread = 0.10;
  const auto two = select_configurations(runs, {"run=2node-real-step", "scope=global"});
  const auto one = select_configurations(runs, {"run=1node-real-step", "scope=global"});
  auto half = [](const std::vector<IntervalRow>& predicted, const std::string& metric) {
    for (const auto& r : predicted)
      if (r.row.metric == metric) return r.interval.half_width();
    return -1.0;
  };
  CHECK(half(predict_with_intervals(one, cal, wide), "a2a_ms") == Approx(half(predict_with_intervals(one, cal, none), "a2a_ms")));
  const double a2a_none = half(predict_with_intervals(two, cal, none), "a2a_ms");
  const double a2a_wide = half(predict_with_intervals(two, cal, wide), "a2a_ms");
  CHECK(a2a_none < 1e-3);
  CHECK(a2a_wide > 0.5);  // ~18 ms of inter-node all-to-all, up to 18 % slower
}

TEST_CASE("the default model-form error is the seed calibration's leave-one-out", "[intervals]") {
  const auto e = leave_one_out_model_error(seed_runs());
  CHECK(e.configurations == 5);
  REQUIRE(e.relative_rms.size() == default_model_error().size());
  for (const auto& [metric, rms] : default_model_error()) {
    INFO(metric);
    REQUIRE(e.relative_rms.count(metric) == 1);
    CHECK(e.relative_rms.at(metric) == Approx(rms).margin(5e-4));
  }
}

TEST_CASE("without a calibration the intervals say so and are wider than with one", "[intervals]") {
  const auto u = uncertainty_of(nullptr, {});
  CHECK(u.priors.size() == parameter_priors().size());
  REQUIRE_FALSE(u.notes.empty());
  CHECK(u.notes.front().find("no step calibration") != std::string::npos);
  const auto fitted = read_calibration(std::filesystem::path(DIONSIM_SOURCE_DIR) / "docs" / "calibration-seed-h100.json");
  const auto with = uncertainty_of(&fitted, {});
  CHECK(with.priors.empty());  // the 1- and 2-node calibration holds every prior's parameter
  CHECK(with.model_error_source.find("leave-one-out of calibration 'seed-h100-1n2n' (5 configurations)") == 0);
}

TEST_CASE("90 % intervals cover about 90 % of repeated measurements on synthetic data with known truth",
          "[intervals][slow]") {
  // Truth: whatif at known parameters; measurements = truth × (1 + 3 % noise). Calibrate on one draw
  // (with its own leave-one-out model error), predict a fresh draw of the same configurations.
  auto runs = seed_runs();
  std::map<std::string, double> truth = {{"fwd_bwd_ms", 430.0},          {"ns_gemm_efficiency", 0.8},
                                         {"nic_efficiency", 0.6},        {"alltoall_intra_efficiency", 0.5},
                                         {"alltoall_inter_efficiency", 0.45}, {"alltoall_latency_us", 80.0},
                                         {"rank_skew_ms", 0.8},          {"ns_gemm_overlap_slowdown", 1.3},
                                         {"host_launch_us", 12.0},       {"launch_gap_us", 0.0}};
  for (const auto& [name, value] : fit_step_model(runs).parameters)
    if (name.starts_with("hbm_efficiency.")) truth[name] = 0.6;
  const auto exact = compare_predictions(runs, truth);
  auto draw = [&](std::mt19937_64& rng) {
    std::normal_distribution<double> noise(0.0, 0.03);
    auto out = runs;
    for (auto& c : out)
      for (auto& [metric, value] : c.metrics)
        for (const auto& r : exact)
          if (r.configuration == c.config.label() && r.metric == metric) value = r.predicted * (1.0 + noise(rng));
    return out;
  };
  int cells = 0, covered = 0;
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    std::mt19937_64 rng(seed);
    const auto train = draw(rng);
    const auto test = draw(rng);
    auto cal = calibration_from_step_fit(fit_step_model(train), "synthetic", {}, "test");
    attach_model_error(cal, leave_one_out_model_error(train));
    IntervalOptions options;
    options.fabric_spread = 0.0;  // the synthetic fabric does not vary
    for (const auto& r : predict_with_intervals(test, cal, options)) {
      if (!r.row.fitted) continue;
      ++cells;
      covered += r.covered() ? 1 : 0;
    }
  }
  const double coverage = static_cast<double>(covered) / cells;
  WARN("synthetic coverage: " << covered << " of " << cells);
  CHECK(coverage > 0.82);
  CHECK(coverage < 0.99);
}

TEST_CASE("validate --extrapolate on the seed: fit 1 node, predict 2 nodes", "[intervals]") {
  const auto e = extrapolate(seed_runs(), {});
  CHECK(e.fit_nodes == std::vector<int>{1});
  CHECK(e.predicted_nodes == 2);
  CHECK(e.calibration.model_error_configurations == 3);
  REQUIRE_FALSE(e.summary.empty());
  const auto& all = e.summary.back();
  CHECK(all.metric == "all");
  CHECK(all.count == 16);  // 2 configurations × 8 metrics with intervals
  // The numbers docs/calibration.md and the README quote: one node cannot show the 2-node runs'
  // all-to-all at 0.39 of the fabric's time, which no published nccl-tests row of the fabric shows
  // either, so most intervals miss (honestly reported, not tuned on the held-out runs).
  CHECK(all.covered == 4);
  CHECK(all.mean_half_width_pct == Approx(26.1).margin(0.5));
  bool step = false;
  for (const auto& d : e.differences) {
    if (d.metric != "step_wall_ms") continue;
    step = true;
    CHECK(d.scope_a == "global");
    CHECK(d.scope_b == "global_capped");
    CHECK(d.measured == Approx(38.1).margin(1e-9));
    CHECK(d.interval.value == Approx(9.2).margin(0.2));
    CHECK(d.interval.half_width() == Approx(24.3).margin(0.5));
  }
  CHECK(step);
  CHECK_THROWS_AS(extrapolate(select_configurations(seed_runs(), {"run=1node-real-step"}), {}), InputError);
}
