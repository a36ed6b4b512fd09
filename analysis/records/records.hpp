#pragma once
// Run records: every RunRecord dionsim stores is built here, from the domain objects of the
// libraries below (plan, numerics case, deferral study, collective table, what-if result,
// measured configuration, calibration). The store (analysis/store/) knows none of them; the
// subcommands (experiments/) decide when to store. What each record holds: docs/database.md
// "What each subcommand records".
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "analysis/calibration/extrapolation.hpp"
#include "analysis/calibration/fit_calibration.hpp"
#include "analysis/calibration/intervals.hpp"
#include "analysis/calibration/step_fit.hpp"
#include "analysis/measured/measurements.hpp"
#include "analysis/store/store.hpp"
#include "optimizer/deferral.hpp"
#include "optimizer/inventory.hpp"
#include "optimizer/numerics_case.hpp"
#include "optimizer/plan.hpp"
#include "optimizer/reference_step.hpp"
#include "sim/collective_table.hpp"
#include "sim/whatif.hpp"

namespace dionsim::analysis {

// plan: the canonical configuration — the model's name and matrix shapes (so an inventory file is
// identified by its content) and every PlanConfig field.
[[nodiscard]] nlohmann::json plan_config_json(const opt::Inventory& inventory, const opt::PlanConfig& config);
// plan: totals (no labels) and per shape group numbers (labels group, rows, cols, path).
void add_plan_metrics(RunRecord& record, const opt::Plan& plan);

// step: case.json as read (canonical) plus the SHA-256 of every input array (W0 and each step's G,
// in case order, as float32 bytes), so the same folder with other arrays is another configuration.
[[nodiscard]] nlohmann::json step_config_json(const opt::NumericsCase& c);
// step: per-rank, per-step deferral counters (trial 0), the wall time of the CPU reference, and the
// gradient row statistics of the case's G<t> (per step, shape group and rank shard) for replay:DB.
void add_step_results(RunRecord& record, const opt::NumericsCase& c, const opt::ReferenceOptimizer& optimizer,
                      double wall_ms);

// collective: one size of a sweep — the collectives row and the message count.
void add_collective_results(RunRecord& record, const sim::CollectiveSpec& spec, const sim::CollectiveRow& row,
                            const sim::CollectiveResult& r, int ranks, std::int64_t nodes);

// measure: what `measure --json` prints (`out`) as a measured run: the collective rows, or the
// step's metrics, per-step times, per kernel class and per collective times.
[[nodiscard]] RunRecord measure_record(nlohmann::json config, const nlohmann::json& out, std::uint64_t seed);

// deferral: the configuration a run is stored under (the study's fields, --mode as given, the seed,
// and the replayed database's identity under replay:DB).
[[nodiscard]] nlohmann::json deferral_config_json(const opt::DeferralConfig& c, const std::string& mode,
                                                  const nlohmann::json& replayed);
// deferral: the JSON results as metrics, the per-rank counters as deferral rows.
[[nodiscard]] RunRecord deferral_record(const nlohmann::json& config, const nlohmann::json& result,
                                        const opt::DeferralSummary& s, std::uint64_t seed);

// whatif: every numeric metric of the result, and rank 0's optimizer events as phases.
// With `intervals`: each metric's 90 % interval as the metrics <metric>_lo and <metric>_hi too
// (analysis/calibration/intervals.hpp; the report draws them as bands).
[[nodiscard]] RunRecord whatif_record(const sim::WhatifResult& r, const nlohmann::json& config, std::uint64_t seed,
                                      const std::map<std::string, Interval>* intervals = nullptr);

// A measured configuration (CSV or trace) as a run of mode `measured`, kind "measured_csv"; its
// configuration is what `validate --db` and `calibrate --db` read back
// (stored_runs.hpp: measured_configurations_from_db).
[[nodiscard]] nlohmann::json measured_config_json(const MeasurementConfig& config);
[[nodiscard]] RunRecord measured_record(const MeasuredConfiguration& configuration);

// calibrate: the calibration (body and parameters) under `config`.
[[nodiscard]] RunRecord calibration_record(const Calibration& calibration, const nlohmann::json& config);

// A validation as a run (kind "validate"): <p>_error_pct per predicted cell (labels configuration,
// metric, measured, predicted) and <p>_{mean,max}_abs_error_pct per metric (labels metric, count),
// p = "loo" for leave-one-out, "holdout" for a given calibration,
[[nodiscard]] RunRecord validation_record(const std::vector<PredictionRow>& rows,
                                          const std::vector<MetricSummary>& summary, const nlohmann::json& config,
                                          std::uint64_t seed, ValidationKind kind = ValidationKind::leave_one_out);
// p = "extrapolate" for validate --extrapolate.
// With intervals: a cell that has one gets the labels predicted_lo, predicted_hi and covered on its
// <p>_error_pct row, and each coverage summary row (labels metric, count, covered) adds
// <p>_coverage (covered / count) and <p>_mean_half_width_pct (metric "all": every cell).
void add_interval_results(RunRecord& record, const std::vector<IntervalRow>& intervals,
                          const std::vector<CoverageSummary>& coverage, ValidationKind kind);
// validate --extrapolate as one run: its predicted cells with their intervals, the coverage
// summary, and per scope difference <p>_difference (the predicted a − b; labels a, b, scope_a,
// scope_b, nodes, metric, measured, predicted_lo, predicted_hi, probability_positive, covered);
// the fitted calibration's parameters as <p>_parameter (labels parameter, stderr, units).
[[nodiscard]] RunRecord extrapolation_record(const Extrapolation& extrapolation, const nlohmann::json& config,
                                             std::uint64_t seed);

}  // namespace dionsim::analysis
