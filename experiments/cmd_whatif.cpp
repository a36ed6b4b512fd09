// dionsim whatif: a predicted training step (fwd/bwd + FSDP + the optimizer step of a scope) for
// every configuration of a sweep. Logic: sim/whatif.hpp (configurations, runs), sim/step_program.hpp,
// sim/kernel_model.hpp, sim/training_model.hpp; calibration, records and traces via analysis/records/whatif_io.hpp.
#include <iostream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "analysis/measured/measurements.hpp"
#include "analysis/calibration/intervals.hpp"
#include "analysis/calibration/published_intervals.hpp"
#include "analysis/store/store.hpp"
#include "analysis/perfetto/whatif_trace_file.hpp"
#include "analysis/records/records.hpp"
#include "analysis/records/stored_runs.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/parse.hpp"
#include "common/progress.hpp"
#include "experiments/cli.hpp"
#include "experiments/record.hpp"
#include "experiments/whatif_cli.hpp"
#include "optimizer/selection_quality.hpp"
#include "sim/whatif.hpp"
#include "topologies/topology.hpp"
#include "sim/whatif_calibration.hpp"
#include "sim/whatif_trace.hpp"

namespace dionsim::cli {
namespace {
std::string topo_presets() {
  std::string out;
  for (const auto& n : topo::preset_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}
}  // namespace

int run_whatif(std::span<const std::string> args) {
  Command cmd("whatif",
              "--model M [--scope S,..] [--fraction F,..] [--nodes N,.. | --gpus W,..] [--fabric F,..] "
              "[--shard-group G,..] (--fwd-bwd-ms X,.. | --mfu X,..)",
              "Predicts the training step of every configuration of the sweep (cross product of the list options):\n"
              "forward/backward with FSDP2 collectives, then the optimizer step of the scope from its plan on\n"
              "per-rank compute and collective streams, collectives simulated on the fabric.\n"
              "Fabric presets: " + topo_presets() + "\nGPU presets: " + sim::hardware_preset_list());
  WhatifCli cli;
  std::string trace_out, trace_ranks, quality_norms;
  add_whatif_options(cmd.options(), cli);
  cmd.options().add_options()
      ("trace-out", po::value(&trace_out), "write a Chrome trace per configuration into this directory")
      ("trace-ranks", po::value(&trace_ranks), "ranks in traces: 0,1,.. or all (default: first 4)")
      ("selection-quality", po::value(&quality_norms)->implicit_value("iid"),
       "with --json: add each configuration's selection_quality (optimizer/selection_quality.hpp); "
       "=STREAM picks the gradient stream as deferral --norms (default iid)");
  cmd.offer_csv();
  if (!cmd.parse(args)) return 0;
  const auto& common = cmd.common();
  WhatifSetup setup = resolve_whatif(cli, cmd);
  auto& db = setup.db;
  const auto& inventory = setup.inventory;
  const sim::KernelModel& kernels = *setup.kernels;
  const analysis::IntervalModel& interval_model = *setup.intervals;
  const auto configs = expand_calibrated(setup, common);
  for (const auto& c : configs) (void)sim::trace_ranks(trace_ranks, c.world());  // every world, before running
  if (!trace_out.empty()) require_output_folder(trace_out, "--trace-out");
  warn_degenerate(sim::degeneracy_notes(configs, inventory));

  std::optional<opt::SelectionQualityCache> quality;
  if (cmd.has("selection-quality")) {
    if (!common.json) throw_bad_usage("--selection-quality", quality_norms, "together with --json (tables have no such column)");
    opt::SelectionQualityConfig q;
    q.inventory = inventory;
    q.stream = opt::parse_norm_stream(quality_norms, "--selection-quality");
    q.stream_flag = "--selection-quality";
    if (q.stream.kind == opt::StreamKind::replay) (void)analysis::load_replay(q.stream);
    q.seed = common.seed;
    for (const auto& c : configs) {  // every configuration, before any work
      q.plan = c.plan_config();
      opt::validate(q);
    }
    quality.emplace(std::move(q));
  }
  nlohmann::json rows = nlohmann::json::array();
  std::int64_t skipped = 0, skipped_other_revision = 0;
  bool header_printed = false;  // printed with the first row: an error before it leaves no orphan header
  ProgressBar bar("whatif", static_cast<std::int64_t>(configs.size()), common.quiet);
  for (const auto& config : configs) {
    auto config_json = sim::to_json(config);
    // Other interval options give other stored intervals: another run.
    if (const auto o = analysis::interval_options_json(cli.intervals); !o.is_null()) config_json["interval_options"] = o;
    const auto hash = analysis::config_hash(config_json);
    // A stored configuration is not stored again; the (deterministic) simulation is repeated so
    // that the table, --json and --trace-out show every configuration asked for.
    const auto stored_by = db && !common.force ? db->stored_revision("whatif", hash) : std::nullopt;
    const bool stored = stored_by.has_value();
    if (stored) ++skipped;
    if (stored && Recorder::other_revision(*stored_by)) ++skipped_other_revision;
    const auto result = sim::run_whatif(config, inventory, kernels);
    const auto ivs = interval_model.intervals(config, inventory);
    // The stress bounds: every collective at the published record's ends (--json and --db only:
    // two more simulations, not run for the table).
    const auto stress = (db && !stored) || common.machine() ? analysis::collective_record_stress_json(config, inventory, kernels)
                                               : nlohmann::json::object();
    if (db && !stored) {
      auto record = analysis::whatif_record(result, config_json, common.seed, &ivs);
      for (const auto& [name, value] : stress.items())
        record.metrics.push_back({.name = name, .value = value.get<double>(), .unit = "ms"});
      db->store(record, common.force ? analysis::OnExisting::replace : analysis::OnExisting::skip);
    }
    if (!trace_out.empty()) analysis::write_whatif_trace(result, trace_out, trace_ranks);
    if (common.machine()) {
      auto row = config_json;
      row.update(sim::metrics_json(result));
      analysis::add_interval_json(row, ivs);
      row.update(stress);
      row["optimizer_collectives"] = sim::collectives_json(result);
      if (quality) row["selection_quality"] = opt::to_json(quality->get(config.plan_config()));
      rows.push_back(std::move(row));
    } else {
      if (!header_printed) std::cout << sim::table_header(true) << '\n';
      header_printed = true;
      const auto halves = analysis::half_widths(ivs);
      std::cout << sim::table_row(result, &halves) << '\n' << std::flush;
    }
    bar.advance();
  }
  bar.finish();
  for (const auto& line : interval_model.uncertainty().notes) log(common, "intervals: " + line);
  if (skipped > 0) {
    log(common, std::to_string(skipped) + " of " + std::to_string(configs.size()) + " configurations already stored in " +
                    common.db + ": shown (re-simulated, deterministic) but not stored again; --force replaces them");
    if (skipped_other_revision > 0)
      log(common, std::to_string(skipped_other_revision) + " of them another dionsim revision stored (this is " +
                      analysis::git_revision() + "): the table shows this version's numbers, the file keeps that "
                      "one's (report, export and compare read the file)");
  }
  if (common.machine()) print_result(common, rows);
  return 0;
}

}  // namespace dionsim::cli
