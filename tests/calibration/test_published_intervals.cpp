// validate-collectives --intervals (analysis/calibration/published_intervals.hpp): each published
// cluster held out of its own fold, the intervals' arithmetic, and the model-form range's
// leave-one-cluster-out on clusters of known error.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "analysis/calibration/intervals.hpp"
#include "analysis/calibration/published_intervals.hpp"
#include "analysis/measured/nccl_published.hpp"
#include "optimizer/inventory.hpp"
#include "sim/kernel_model.hpp"
#include "sim/whatif.hpp"
#include "topologies/topology.hpp"

using namespace dionsim;
using namespace dionsim::analysis;

namespace {

const std::filesystem::path kPublished =
    std::filesystem::path(DIONSIM_SHARED_DIR) / "data" / "nccl-published" / "measurements.csv";

}  // namespace

TEST_CASE("every published cluster is held out of its own fold's priors", "[published_intervals]") {
  const auto rows = read_published_rows(kPublished.string());
  const auto x = published_intervals(rows);
  std::set<std::string> clusters;
  for (const auto& r : rows) clusters.insert(cluster_of(r));
  CHECK(x.folds.size() == clusters.size());
  // OCI's GB200 across two racks sets the network step's top end (kNetHopExtraHighUs); held out,
  // its fold's top end is the next cluster's.
  for (const auto& f : x.folds) {
    INFO(f.cluster);
    if (f.cluster.find("oci-hpc-oke") != std::string::npos && f.cluster.find("GB200") != std::string::npos)
      CHECK(f.net_step_high_us < 10.0);
    else
      CHECK(std::round(f.net_step_high_us * 10) / 10 == Approx(kNetHopExtraHighUs));
  }
  // Every predicted row has both intervals around its prediction, and the summary counts them.
  std::map<SizeRegime, std::pair<int, int>> count;
  int predicted = 0;
  for (const auto& p : x.predictions) predicted += p.skipped.empty() && p.dionsim_us > 0;
  CHECK(static_cast<int>(x.rows.size()) == predicted);
  for (const auto& r : x.rows) {
    const double v = r.prediction->dionsim_us;
    CHECK(r.lo_us <= v);
    CHECK(v <= r.hi_us);
    CHECK(r.covered == (r.lo_us <= r.prediction->row->time_us && r.prediction->row->time_us <= r.hi_us));
    auto& [rows_in, covered] = count[regime_of(r.prediction->row->size_bytes)];
    ++rows_in;
    covered += r.model_form_covered;
  }
  REQUIRE(x.summary.size() == 3);
  for (const auto& c : x.summary) {
    CHECK(c.rows == count[c.regime].first);
    CHECK(c.model_form_covered == count[c.regime].second);
    CHECK(c.mean_half_width_pct > 0);
  }
  // Per preset the same rows, split.
  std::map<SizeRegime, std::pair<int, int>> by_preset;
  for (const auto& [preset, regimes] : x.summary_by_preset)
    for (const auto& c : regimes) {
      by_preset[c.regime].first += c.rows;
      by_preset[c.regime].second += c.covered;
    }
  for (const auto& c : x.summary) {
    CHECK(by_preset[c.regime].first == c.rows);
    CHECK(by_preset[c.regime].second == c.covered);
  }
}

TEST_CASE("the model-form range is the other clusters' error: clusters of known error", "[published_intervals]") {
  // Three clusters' rows with their measured times replaced by the nominal prediction times a
  // known factor each: 1.0, 1.5 and 2.0. Held out, each is predicted with the others' range.
  const auto all = read_published_rows(kPublished.string());
  std::vector<PublishedRow> rows;
  const std::map<std::string, double> factor = {{"github.com/dstackai/dstack|H100 80GB (Nebius)", 1.0},
                                                {"github.com/dstackai/dstack|B200 (GCP A4)", 1.5},
                                                {"github.com/dstackai/dstack|B200 (Lambda 1-Click Cluster)", 2.0}};
  for (const auto& r : all)
    if (factor.count(cluster_of(r))) rows.push_back(r);
  REQUIRE(rows.size() > 50);
  const auto nominal = predict_published(rows);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i].time_us = nominal[i].dionsim_us * factor.at(cluster_of(rows[i]));
  const auto x = published_intervals(rows);
  REQUIRE(x.folds.size() == 3);
  int checked = 0;
  for (const auto& r : x.rows) {
    const double f = factor.at(r.cluster), v = r.prediction->dionsim_us;
    INFO(r.cluster << " line " << r.prediction->row->line);
    // The other two clusters' factors are the range's ends (fewer than 39 rows per regime: the
    // extremes), wherever they have rows of this regime.
    const double lo = r.model_form_lo_us / v, hi = r.model_form_hi_us / v;
    CHECK(lo >= 1.0 - 1e-9);
    CHECK(hi <= 2.0 + 1e-9);
    if (f == 1.0) CHECK(lo >= 1.5 - 1e-9);
    if (f == 2.0) CHECK(hi <= 1.5 + 1e-9);
    // 1.5 sits between the others' wherever both have rows of the regime; the ends never cover
    // the cluster outside them.
    CHECK(r.model_form_covered == (lo - 1e-9 <= f && f <= hi + 1e-9));
    if (f != 1.5) CHECK_FALSE(r.model_form_covered);
    ++checked;
  }
  CHECK(checked == static_cast<int>(rows.size()) - 0);  // every row is predicted (no skips in these clusters)
}

TEST_CASE("the collective record's range is the committed file's, as recommend's stress test uses it", "[published_intervals]") {
  const auto rows = read_published_rows(kPublished.string());
  const auto r = collective_record_range(predict_published(rows));
  auto round3 = [](double v) { return std::round(v * 1000.0) / 1000.0; };
  // 286 latency rows (the two 0-byte ones priced at 0 left out), 382 middle, 890 bandwidth.
  CHECK(r.rows == std::array<int, 3>{286, 382, 890});
  for (std::size_t g = 0; g < 3; ++g) {
    INFO("regime " << g << ": " << r.low[g] << " .. " << r.high[g]);
    CHECK(round3(r.low[g]) == Approx(kCollectiveRecordLow[g]).margin(1e-12));
    CHECK(round3(r.high[g]) == Approx(kCollectiveRecordHigh[g]).margin(1e-12));
    CHECK(r.low[g] < 1.0);  // the model is sometimes slow, more often fast
    CHECK(r.high[g] > 2.0);
  }
}

TEST_CASE("rows outside the record get the fold a held-out cluster gets", "[published_intervals]") {
  // A user's logs against the record = that cluster held out of record + logs.
  const auto all = read_published_rows(kPublished.string());
  const std::string nebius = "github.com/dstackai/dstack|H100 80GB (Nebius)";
  std::vector<PublishedRow> logs, record;
  for (const auto& r : all) (cluster_of(r) == nebius ? logs : record).push_back(r);
  REQUIRE_FALSE(logs.empty());
  const auto against = intervals_against_record(logs, record);
  const auto held_out = published_intervals(all);
  REQUIRE(against.folds.size() == 1);
  std::map<int, const RowInterval*> by_line;
  for (const auto& r : held_out.rows)
    if (r.cluster == nebius) by_line[r.prediction->row->line] = &r;
  REQUIRE(against.rows.size() == by_line.size());
  for (const auto& r : against.rows) {
    const RowInterval& same = *by_line.at(r.prediction->row->line);
    CHECK(r.lo_us == Approx(same.lo_us).epsilon(1e-12));
    CHECK(r.hi_us == Approx(same.hi_us).epsilon(1e-12));
    CHECK(r.model_form_lo_us == Approx(same.model_form_lo_us).epsilon(1e-12));
    CHECK(r.model_form_hi_us == Approx(same.model_form_hi_us).epsilon(1e-12));
  }
}

TEST_CASE("whatif's stress bounds: the step with every collective at the record's ends", "[published_intervals]") {
  sim::WhatifStudy study;
  study.base.model = "seed-5120x8";
  study.base.mfu = 0.45;
  study.gpus_per_node = 8;
  study.scopes = {opt::Scope::global};
  study.fractions = {0.25};
  study.capacity_factors = {std::nullopt};
  study.nodes = {4};
  study.fabrics = {topo::preset("p5-efa")};
  const auto config = sim::expand(study).at(0);
  const auto inventory = opt::seed_5120x8();
  const sim::KernelModel kernels(sim::default_kernel_model_config(sim::hardware_preset("h100-sxm", "--hardware")));
  const auto j = collective_record_stress_json(config, inventory, kernels);
  const double central = sim::ns_to_ms(sim::run_whatif(config, inventory, kernels).step_wall_ns);
  for (const auto& [end, factors] : {std::pair{"low", kCollectiveRecordLow}, std::pair{"high", kCollectiveRecordHigh}}) {
    auto c = config;
    c.collective_options.time_factor_by_size_regime = factors;
    const auto r = sim::run_whatif(c, inventory, kernels);
    CHECK(j.at(std::string("step_wall_ms_collectives_at_record_") + end).get<double>() == Approx(sim::ns_to_ms(r.step_wall_ns)));
    CHECK(j.at(std::string("opt_wall_ms_collectives_at_record_") + end).get<double>() ==
          Approx(sim::ns_to_ms(r.opt_wall_seen_ns())));
  }
  // Faster collectives do not lengthen the step, slower ones do (the all-to-all is exposed here).
  CHECK(j.at("step_wall_ms_collectives_at_record_low").get<double>() <= central + 1e-9);
  CHECK(j.at("step_wall_ms_collectives_at_record_high").get<double>() > central);
}
