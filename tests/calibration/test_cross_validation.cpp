// Cross-validated intervals (analysis/calibration/cross_validation.hpp): the held-out predictions
// are leave_one_out()'s, each fold's model-form error is the nested leave-one-out of its own
// configurations (the shared pair fits give what leave_one_out_model_error computes), the coverage
// counts what the intervals hold, and on synthetic data with known truth the cross-validated
// intervals cover about 90 %.
#include <catch2/catch.hpp>
#include <filesystem>
#include <random>

#include "analysis/calibration/cross_validation.hpp"
#include "analysis/calibration/extrapolation.hpp"
#include "analysis/calibration/step_fit.hpp"
#include "analysis/measured/measurements.hpp"
#include "analysis/records/records.hpp"
#include "common/error.hpp"
#include "known_truth.hpp"

using namespace dionsim::analysis;
using namespace dionsim;

namespace {

const std::filesystem::path kShared = std::filesystem::path(DIONSIM_SHARED_DIR) / "data";

std::vector<MeasuredConfiguration> seed(const std::vector<std::string>& where) {
  return select_configurations(group_configurations(read_measurement_csv(kShared / "seed-measurements.csv")), where);
}

// The seed's four multi-scope runs that the fits can share: 1-node global and global_capped, both
// 2-node runs (four configurations: the smallest selection with a nested leave-one-out).
std::vector<MeasuredConfiguration> four() {
  std::vector<MeasuredConfiguration> out;
  for (auto& c : seed({"run=1node-real-step", "run=2node-real-step"}))
    if (!(c.config.nodes == 1 && c.config.scope == "local")) out.push_back(std::move(c));
  return out;
}

}  // namespace

TEST_CASE("cross-validation: leave_one_out's predictions, nested model error, honest coverage counts",
          "[cross_validation]") {
  const auto runs = four();
  REQUIRE(runs.size() == 4);
  const auto cv = cross_validate(runs, {});
  // The held-out predictions are exactly leave_one_out()'s.
  const auto loo = leave_one_out(runs);
  REQUIRE(cv.rows.size() == loo.size());
  for (std::size_t i = 0; i < loo.size(); ++i) {
    CHECK(cv.rows[i].configuration == loo[i].configuration);
    CHECK(cv.rows[i].metric == loo[i].metric);
    CHECK(cv.rows[i].predicted == Approx(loo[i].predicted).epsilon(1e-12));
  }
  // Every interval sits on the cell's own prediction and brackets it.
  REQUIRE_FALSE(cv.intervals.empty());
  for (const auto& r : cv.intervals) {
    const IntervalRow* same = nullptr;
    for (const auto& p : cv.rows)
      if (p.configuration == r.row.configuration && p.metric == r.row.metric) same = interval_of(cv, p);
    REQUIRE(same == &r);
    CHECK(r.interval.value == Approx(r.row.predicted).epsilon(1e-9));
    CHECK(r.interval.lo <= r.interval.value);
    CHECK(r.interval.hi > r.interval.value);
  }
  // Fold k's model-form error is the leave-one-out of the other three (from the shared pair fits).
  REQUIRE(cv.folds.size() == 4);
  for (std::size_t k : {std::size_t{0}, std::size_t{3}}) {
    std::vector<MeasuredConfiguration> others;
    for (std::size_t i = 0; i < runs.size(); ++i)
      if (i != k) others.push_back(runs[i]);
    const auto expected = leave_one_out_model_error(others);
    const auto& fold = cv.folds[k];
    INFO(fold.configuration);
    CHECK(fold.configuration == runs[k].config.label());
    CHECK(fold.fitted_configurations == 3);
    CHECK(fold.model_error_configurations == expected.configurations);
    REQUIRE(fold.model_error.size() == expected.relative_rms.size());
    for (const auto& [metric, rms] : expected.relative_rms)
      CHECK(fold.model_error.at(metric) == Approx(rms).epsilon(1e-12));
  }
  // The coverage summary counts the rows.
  REQUIRE_FALSE(cv.coverage.empty());
  const auto& all = cv.coverage.back();
  CHECK(all.metric == "all");
  CHECK(all.count == static_cast<int>(cv.intervals.size()));
  int covered = 0;
  for (const auto& r : cv.intervals) covered += r.interval.lo <= r.row.measured && r.row.measured <= r.interval.hi;
  CHECK(all.covered == covered);
  // A record carries each cell's interval and the coverage.
  auto rec = validation_record(cv.rows, summarize(cv.rows), {{"source", "test"}}, 0);
  add_interval_results(rec, cv.intervals, cv.coverage, ValidationKind::leave_one_out);
  int labelled = 0, coverage_rows = 0;
  for (const auto& m : rec.metrics) {
    labelled += m.name == "loo_error_pct" && m.labels.contains("predicted_lo") && m.labels.contains("covered");
    if (m.name == "loo_coverage" && m.labels["metric"] == "all") {
      ++coverage_rows;
      CHECK(m.value == Approx(static_cast<double>(covered) / all.count));
    }
  }
  CHECK(labelled == static_cast<int>(cv.intervals.size()));
  CHECK(coverage_rows == 1);
}

TEST_CASE("cross-validation: folds too small for a nested leave-one-out say so", "[cross_validation]") {
  const auto one_node = seed({"run=1node-real-step"});  // three configurations: folds of two
  REQUIRE(one_node.size() == 3);
  const auto cv = cross_validate(one_node, {});
  for (const auto& f : cv.folds) {
    CHECK_FALSE(f.nested());
    CHECK(f.model_error_configurations == 0);
    // One node constrains nothing inter-node: the link takes its prior (intervals.hpp: inter_node_link).
    CHECK(std::find(f.priors.begin(), f.priors.end(), "inter_node_link") != f.priors.end());
  }
  REQUIRE(cv.notes.size() == 2);
  CHECK(cv.notes[0].find("3 of 3 folds have no nested leave-one-out") == 0);
  CHECK_THROWS_AS(cross_validate({one_node.front()}, {}), InputError);
  IntervalOptions bad;
  bad.fabric_spread = 2.0;
  CHECK_THROWS_AS(cross_validate(one_node, bad), UsageError);
}

TEST_CASE("cross-validated intervals cover about 90 % on synthetic data with known truth", "[cross_validation][slow]") {
  // Truth: whatif at known parameters; measurements = truth × (1 + 3 % noise) on the seed's five
  // 1- and 2-node configurations. Each draw is cross-validated as `dionsim validate` does it.
  const auto runs = seed({"run=1node-real-step", "run=2node-real-step"});
  const auto truth = known_truth(runs);
  const auto exact = compare_predictions(runs, truth);
  IntervalOptions options;
  options.fabric_spread = 0.0;  // the synthetic fabric does not vary between node sets
  int cells = 0, covered = 0;
  double half_width = 0;
  for (std::uint64_t s = 1; s <= 4; ++s) {
    std::mt19937_64 rng(s);
    const auto cv = cross_validate(noisy_draw(runs, exact, rng), options);
    for (const auto& r : cv.intervals) {
      if (!r.row.fitted) continue;
      ++cells;
      covered += r.covered() ? 1 : 0;
      half_width += r.half_width_pct();
    }
  }
  const double coverage = static_cast<double>(covered) / cells;
  WARN("cross-validated synthetic coverage: " << covered << " of " << cells << ", mean half-width "
                                              << half_width / cells << " %");
  CHECK(coverage > 0.80);
  CHECK(coverage < 1.0);
}
