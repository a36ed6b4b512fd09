// dionsim validate: leave-one-configuration-out over measured runs (a measurement CSV or the
// database's measured runs, selected with --where): the step model is fitted on all but one
// configuration (analysis/step_fit.hpp) and predicts the held-out one. Prints predicted vs measured
// per metric with the error, and the mean and max absolute error per metric; --in-sample adds the
// fit on all of them; --db records the rows and the summary as a run (kind validate).
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "analysis/measurements.hpp"
#include "analysis/step_fit.hpp"
#include "analysis/store.hpp"
#include "common/error.hpp"
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

}  // namespace

int run_validate(std::span<const std::string> args) {
  Command cmd("validate", "(--measured FILE.csv | --db DB) [--where KEY=VALUE …] [--in-sample]",
              "Leave-one-configuration-out validation of the what-if step model: for every measured configuration,\n"
              "fit the step model on all the others (as dionsim calibrate does) and predict it; predicted vs\n"
              "measured per metric, error %, and the mean and max absolute error per metric.");
  std::string measured;
  std::vector<std::string> where;
  bool in_sample = false;
  cmd.options().add_options()("measured", po::value(&measured)->value_name("FILE.csv"), "measurement CSV")(
      "where", po::value(&where)->value_name("KEY=VALUE"),
      "select configurations (repeatable; one key's values are alternatives, different keys must all match)")(
      "in-sample", po::bool_switch(&in_sample), "also fit on all selected configurations and compare in-sample");
  if (!cmd.parse(args)) return 0;
  const auto& common = cmd.common();
  if (measured.empty() && common.db.empty())
    throw UsageError("validate: --measured FILE.csv or --db DB is required (see 'dionsim validate --help')");
  std::optional<analysis::Database> db;
  if (!common.db.empty()) db = analysis::Database::open(common.db);
  const auto all = measured.empty() ? analysis::measured_configurations_from_db(*db)
                                    : analysis::group_configurations(analysis::read_measurement_csv(measured));
  const auto selected = analysis::select_configurations(all, where);

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
  if (common.json) {
    print_json(result);
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
