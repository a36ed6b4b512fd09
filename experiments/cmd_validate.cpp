// dionsim validate: leave-one-configuration-out over measured runs (a measurement CSV or the
// database's measured runs, selected with --where): the step model is fitted on all but one
// configuration (analysis/calibration/step_fit.hpp) and predicts the held-out one. Prints predicted vs measured
// per metric with the error, and the mean and max absolute error per metric; --in-sample adds the
// fit on all of them; --db records the rows and the summary as a run (kind validate).
// --calibration CAL instead predicts every selected configuration with that calibration as it is
// (no fitting): the check of a calibration on runs it was not fitted on, e.g. more nodes.
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "analysis/measured/measurements.hpp"
#include "analysis/calibration/parameters.hpp"
#include "analysis/calibration/extrapolation.hpp"
#include "analysis/calibration/step_fit.hpp"
#include "analysis/store/store.hpp"
#include "analysis/perfetto/whatif_trace_file.hpp"
#include "analysis/records/records.hpp"
#include "analysis/records/stored_runs.hpp"
#include "common/error.hpp"
#include "common/parse.hpp"
#include "experiments/cli.hpp"

namespace dionsim::cli {

namespace {

using nlohmann::json;

void print_rows(const char* title, const std::vector<analysis::PredictionRow>& rows) {
  std::printf("# %s\n%-56s %-22s %12s %12s %9s\n", title, "configuration", "metric", "measured", "predicted",
              "error %");
  for (const auto& r : rows)
    std::printf("%-56s %-22s %12.4g %12.4g %+9.2f%s\n", r.configuration.c_str(), r.metric.c_str(), r.measured,
                r.predicted, r.error_pct, r.fitted ? "" : "  (not fitted)");
}

void print_summary(const char* title, const std::vector<analysis::MetricSummary>& summary) {
  std::printf("# %s\n%-22s %6s %16s %15s\n", title, "metric", "cells", "mean |error| %", "max |error| %");
  for (const auto& s : summary)
    std::printf("%-22s %6d %16.2f %15.2f\n", s.metric.c_str(), s.count, s.mean_abs_error_pct, s.max_abs_error_pct);
}

json rows_json(const std::vector<analysis::PredictionRow>& rows) {
  json out = json::array();
  for (const auto& r : rows) out.push_back(analysis::to_json(r));
  return out;
}

json summary_json(const std::vector<analysis::MetricSummary>& summary) {
  json out = json::array();
  for (const auto& s : summary) out.push_back(analysis::to_json(s));
  return out;
}

// A `dionsim calibrate` file, or (with --db) a stored calibration's name; a file wins when both
// exist. InputError for a calibration of another GPU than every selected configuration.
analysis::Calibration load_calibration(const std::string& name_or_path, const analysis::Database* db,
                                       const std::string& db_label,
                                       const std::vector<analysis::MeasuredConfiguration>& selected) {
  auto stored = analysis::stored_calibration(db, name_or_path, db_label);
  if (db != nullptr && !stored && !std::filesystem::exists(name_or_path)) {
    throw_bad_usage("--calibration", name_or_path, "a calibration file or the name of a calibration stored in " + db_label);
  }
  analysis::Calibration cal = stored ? std::move(*stored) : analysis::read_calibration(name_or_path);
  const auto gpu = analysis::gpu_preset_of(cal.hardware);
  for (const auto& c : selected) {
    const auto runs = analysis::gpu_preset_of(c.config.hardware);
    if (!gpu || !runs || runs->hardware != gpu->hardware) {
      throw_bad_input(name_or_path, "hardware", cal.hardware,
                      "the GPU of the selected runs ('" + c.config.hardware + "' in " + c.config.label() + ")");
    }
    if (cal.fabric != runs->fabric) {  // the runs are modelled on their GPU's default fabric
      throw_bad_input(name_or_path, "fabric", cal.fabric,
                      "the fabric the selected runs are modelled on (" + runs->fabric + ")");
    }
  }
  return cal;
}

}  // namespace

int run_validate(std::span<const std::string> args) {
  Command cmd("validate", "(--measured FILE.csv | --db DB) [--where KEY=VALUE …] [--in-sample | --calibration CAL]",
              "Leave-one-configuration-out validation of the what-if step model: for every measured configuration,\n"
              "fit the step model on all the others (as dionsim calibrate does) and predict it; predicted vs\n"
              "measured per metric, error %, and the mean and max absolute error per metric.\n"
              "With --calibration: predict every selected configuration with that calibration, unfitted (runs it\n"
              "was not fitted on: more nodes, another fabric).");
  std::string measured;
  std::vector<std::string> where;
  bool in_sample = false;
  std::string calibration;
  bool extrapolate = false;
  double fabric_spread = analysis::kPublishedFabricSpread;
  std::string inter_node_prior;
  cmd.options().add_options()("measured", po::value(&measured)->value_name("FILE.csv"), "measurement CSV")(
      "where", po::value(&where)->value_name("KEY=VALUE"),
      "select configurations (repeatable; one key's values are alternatives, different keys must all match)")(
      "in-sample", po::bool_switch(&in_sample), "also fit on all selected configurations and compare in-sample")(
      "calibration", po::value(&calibration)->value_name("CAL"),
      "predict with this calibration (a `dionsim calibrate` file, or with --db a stored name) instead of leave-one-out")(
      "extrapolate", po::bool_switch(&extrapolate),
      "fit on the runs of the smaller node counts, predict the largest: error, 90 % interval and its coverage")(
      "fabric-spread", po::value<std::string>()->default_value(std::to_string(analysis::kPublishedFabricSpread))->notifier([&](const std::string& v) { fabric_spread = parse_double(v, "--fabric-spread"); }),
      "relative sd of inter-node bandwidth between node sets (the intervals' fabric term; docs/calibration.md)")(
      "inter-node-prior", po::value(&inter_node_prior)->value_name("LO,HI"),
      "90 % range of the inter-node link's time as a factor on the fabric's model, for a fit without inter-node runs");
  cmd.offer_csv();
  if (!cmd.parse(args)) return 0;
  const auto& common = cmd.common();
  if (measured.empty() && common.db.empty())
    throw UsageError("validate: --measured FILE.csv or --db DB is required (see 'dionsim validate --help')");
  std::optional<analysis::Database> db;
  if (!common.db.empty()) db = analysis::Database::open(common.db);
  const auto all = measured.empty() ? analysis::measured_configurations_from_db(*db)
                                    : analysis::group_configurations(analysis::read_measurement_csv(measured));
  // Validation fits one GPU at a time (calibrate fits each GPU of a selection separately).
  const auto split = analysis::split_by_hardware(analysis::select_configurations(all, where));
  for (const auto& s : split.skipped) log(common, "skipped " + s.reason);
  if (split.hardware.empty()) throw InputError(split.skipped.front().reason + " (nothing selected can be fitted)");
  if (split.hardware.size() > 1)
    throw_bad_usage("--where", "", "conditions that select the runs of one GPU (validate fits one GPU; e.g. --where hardware='" +
                                       split.hardware.front().configurations.front().config.hardware + "')");
  const auto& selected = split.hardware.front().configurations;
  if (extrapolate) {
    if (in_sample || !calibration.empty())
      throw UsageError("validate: --extrapolate fits its own calibration; give it without --in-sample / --calibration");
    analysis::IntervalOptions io;
    io.fabric_spread = fabric_spread;
    if (!inter_node_prior.empty()) analysis::parse_inter_node_prior(inter_node_prior, io);
    analysis::check_interval_options(io);
    log(common, "extrapolation: fitting the smaller node counts of " + std::to_string(selected.size()) + " configurations");
    const auto e = analysis::extrapolate(selected, io);
    for (const auto& note : analysis::uncertainty_of(&e.calibration, io).notes) log(common, note);
    if (common.machine()) {
      print_result(common, analysis::to_json(e));
      return 0;
    }
    std::printf("# fitted on %zu node count(s) up to %d, predicted %d nodes (90 %% intervals)\n%s\n%s\n# differences on one node set\n%s",
                e.fit_nodes.size(), e.fit_nodes.back(), e.predicted_nodes, analysis::interval_rows_table(e.rows).c_str(),
                analysis::coverage_table(e.summary).c_str(), analysis::differences_table(e.differences).c_str());
    return 0;
  }

  if (!calibration.empty()) {
    if (in_sample) throw UsageError("validate: --in-sample fits, --calibration does not; give one of them");
    const auto cal = load_calibration(calibration, db ? &*db : nullptr, common.db, selected);
    std::map<std::string, double> parameters;
    for (const auto& [name, p] : cal.parameters) parameters[name] = p.value;
    log(common, "predicting " + std::to_string(selected.size()) + " configurations with calibration '" + cal.name + "'");
    const auto rows = analysis::compare_predictions(selected, parameters);
    const auto summary = analysis::summarize(rows);
    analysis::IntervalOptions io;
    io.fabric_spread = fabric_spread;
    if (!inter_node_prior.empty()) analysis::parse_inter_node_prior(inter_node_prior, io);
    const auto intervals = analysis::predict_with_intervals(selected, cal, io);
    json interval_rows = json::array();
    for (const auto& r : intervals) interval_rows.push_back(analysis::to_json(r));
    json coverage = json::array();
    for (const auto& s : analysis::summarize_coverage(intervals)) coverage.push_back(analysis::to_json(s));
    if (db) {
      json config = {{"source", measured.empty() ? common.db : measured}, {"where", where}, {"calibration", calibration}};
      db->store(analysis::validation_record(rows, summary, config, common.seed, analysis::ValidationKind::calibration),
                analysis::OnExisting::replace);
      log(common, "recorded the validation in " + common.db);
    }
    if (common.machine()) {
      print_result(common, {{"calibration", cal.name}, {"predicted", rows_json(rows)}, {"predicted_summary", summary_json(summary)},
                            {"predicted_intervals", interval_rows}, {"coverage_summary", coverage}});
      return 0;
    }
    const std::string title = "predicted with calibration '" + cal.name + "' (not fitted on these runs)";
    print_rows(title.c_str(), rows);
    print_summary("summary", summary);
    std::printf("# 90 %% intervals\n%s\n%s", analysis::interval_rows_table(intervals).c_str(),
                analysis::coverage_table(analysis::summarize_coverage(intervals)).c_str());
    return 0;
  }

  log(common, "leave-one-out over " + std::to_string(selected.size()) + " configurations");
  const auto loo = analysis::leave_one_out(selected);
  const auto loo_summary = analysis::summarize(loo);
  std::vector<analysis::PredictionRow> fitted;
  if (in_sample) fitted = analysis::compare_predictions(selected, analysis::fit_step_model(selected).parameters);
  const auto fitted_summary = analysis::summarize(fitted);

  json result = {{"leave_one_out", rows_json(loo)}, {"leave_one_out_summary", summary_json(loo_summary)}};
  if (in_sample) {
    result["in_sample"] = rows_json(fitted);
    result["in_sample_summary"] = summary_json(fitted_summary);
  }
  if (db) {
    json config = {{"source", measured.empty() ? common.db : measured}, {"where", where}, {"in_sample", in_sample}};
    const auto rec = analysis::validation_record(loo, loo_summary, config, common.seed);
    db->store(rec, analysis::OnExisting::replace);
    log(common, "recorded the validation in " + common.db);
  }
  if (common.machine()) {
    print_result(common, result);
    return 0;
  }
  if (in_sample) {
    print_rows("in-sample (fitted on all selected configurations)", fitted);
    print_summary("in-sample summary", fitted_summary);
  }
  print_rows("leave-one-configuration-out (each configuration predicted by a fit on the others)", loo);
  print_summary("leave-one-out summary", loo_summary);
  return 0;
}

}  // namespace dionsim::cli
