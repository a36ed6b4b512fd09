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
#include "known_truth.hpp"
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

TEST_CASE("the fit's covariance combined with its bounds' prior keeps what the data determine", "[intervals]") {
  // Independent parameters: each posterior variance is c·p / (c + p).
  Eigen::MatrixXd c = Eigen::MatrixXd::Zero(2, 2);
  c(0, 0) = 4.0;
  c(1, 1) = 1e6;
  const Eigen::Vector2d p(1.0, 1.0);
  const auto d = covariance_with_prior(c, p);
  CHECK(d(0, 0) == Approx(0.8));
  CHECK(d(1, 1) == Approx(1e6 / (1e6 + 1.0)));
  CHECK(std::abs(d(0, 1)) < 1e-12);
  // Correlated, C invertible: the closed form (C⁻¹ + P⁻¹)⁻¹.
  Eigen::Matrix2d k;
  k << 0.16, 0.3 * 0.4 * 1000.0, 0.3 * 0.4 * 1000.0, 1e6;
  const Eigen::Vector2d prior(0.75, 1.0 / 12.0);
  const Eigen::Matrix2d direct = (k.inverse() + Eigen::Matrix2d(prior.cwiseInverse().asDiagonal())).inverse();
  const auto post = covariance_with_prior(k, prior);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) CHECK(post(i, j) == Approx(direct(i, j)).epsilon(1e-6));
  // The well-determined parameter keeps most of its 0.4 σ (a cap on the principal direction its
  // open partner dominates would have scaled it by ~0.29 / 1000): √(0.16 − 0.3² · 0.16) = 0.38
  // conditional on the partner; 0.35 with the prior pinning the partner.
  CHECK(std::sqrt(post(0, 0)) > 0.34);
  CHECK(std::sqrt(post(0, 0)) < 0.4);
  CHECK(std::sqrt(post(1, 1)) < std::sqrt(prior[1]));
  // Singular C (a pseudo-inverse's rank-1 covariance): finite, symmetric, no wider than either.
  Eigen::Matrix2d r;
  r << 1.0, 1000.0, 1000.0, 1e6;
  const auto s = covariance_with_prior(r, prior);
  CHECK(std::isfinite(s(0, 0)));
  CHECK(s(0, 1) == Approx(s(1, 0)));
  CHECK(s(0, 0) <= 1.0);
  CHECK(s(1, 1) <= prior[1]);
  CHECK(Eigen::SelfAdjointEigenSolver<Eigen::Matrix2d>(Eigen::Matrix2d(s)).eigenvalues().minCoeff() > -1e-9);
  // Bad input names what it expected.
  CHECK_THROWS_WITH(covariance_with_prior(k, Eigen::Vector2d(1.0, 0.0)), Catch::Contains("expected a finite value > 0"));
  CHECK_THROWS_WITH(covariance_with_prior(k, Eigen::Vector3d(1, 1, 1)), Catch::Contains("3 prior variances"));
}

TEST_CASE("the fabric spread is the published repeats' and applies only across nodes", "[intervals]") {
  const auto rows = read_published_rows((kShared / "nccl-published" / "measurements.csv").string());
  const auto e = fabric_spread_from_published(rows);
  CHECK(e.across_runs_dof > 10);
  CHECK(e.back_to_back_pairs > 100);
  CHECK(std::round(e.spread() * 1000.0) / 1000.0 == Approx(kPublishedFabricSpread).margin(1e-12));
  IntervalOptions negative;
  negative.fabric_spread = -0.1;
  CHECK_THROWS_AS(uncertainty_of(nullptr, negative), UsageError);
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

TEST_CASE("the inter-node prior is the published clusters' against the fabric assumed for them", "[intervals]") {
  const auto rows = read_published_rows((kShared / "nccl-published" / "measurements.csv").string());
  const auto e = inter_node_prior_from_published(rows);
  auto round3 = [](double v) { return std::round(v * 1000.0) / 1000.0; };
  CHECK(e.link_groups == 25);  // NVL72 trays of one rack are not inter-node
  CHECK(e.alltoall_pairs == 12);
  CHECK(e.node_scaling_steps == 11);
  CHECK(round3(e.link_time_low) == Approx(kLinkTimeLow).margin(1e-12));
  CHECK(round3(e.link_time_high) == Approx(kLinkTimeHigh).margin(1e-12));
  CHECK(round3(e.alltoall_vs_ring_low) == Approx(kAlltoallVsRingLow).margin(1e-12));
  CHECK(round3(e.alltoall_vs_ring_high) == Approx(kAlltoallVsRingHigh).margin(1e-12));
  CHECK(round3(e.node_scaling) == Approx(kNodeScaling).margin(1e-12));
  INFO("link " << e.link_time_low << ".." << e.link_time_high << " a2a/ring " << e.alltoall_vs_ring_low << ".."
                << e.alltoall_vs_ring_high << " scaling " << e.node_scaling);
  // The seed thread's ~19 GB/s per rank in the 2-node all-to-all is 0.39 of NDR400's 48 GB/s
  // effective: inside the range (it was not used to set it).
  CHECK(kLinkTimeHigh > 48.0 / 18.9);

  IntervalOptions bad;
  CHECK_THROWS_AS(parse_inter_node_prior("2,1", bad), UsageError);
  CHECK_THROWS_AS(parse_inter_node_prior("0,1", bad), UsageError);
  CHECK_THROWS_AS(parse_inter_node_prior("1", bad), UsageError);
  CHECK_THROWS_AS(parse_inter_node_prior("1,2,3", bad), UsageError);
  CHECK_THROWS_AS(parse_inter_node_prior("a,2", bad), UsageError);
  CHECK(bad.link_time_low == kLinkTimeLow);  // a refused value changes nothing
  parse_inter_node_prior("0.9,2.5", bad);
  CHECK(bad.link_time_low == 0.9);
  CHECK(bad.link_time_high == 2.5);
}

TEST_CASE("the NVLink-domain priors are the published NVLink domains' against the model", "[intervals]") {
  const auto rows = read_published_rows((kShared / "nccl-published" / "measurements.csv").string());
  const auto e = intra_domain_prior_from_published(rows);
  auto round3 = [](double v) { return std::round(v * 1000.0) / 1000.0; };
  INFO("link " << e.link_time_low << ".." << e.link_time_high << " over " << e.link_groups << " groups; a2a/ring "
               << e.alltoall_vs_ring_low << ".." << e.alltoall_vs_ring_high << " over " << e.alltoall_pairs << " pairs");
  // Collectives of one H100 node (two clusters: xxrjun's, AWS's p5); one, two and 16 trays of a
  // GB300 rack, one and 16 of OCI's GB200, CoreWeave's 18-tray rack; all-to-alls beside them in 6.
  CHECK(e.link_groups == 8);
  CHECK(e.alltoall_pairs == 6);
  CHECK(round3(e.link_time_low) == Approx(kIntraLinkTimeLow).margin(1e-12));
  CHECK(round3(e.link_time_high) == Approx(kIntraLinkTimeHigh).margin(1e-12));
  CHECK(round3(e.alltoall_vs_ring_low) == Approx(kIntraAlltoallVsRingLow).margin(1e-12));
  CHECK(round3(e.alltoall_vs_ring_high) == Approx(kIntraAlltoallVsRingHigh).margin(1e-12));
  // The priors whatif uses are those ranges, as factors on the rate.
  const auto& priors = parameter_priors();
  const auto of = [&](const char* name) {
    return std::find_if(priors.begin(), priors.end(), [&](const auto& q) { return q.name == name; });
  };
  REQUIRE(of("collective_nvlink_scale") != priors.end());
  CHECK(of("collective_nvlink_scale")->low == Approx(1.0 / kIntraLinkTimeHigh));
  CHECK(of("collective_nvlink_scale")->high == Approx(1.0 / kIntraLinkTimeLow));
  REQUIRE(of("alltoall_intra_efficiency") != priors.end());
  CHECK(of("alltoall_intra_efficiency")->low == Approx(1.0 / kIntraAlltoallVsRingHigh));
  CHECK(of("alltoall_intra_efficiency")->high == Approx(1.0 / kIntraAlltoallVsRingLow));
}

namespace {

// Every prior held at its preset except `keep`; no fabric spread; a negligible model error.
IntervalOptions only_prior(const std::string& keep) {
  IntervalOptions o;
  for (const auto& p : parameter_priors())
    if (p.name != keep) o.fixed.insert(p.name);
  o.fabric_spread = 0.0;
  return o;
}

const IntervalRow& row_of(const std::vector<IntervalRow>& rows, const std::string& scope, const std::string& metric) {
  for (const auto& r : rows)
    if (r.row.scope == scope && r.row.metric == metric) return r;
  FAIL("no row " << scope << " " << metric);
  return rows.front();
}

}  // namespace

TEST_CASE("one inter-node link: the FSDP rings and the all-to-all reach their ends together", "[intervals]") {
  const auto two = select_configurations(seed_runs(), {"run=2node-real-step"});
  const auto cal = fwd_bwd_only(0.0);  // holds no inter-node parameter: the link prior applies
  const auto rows = predict_with_intervals(two, cal, only_prior("inter_node_link"));
  const auto& a2a = row_of(rows, "global", "a2a_ms");
  const auto& step = row_of(rows, "global", "step_wall_ms");
  // The all-to-all's network part at the slow end: kLinkTimeHigh × (less its latency terms).
  CHECK(a2a.interval.hi / a2a.interval.value == Approx(kLinkTimeHigh).epsilon(0.15));
  CHECK(a2a.interval.value - a2a.interval.lo > 0.0);
  // The same end slows FSDP's collectives too; on the collective model their rings cross the
  // node's 4 NICs and stay under the compute here, so the step moves with the a2a (which partly
  // overlaps the optimizer's kernels), not by hundreds of ms as a one-NIC ring made it.
  CHECK(step.interval.hi - step.interval.value > 0.5 * (a2a.interval.hi - a2a.interval.value));
  // A difference on one node set perturbs both scopes with one link: its ends are the
  // configurations' own ends, differenced.
  const auto& capped = row_of(rows, "global_capped", "a2a_ms");
  for (const auto& d : predict_differences(two, cal, only_prior("inter_node_link"))) {
    if (d.metric != "a2a_ms") continue;
    CHECK(d.interval.hi == Approx(a2a.interval.hi - capped.interval.hi).epsilon(1e-6));
    CHECK(d.interval.lo == Approx(a2a.interval.lo - capped.interval.lo).epsilon(1e-6));
  }
  // --inter-node-prior narrows it.
  auto narrow = only_prior("inter_node_link");
  parse_inter_node_prior("1,1.5", narrow);
  const auto& a2a_narrow = row_of(predict_with_intervals(two, cal, narrow), "global", "a2a_ms");
  CHECK(a2a_narrow.interval.hi / a2a_narrow.interval.value == Approx(1.5).epsilon(0.10));
  CHECK(a2a_narrow.interval.lo == Approx(a2a_narrow.interval.value).margin(1e-9));
}

TEST_CASE("the collectives' network-step prior is the published latency-bound rows' against the model", "[intervals]") {
  const auto rows = read_published_rows((kShared / "nccl-published" / "measurements.csv").string());
  const auto e = net_hop_prior_from_published(rows);
  auto round1 = [](double v) { return std::round(v * 10.0) / 10.0; };
  INFO("network step extra " << e.extra_low_us << ".." << e.extra_high_us << " us over " << e.groups << " groups");
  // 2-node p5 (three sources), p4de, B200 and H100 pairs, p5en and CoreWeave's A100 at 16 nodes,
  // OCI's GB200 across two racks: every multi-domain cluster the file has rows <= 64 KiB of.
  CHECK(e.groups == 8);
  CHECK(round1(e.extra_low_us) == Approx(kNetHopExtraLowUs).margin(1e-12));
  CHECK(round1(e.extra_high_us) == Approx(kNetHopExtraHighUs).margin(1e-12));
  const auto& priors = parameter_priors();
  const auto hop = std::find_if(priors.begin(), priors.end(),
                                [](const auto& q) { return q.name == "collective_net_hop_extra_us"; });
  REQUIRE(hop != priors.end());
  CHECK_FALSE(hop->relative);
  CHECK(hop->low == kNetHopExtraLowUs);
  CHECK(hop->high == kNetHopExtraHighUs);
}

TEST_CASE("the network-step prior moves only what crosses nodes, by the calls' network steps", "[intervals]") {
  const auto cal = fwd_bwd_only(0.0);
  const auto options = only_prior("collective_net_hop_extra_us");
  const auto one = predict_with_intervals(select_configurations(seed_runs(), {"run=1node-real-step"}), cal, options);
  for (const auto& r : one) {
    INFO(r.row.scope << " " << r.row.metric);
    CHECK(r.interval.hi == Approx(r.interval.value).margin(1e-9));  // no network step on one node
  }
  // Across two nodes the all-to-alls' network rounds move by the prior's ends, linearly: each side
  // is a whole number of rounds (2 x 4 GPUs: 4 peers per GPU across the network, one round of NCCL's
  // 16 concurrent peers per call) times that end's cost per step.
  const auto two = predict_with_intervals(select_configurations(seed_runs(), {"run=2node-real-step"}), cal, options);
  for (const char* scope : {"global", "global_capped"}) {
    INFO(scope);
    const auto& a2a = row_of(two, scope, "a2a_ms").interval;
    const double rounds = (a2a.hi - a2a.value) / (kNetHopExtraHighUs / 1000.0);
    CHECK(rounds >= 1.0 - 1e-6);
    CHECK(rounds == Approx(std::round(rounds)).margin(1e-3));
    CHECK((a2a.value - a2a.lo) == Approx(rounds * -kNetHopExtraLowUs / 1000.0).epsilon(1e-3));
  }
  // --net-step-prior sets the range: the same rounds at its ends.
  auto narrowed = options;
  parse_net_step_prior("0,2", narrowed);
  const auto two_narrowed =
      predict_with_intervals(select_configurations(seed_runs(), {"run=2node-real-step"}), cal, narrowed);
  for (const char* scope : {"global", "global_capped"}) {
    const auto& wide = row_of(two, scope, "a2a_ms").interval;
    const auto& a2a = row_of(two_narrowed, scope, "a2a_ms").interval;
    const double rounds = (wide.hi - wide.value) / (kNetHopExtraHighUs / 1000.0);
    CHECK(a2a.hi - a2a.value == Approx(rounds * 0.002).epsilon(1e-3));
    CHECK(a2a.lo == Approx(a2a.value).margin(1e-9));  // 0 is the model's own step: no low side
  }
  IntervalOptions bad;
  CHECK_THROWS_AS(parse_net_step_prior("2,1", bad), UsageError);
  CHECK_THROWS_AS(parse_net_step_prior("-3,1", bad), UsageError);
  CHECK_THROWS_AS(parse_net_step_prior("0,1001", bad), UsageError);
  CHECK_THROWS_AS(parse_net_step_prior("0", bad), UsageError);
  CHECK_THROWS_AS(parse_net_step_prior("0,inf", bad), UsageError);
  CHECK(bad.net_step_high_us == kNetHopExtraHighUs);  // a refused value changes nothing
  // A calibration from nccl-tests logs holds the parameter: no prior then.
  auto held = cal;
  held.parameters["collective_net_hop_extra_us"] = {3.0, 0.5, "us"};
  for (const auto& p : uncertainty_of(&held, {}).priors) CHECK(p.name != "collective_net_hop_extra_us");
  bool applied = false;
  for (const auto& p : uncertainty_of(&cal, {}).priors) applied = applied || p.name == "collective_net_hop_extra_us";
  CHECK(applied);
}

TEST_CASE("beyond the calibration's node counts: the link's drift and the node-count model error", "[intervals]") {
  const auto runs = seed_runs();
  const auto fit = fit_step_model(runs);
  auto cal = calibration_from_step_fit(fit, "seed-1n2n", {}, "test");
  attach_model_error(cal, leave_one_out_model_error(runs));
  const auto beyond = node_count_model_error(runs, fit.parameters);
  REQUIRE(beyond.configurations == 2);  // the two 2-node runs, predicted from the 1-node fit
  // One node gets the 2-node runs' GPU time wrong by ~14 % even with their link (the leave-one-out: 1.7 %).
  CHECK(beyond.relative_rms.at("opt_gpu_ms") > 0.10);
  CHECK(cal.model_error.at("opt_gpu_ms") < 0.03);
  CHECK(node_count_model_error(select_configurations(runs, {"run=1node-real-step"}), fit.parameters).relative_rms.empty());

  const auto two = select_configurations(runs, {"run=2node-real-step"});
  auto four = two;
  for (auto& c : four) {
    c.config.nodes = 4;
    c.config.world = 16;
  }
  IntervalOptions at2;
  at2.calibrated_nodes = 2;
  at2.beyond_model_error = beyond.relative_rms;
  // In sample at 2 nodes: neither term applies, the intervals stay narrow.
  const auto in_sample = predict_with_intervals(two, cal, at2);
  CHECK(summarize_coverage(in_sample).back().mean_half_width_pct < 15.0);
  auto without = at2;
  without.node_scaling = 0.0;
  without.beyond_model_error.clear();
  CHECK(row_of(predict_with_intervals(two, cal, without), "global", "a2a_ms").interval.half_width() ==
        Approx(row_of(in_sample, "global", "a2a_ms").interval.half_width()).epsilon(1e-9));
  // At 4 nodes: the link drifts (the all-to-all widens) and the GPU time takes the node-count error.
  const auto predicted = predict_with_intervals(four, cal, at2);
  const auto plain = predict_with_intervals(four, cal, without);
  CHECK(row_of(predicted, "global", "a2a_ms").half_width_pct() > 1.5 * row_of(plain, "global", "a2a_ms").half_width_pct());
  CHECK(row_of(predicted, "global", "opt_gpu_ms").half_width_pct() > 2.0 * row_of(plain, "global", "opt_gpu_ms").half_width_pct());
  // A calibration file does not say its node counts: one holding inter-node parameters counts as 2.
  CHECK(uncertainty_of(&cal, {}).scaling_from_nodes == 2);
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
  // The 1- and 2-node calibration holds every prior's parameter but the collectives' network step,
  // which only a calibration from nccl-tests logs fits.
  REQUIRE(with.priors.size() == 1);
  CHECK(with.priors.front().name == "collective_net_hop_extra_us");
  CHECK(with.model_error_source.find("leave-one-out of calibration 'seed-h100-1n2n' (5 configurations)") == 0);
}

TEST_CASE("90 % intervals cover about 90 % of repeated measurements on synthetic data with known truth",
          "[intervals][slow]") {
  // Truth: whatif at known parameters; measurements = truth × (1 + 3 % noise). Calibrate on one draw
  // (with its own leave-one-out model error), predict a fresh draw of the same configurations.
  auto runs = seed_runs();
  const auto truth = known_truth(runs);
  const auto exact = compare_predictions(runs, truth);
  auto draw = [&](std::mt19937_64& rng) { return noisy_draw(runs, exact, rng); };
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
  // link, so the inter-node prior (the published clusters' range against the assumed fabric)
  // carries it: 13 of 16 covered at a mean half-width of 64 %. The step walls (and MFU) are
  // covered only because each covariance direction is also differentiated at the link's slow end:
  // there the GEMM-beside-FSDP slowdown, which one node hardly constrains, costs 3× what it does at
  // the central link (9 of 16 at 55 % without that). The window GEMMs, slowed beside the 3× longer
  // all-to-all, are a miss the 1-node model form cannot show, and so (since the collective model
  // explains the published clusters better and their range narrowed to × 0.78–3.20) is global's
  // stream window, 60.2 ms against an upper end of 55.4. Not tuned on the held-out runs.
  CHECK(all.covered == 13);
  CHECK(all.mean_half_width_pct == Approx(64.5).margin(0.5));
  for (const auto& m : e.summary) {
    if (m.metric == "step_wall_ms") CHECK(m.covered == 2);
  }
  CHECK(e.beyond.relative_rms.empty());  // one fitted node count: no node-count extrapolation of its own
  bool step = false;
  for (const auto& d : e.differences) {
    if (d.metric != "step_wall_ms") continue;
    step = true;
    CHECK(d.scope_a == "global");
    CHECK(d.scope_b == "global_capped");
    CHECK(d.measured == Approx(38.1).margin(1e-9));
    CHECK(d.interval.value == Approx(9.2).margin(0.2));
    CHECK(d.interval.half_width() == Approx(28.9).margin(0.5));
    CHECK(d.covered());
  }
  CHECK(step);
  CHECK_THROWS_AS(extrapolate(select_configurations(seed_runs(), {"run=1node-real-step"}), {}), InputError);
}
