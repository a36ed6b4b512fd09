// dionsim validate: leave-one-configuration-out over measured runs (a measurement CSV or the
// database's measured runs, selected with --where): each configuration predicted, with its 90 %
// interval, by the step model fitted on all the others (analysis/calibration/cross_validation.hpp);
// the error and interval coverage per metric; --in-sample adds the fit on all of them.
// --calibration CAL instead predicts every selected configuration with that calibration as it is
// (no fitting); --extrapolate fits the smaller node counts and predicts the largest
// (analysis/calibration/extrapolation.hpp). --db records each as a run (kind validate).
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "analysis/measured/measurements.hpp"
#include "analysis/calibration/cross_validation.hpp"
#include "analysis/calibration/extrapolation.hpp"
#include "analysis/calibration/step_fit.hpp"
#include "analysis/store/store.hpp"
#include "analysis/records/records.hpp"
#include "analysis/records/stored_runs.hpp"
#include "common/error.hpp"
#include "common/parse.hpp"
#include "common/table.hpp"
#include "experiments/cli.hpp"

namespace dionsim::cli {

using nlohmann::json;

namespace {

// What the three modes share: the selected runs, the interval options, the stored
// configuration and the database a run is recorded in (one transaction: all of it or nothing).
struct Validation {
  const CommonOptions& common;
  const std::vector<analysis::MeasuredConfiguration>& selected;
  const analysis::IntervalOptions& io;
  json config;
  analysis::Database* db = nullptr;
  void record(analysis::RunRecord rec) const {
    db->store(rec, analysis::OnExisting::replace);
    log(common, "recorded the validation in " + common.db);
  }
};

// --extrapolate: fit the smaller node counts, predict the largest.
void run_extrapolation(Validation v) {
  log(v.common, "extrapolation: fitting the smaller node counts of " + std::to_string(v.selected.size()) + " configurations");
  const auto e = analysis::extrapolate(v.selected, v.io);
  for (const auto& note : analysis::uncertainty_of(&e.calibration, v.io).notes) log(v.common, note);
  v.config["extrapolate"] = true;
  if (v.db) v.record(analysis::extrapolation_record(e, v.config, v.common.seed));
  if (v.common.machine()) {
    print_result(v.common, analysis::to_json(e));
    return;
  }
  std::fputs(analysis::extrapolation_text(e).c_str(), stdout);
}

// --calibration CAL: every selected configuration predicted with that calibration, unfitted.
void run_with_calibration(Validation v, const std::string& calibration) {
  const auto cal = analysis::calibration_for_runs(calibration, v.db, v.common.db, v.selected);
  log(v.common, "predicting " + std::to_string(v.selected.size()) + " configurations with calibration '" + cal.name + "'");
  const auto h = analysis::predict_holdout(v.selected, cal, v.io);
  v.config["calibration"] = calibration;
  if (v.db) {
    auto rec = analysis::validation_record(h.rows, h.summary, v.config, v.common.seed, analysis::ValidationKind::calibration);
    analysis::add_interval_results(rec, h.intervals, h.coverage, analysis::ValidationKind::calibration);
    v.record(std::move(rec));
  }
  if (v.common.machine()) {
    print_result(v.common, analysis::to_json(h));
  } else {
    std::fputs(analysis::holdout_text(h).c_str(), stdout);
  }
}

// The default: leave one configuration out, with cross-validated intervals unless no_intervals.
void run_leave_one_out(Validation v, bool in_sample, bool no_intervals) {
  const auto& common = v.common;
  const auto& selected = v.selected;
  log(common, "leave-one-out over " + std::to_string(selected.size()) + " configurations" +
                  (no_intervals ? "" : ", each with a nested leave-one-out for its intervals"));
  analysis::CrossValidation cv;
  if (no_intervals) {
    cv.rows = analysis::leave_one_out(selected);
  } else {
    cv = analysis::cross_validate(selected, v.io);
  }
  for (const auto& note : cv.notes) log(common, "intervals: " + note);
  std::vector<analysis::PredictionRow> fitted;
  if (in_sample) fitted = analysis::compare_predictions(selected, analysis::fit_step_model(selected).parameters);
  if (v.db) {
    v.config["in_sample"] = in_sample;
    if (no_intervals) v.config["intervals"] = false;
    auto rec = analysis::validation_record(cv.rows, analysis::summarize(cv.rows), v.config, common.seed);
    analysis::add_interval_results(rec, cv.intervals, cv.coverage, analysis::ValidationKind::leave_one_out);
    v.record(std::move(rec));
  }
  if (common.machine()) {
    // CSV: the held-out cells first (as before the intervals), then the summaries and the folds.
    const json result = analysis::leave_one_out_json(cv, fitted);
    auto tables = tables_from_json(result);
    std::stable_partition(tables.begin(), tables.end(), [](const Table& t) { return t.name.starts_with("leave_one_out"); });
    print_result(common, result, tables);
    return;
  }
  std::fputs(analysis::leave_one_out_text(cv, fitted, !no_intervals).c_str(), stdout);
}

}  // namespace

int run_validate(std::span<const std::string> args) {
  Command cmd("validate", "(--measured FILE.csv | --db DB) [--where KEY=VALUE …] [--in-sample | --calibration CAL | --extrapolate]",
              "Leave-one-configuration-out validation of the what-if step model: for every measured configuration,\n"
              "fit the step model on all the others (as dionsim calibrate does) and predict it with its 90 % interval\n"
              "(model-form error from a nested leave-one-out of the fold's own runs); predicted vs measured per metric,\n"
              "error %, the mean and max absolute error, and the intervals' coverage and mean half-width per metric.\n"
              "With --calibration: predict every selected configuration with that calibration, unfitted (runs it\n"
              "was not fitted on: more nodes, another fabric). --extrapolate: fit the smaller node counts, predict the largest.");
  std::string measured;
  std::vector<std::string> where;
  bool in_sample = false;
  std::string calibration;
  bool extrapolate = false, no_intervals = false;
  double fabric_spread = analysis::kPublishedFabricSpread;
  std::string inter_node_prior, net_step_prior;
  cmd.options().add_options()("measured", po::value(&measured)->value_name("FILE.csv"), "measurement CSV")(
      "where", po::value(&where)->value_name("KEY=VALUE"),
      "select configurations (repeatable; one key's values are alternatives, different keys must all match)")(
      "in-sample", po::bool_switch(&in_sample), "also fit on all selected configurations and compare in-sample")(
      "calibration", po::value(&calibration)->value_name("CAL"),
      "predict with this calibration (a `dionsim calibrate` file, or with --db a stored name) instead of leave-one-out")(
      "extrapolate", po::bool_switch(&extrapolate),
      "fit on the runs of the smaller node counts, predict the largest: error, 90 % interval and its coverage")(
      "no-intervals", po::bool_switch(&no_intervals),
      "leave-one-out errors only, without the intervals' nested leave-one-out (n fits instead of n + n(n-1)/2)")(
      "fabric-spread", po::value<std::string>()->default_value(std::to_string(analysis::kPublishedFabricSpread))->notifier([&](const std::string& v) { fabric_spread = parse_double(v, "--fabric-spread"); }),
      "relative sd of inter-node bandwidth between node sets (the intervals' fabric term; docs/calibration.md)")(
      "inter-node-prior", po::value(&inter_node_prior)->value_name("LO,HI"),
      "90 % range of the inter-node link's time as a factor on the fabric's model, for a fit without inter-node runs")(
      "net-step-prior", po::value(&net_step_prior)->value_name("LO,HI"),
      "90 % range of one network step's cost beyond the model's (us), for a fit without one from nccl-tests logs");
  cmd.offer_csv();
  if (!cmd.parse(args)) return 0;
  const auto& common = cmd.common();
  if (measured.empty() && common.db.empty())
    throw UsageError("validate: --measured FILE.csv or --db DB is required (see 'dionsim validate --help')");
  if (extrapolate && (in_sample || !calibration.empty()))
    throw UsageError("validate: --extrapolate fits its own calibration; give it without --in-sample / --calibration");
  if (in_sample && !calibration.empty()) throw UsageError("validate: --in-sample fits, --calibration does not; give one of them");
  if (no_intervals && (extrapolate || !calibration.empty()))
    throw UsageError("validate: --no-intervals applies to the leave-one-out (--extrapolate and --calibration have no nested fits)");
  analysis::IntervalOptions io;
  io.fabric_spread = fabric_spread;
  if (!inter_node_prior.empty()) analysis::parse_inter_node_prior(inter_node_prior, io);
  if (!net_step_prior.empty()) analysis::parse_net_step_prior(net_step_prior, io);
  analysis::check_interval_options(io);  // before any work
  std::optional<analysis::Database> db;
  if (!common.db.empty()) db = analysis::Database::open(common.db);
  const auto all = measured.empty() ? analysis::measured_configurations_from_db(*db)
                                    : analysis::group_configurations(analysis::read_measurement_csv(measured));
  // Validation fits one GPU at a time (calibrate fits each GPU of a selection separately).
  const auto split = analysis::split_by_hardware(analysis::select_configurations(all, where, measured.empty() ? common.db : measured));
  for (const auto& s : split.skipped) log(common, "skipped " + s.reason);
  if (split.hardware.empty()) throw InputError(split.skipped.front().reason + " (nothing selected can be fitted)");
  if (split.hardware.size() > 1)
    throw_bad_usage("--where", "", "conditions that select the runs of one GPU (validate fits one GPU; e.g. --where hardware='" +
                                       split.hardware.front().configurations.front().config.hardware + "')");
  const auto& selected = split.hardware.front().configurations;
  // What a stored validation depends on (its configuration hash); a re-run replaces it.
  json config = {{"source", measured.empty() ? common.db : measured}, {"where", where}, {"fabric_spread", fabric_spread}};
  if (!inter_node_prior.empty()) config["inter_node_prior"] = inter_node_prior;
  if (!net_step_prior.empty()) config["net_step_prior"] = net_step_prior;
  Validation v{common, selected, io, std::move(config), db ? &*db : nullptr};
  if (extrapolate) {
    run_extrapolation(std::move(v));
  } else if (!calibration.empty()) {
    run_with_calibration(std::move(v), calibration);
  } else {
    run_leave_one_out(std::move(v), in_sample, no_intervals);
  }
  return 0;
}

}  // namespace dionsim::cli
