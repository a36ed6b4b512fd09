// validate-collectives --extrapolate (analysis/calibration/published_extrapolation.hpp): each
// published cluster fitted at its smallest node count, its larger node counts predicted.
#include <catch2/catch.hpp>
#include <cmath>
#include <set>

#include "analysis/calibration/published_extrapolation.hpp"

using namespace dionsim;
using namespace dionsim::analysis;

namespace {

// Rows of one synthetic cluster (p5 EFA, 8 GPUs per node) whose times are the model's own at
// known parameters: all-reduce and all-to-all, 1 MiB - 4 GiB, at `node_counts`.
std::vector<PublishedRow> synthetic_cluster(const CollectiveFitParameters& truth, const std::vector<int>& node_counts) {
  const auto fabric = topo::preset("p5-efa");
  std::vector<PublishedRow> rows;
  for (const int nodes : node_counts) {
    const auto model = calibrated_model(fabric, truth, nodes, 8);
    for (const char* collective : {"allreduce", "alltoall"}) {
      for (std::int64_t b = 1 << 20; b <= (std::int64_t{4} << 30); b *= 4) {
        PublishedRow r;
        r.line = static_cast<int>(rows.size()) + 2;
        r.source = "example.org/synthetic run.log";
        r.gpu = "H100 80GB (AWS p5.48xlarge)";
        r.nic = "not stated";
        r.collective = collective;
        r.placement = "out-of-place";
        r.gpus_per_node = 8;
        r.nodes = nodes;
        r.world = 8 * nodes;
        r.size_bytes = b;
        const auto op = r.collective == "allreduce" ? sim::CollectiveOp::allreduce : sim::CollectiveOp::alltoall;
        r.time_us = model->cost(op, b, {}, sim::Mode::fast).time_us;
        rows.push_back(r);
      }
    }
  }
  return rows;
}

}  // namespace

TEST_CASE("extrapolation: a cluster of the model's own times at other parameters is recovered at its larger node counts",
          "[calibration][extrapolate]") {
  CollectiveFitParameters truth = default_parameters(topo::preset("p5-efa"));
  truth.nic_efficiency = 0.6;
  truth.call_overhead_us = 40;
  const auto rows = synthetic_cluster(truth, {2, 8, 32});
  const auto predictions = predict_published(rows);
  const auto x = extrapolate_published(predictions);
  REQUIRE(x.clusters.size() == 1);
  const auto& c = x.clusters.front();
  CHECK(c.fit_nodes == 2);
  CHECK(c.predicted_nodes == std::vector<int>{8, 32});
  CHECK(c.fit_rows == 14);  // 7 sizes x 2 collectives
  CHECK(c.not_fitted.empty());
  CHECK(c.fit.value.nic_efficiency == Approx(0.6).epsilon(1e-3));
  REQUIRE(x.held_out.size() == 28);
  int nominal_off = 0;
  for (const auto& h : x.held_out) {
    CHECK(h.row->nodes > 2);  // no fitted row is scored
    CHECK(h.dionsim_us == Approx(h.row->time_us).epsilon(2e-3));
    nominal_off += std::abs(h.baseline_us / h.row->time_us - 1) > 0.05;
  }
  CHECK(nominal_off > 14);  // the preset's parameters are not the cluster's
  // One node count: nothing to extrapolate.
  const auto single = synthetic_cluster(truth, {4});
  CHECK(extrapolate_published(predict_published(single)).clusters.empty());
}

TEST_CASE("extrapolation: a cluster too small to fit keeps the nominal model", "[calibration][extrapolate]") {
  CollectiveFitParameters truth = default_parameters(topo::preset("p5-efa"));
  auto rows = synthetic_cluster(truth, {2, 4});
  // Two rows at 2 nodes cannot fit the 4 parameters 2-node rows move.
  std::vector<PublishedRow> few;
  for (const auto& r : rows)
    if (r.nodes == 4 || (r.collective == "allreduce" && r.size_bytes <= (4 << 20))) few.push_back(r);
  const auto predictions = predict_published(few);
  const auto x = extrapolate_published(predictions);
  REQUIRE(x.clusters.size() == 1);
  CHECK(x.clusters.front().fit_rows == 2);
  CHECK_THAT(x.clusters.front().not_fitted, Catch::Contains("cannot fit"));
  for (const auto& h : x.held_out) CHECK(h.dionsim_us == Approx(h.baseline_us).epsilon(1e-12));
}

TEST_CASE("extrapolation on the published clusters: calibrating the smallest node count helps the larger ones",
          "[calibration][extrapolate]") {
  const auto rows = read_published_rows(std::string(DIONSIM_SHARED_DIR) + "/data/nccl-published/measurements.csv");
  const auto predictions = predict_published(rows);
  const auto x = extrapolate_published(predictions);
  // CoreWeave GB200 (18 -> 32, 360 trays), AWS p5 (2 -> 4..32), OCI GB200 (1 -> 2..48 trays),
  // OCI GB300 (1 -> 2, 16, 32 trays), the H100 IB cluster (1 -> 10 nodes at 8 GPUs per node).
  CHECK(x.clusters.size() == 5);
  std::size_t held = 0;
  for (const auto& c : x.clusters) {
    INFO(c.cluster << " fitted at " << c.fit_nodes << ": " << c.not_fitted);
    CHECK(c.not_fitted.empty());
    CHECK(c.fit.rms_relative_error <= c.fit.rms_relative_error_before);
    for (const auto& s : c.held_out) held += static_cast<std::size_t>(s.rows);
  }
  CHECK(held == x.held_out.size());
  CHECK(x.held_out.size() == 452);
  // Measured, not assumed: on these held-out rows the calibrated model is in goal more often in
  // the middle and bandwidth regimes (no latency-regime row is held out: the multi-node-count
  // clusters publish 512 KiB and up).
  for (const auto& s : x.summary) {
    INFO(to_string(s.regime) << ": calibrated " << s.dionsim_within << " / nominal " << s.baseline_within << " of " << s.rows);
    if (s.regime == SizeRegime::latency) CHECK(s.rows == 0);
    if (s.regime != SizeRegime::latency) CHECK(s.dionsim_within > s.baseline_within);
  }
}
