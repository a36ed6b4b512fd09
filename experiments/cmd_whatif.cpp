// dionsim whatif: a predicted training step (fwd/bwd + FSDP + the optimizer step of a scope) for
// every configuration of a sweep. Logic: sim/whatif.hpp (configurations, runs), sim/step_program.hpp,
// sim/kernel_model.hpp, sim/training_model.hpp; calibration, records and traces via analysis/records/whatif_io.hpp.
#include <iostream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "analysis/measured/measurements.hpp"
#include "analysis/calibration/intervals.hpp"
#include "analysis/store/store.hpp"
#include "analysis/perfetto/whatif_trace_file.hpp"
#include "analysis/records/records.hpp"
#include "analysis/records/stored_runs.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/parse.hpp"
#include "common/progress.hpp"
#include "experiments/cli.hpp"
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
// The intervals of this sweep's predictions: the calibration's covariance and model-form error (a
// `dionsim calibrate` file or stored name), priors for what it does not hold; the command line's
// own step values are inputs, not uncertain.
analysis::IntervalModel whatif_interval_model(const sim::WhatifOptions& o, const std::string& calibration,
                                              const sim::KernelCalibration& cal, const analysis::Database* db,
                                              const std::string& db_label, analysis::IntervalOptions intervals) {
  if (!o.fwd_bwd_ms.empty() || !o.mfu.empty()) intervals.fixed.insert("fwd_bwd_ms");
  if (o.rank_skew_ms) intervals.fixed.insert("rank_skew_ms");
  if (o.collective_hbm_slowdown) intervals.fixed.insert("collective_hbm_slowdown");
  if (o.host_launch_us != 0.0) intervals.fixed.insert("host_launch_us");
  const auto fitted = analysis::fitted_calibration(calibration, db, db_label);
  auto u = analysis::uncertainty_of(fitted ? &*fitted : nullptr, intervals);
  return analysis::IntervalModel(cal, cal.config.hardware, std::move(u));
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
  sim::WhatifOptions o;
  std::string hardware = "h100-sxm", calibration, trace_out, trace_ranks, quality_norms;
  std::int64_t layers = 0;
  analysis::IntervalOptions intervals;
  const auto set = [](std::optional<double>& target) { return [&target](double v) { target = v; }; };
  // clang-format off
  cmd.options().add_options()
      ("model", po::value(&o.model)->required(), "seed-5120x8, gpt-<h>x<L>, gpt-1b, gpt-14b or inventory.json")
      ("optimizer", po::value(&o.optimizer)->default_value(o.optimizer), "dion2 | nordion2")
      ("ns", po::value(&o.ns)->default_value(o.ns), "polar_express | newton_schulz5 | gram (NS FLOP model), optionally +implementation (gram+triton: a calibration's rates of that variant)")
      ("scope", po::value(&o.scopes)->default_value(o.scopes), "list of local, global, global_capped")
      ("fraction", po::value(&o.fractions)->default_value(o.fractions), "list of fractions in (0, 1]")
      ("capacity-factor", po::value(&o.capacities)->default_value(o.capacities), "list for global_capped: auto or >= 1")
      ("nodes", po::value(&o.nodes), "list of host counts (1,2,4 or 1..64; default 1)")
      ("gpus", po::value(&o.gpus), "list of world sizes instead of --nodes (64,128,..: whole hosts of each fabric)")
      ("gpus-per-node", po::value<int>()->notifier([&o](int v) { o.gpus_per_node = v; }),
       "GPUs per host (default: each fabric's, 8 on HGX, 4 on NVL72 trays)")
      ("fabric", po::value(&o.fabrics)->default_value(o.fabrics), "list of presets or TOML topology files")
      ("shard-group", po::value(&o.shard_group), "list: HSDP shard group sizes (the optimizer's world; gradients "
       "all-reduced across world/G replicas); 0 = FSDP over the world (the default)")
      ("reduce-dtype", po::value(&o.reduce_dtype)->default_value(o.reduce_dtype), "FSDP gradient reduction: fp32 | bf16")
      ("layers", po::value(&layers), "FSDP units (default: the model's layers; without them the whole-step bound max(compute, FSDP comm))")
      ("nic-GBps", po::value(&o.nic_GBps), "list: override the fabrics' NIC bandwidth per GPU (nominal GB/s)")
      ("nvlink-GBps", po::value<double>()->notifier(set(o.overrides.nvlink_GBps)), "override NVLink GB/s per GPU")
      ("oversubscription", po::value<double>()->notifier(set(o.overrides.oversubscription)), "override leaf ratio")
      ("latency-us", po::value<double>()->notifier(set(o.overrides.latency_us)), "override NVLink and NIC latency")
      ("alltoall-algbw-GBps", po::value<double>()->notifier(set(o.alltoall_algbw_GBps)), "pin a2a algbw (GB/s)")
      ("hardware", po::value(&hardware)->default_value(hardware), "GPU preset or a GPU TOML file (docs/whatif.md)")
      ("calibration", po::value(&calibration), "kernel calibration JSON, a `dionsim calibrate` file, or (with --db) a stored calibration's name")
      ("fwd-bwd-ms", po::value(&o.fwd_bwd_ms), "list: forward+backward compute per step, ms")
      ("mfu", po::value(&o.mfu), "list: forward+backward MFU in (0, 1]: 6·params·tokens / (peak·mfu)")
      ("tokens-per-gpu", po::value(&o.tokens_per_gpu)->default_value(o.tokens_per_gpu), "list: tokens per GPU per step")
      ("global-batch-tokens", po::value(&o.global_batch_tokens), "list: tokens per step over the world (instead of --tokens-per-gpu)")
      ("host-launch-us", po::value(&o.host_launch_us)->default_value(0), "host cost per launch (0 = host runs ahead)")
      ("host-ahead", po::bool_switch(&o.host_ahead), "the host issues while the GPU is busy: launches cost host time (opt_cpu_span_ms) but do not hold up the GPU")
      ("rank-skew-ms", po::value<double>()->notifier(set(o.rank_skew_ms)),
       "spread (std. dev., ms) of the ranks' arrival at the optimizer step: the measured rank waits "
       "sigma * E[max of world normals] in the step's first collective (default: a calibration's, else 0)")
      ("collective-hbm-slowdown", po::value<double>()->notifier(set(o.collective_hbm_slowdown)),
       "factor (>= 1) by which a collective within one node slows while a memory-bound kernel runs "
       "beside it (default: a calibration's, else 1)")
      ("fabric-spread", po::value<std::string>()->default_value(std::to_string(analysis::kPublishedFabricSpread))->notifier([&](const std::string& v) { intervals.fabric_spread = parse_double(v, "--fabric-spread"); }),
       "relative sd of inter-node bandwidth between node sets, for the 90 % intervals (docs/calibration.md)")
      ("selection-quality", po::value(&quality_norms)->implicit_value("iid"),
       "with --json: add each configuration's selection_quality (optimizer/selection_quality.hpp); "
       "=STREAM picks the gradient stream as deferral --norms (default iid)")
      ("trace-out", po::value(&trace_out), "write a Chrome trace per configuration into this directory")
      ("trace-ranks", po::value(&trace_ranks), "ranks in traces: 0,1,.. or all (default: first 4)");
  // clang-format on
  cmd.offer_csv();
  if (!cmd.parse(args)) return 0;
  const auto& common = cmd.common();
  if (cmd.has("layers")) o.layers = layers;

  // Options -> study, validated completely before anything runs. A step-model calibration gives
  // fwd/bwd when neither --fwd-bwd-ms nor --mfu does, and its NIC/all-to-all efficiencies.
  sim::Hardware hw = sim::resolve_hardware(hardware, "--hardware");
  sim::KernelCalibration cal{hw.name, sim::default_kernel_model_config(hw), {}, {}, {}, {}};
  std::optional<analysis::Database> db;
  if (!common.db.empty()) db = analysis::Database::open(common.db);
  const analysis::Note note = [&common](const std::string& line) { log(common, line); };
  // --ns: numerics (the plan's FLOPs) + implementation ("gram+triton": a calibration's rates of that variant).
  std::string ns_variant;
  try {
    ns_variant = analysis::parse_ns_variant(o.ns, "--ns").text();
  } catch (const InputError& e) {
    throw UsageError(e.what());
  }
  o.ns = ns_variant.substr(0, ns_variant.find('+'));
  if (!calibration.empty())
    cal = analysis::load_whatif_calibration(calibration, hw, db ? &*db : nullptr, common.db, note, ns_variant);
  auto study = sim::make_study(o);
  sim::apply_step_calibration(cal.step, study);
  auto& base = study.base;
  const auto inventory = opt::load_inventory(o.model);
  if (db) analysis::use_db_gemms(*db, cal, common.db, note);
  study.alltoall_algbw_GBps_by_world = cal.alltoall_algbw_GBps_by_world;
  base.hardware = cal.config.hardware.name;
  base.calibration = calibration.empty() ? cal.name : calibration + " (" + cal.name + ")";
  if (ns_variant != o.ns) base.calibration += "; ns " + ns_variant;  // the variant's rates (config.ns: its numerics)
  const sim::KernelModel kernels(cal.config, cal.measured);
  const auto interval_model = whatif_interval_model(o, calibration, cal, db ? &*db : nullptr, common.db, intervals);
  auto configs = sim::expand(study);
  for (const auto& other : sim::apply_fabric_calibration(cal.step, study, configs))
    log(common, "calibration '" + cal.name + "' was fitted on " + cal.step.fabric + ": on " + other +
                    " its fabric parameters do not apply (the preset's NIC and all-to-all figures; GPU parameters only)");
  for (const auto& c : configs) (void)sim::trace_ranks(trace_ranks, c.world());  // every world, before running
  if (!trace_out.empty()) require_output_folder(trace_out, "--trace-out");

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
  std::int64_t skipped = 0;
  bool header_printed = false;  // printed with the first row: an error before it leaves no orphan header
  ProgressBar bar("whatif", static_cast<std::int64_t>(configs.size()), common.quiet);
  for (const auto& config : configs) {
    const auto config_json = sim::to_json(config);
    const auto hash = analysis::config_hash(config_json);
    // A stored configuration is not stored again; the (deterministic) simulation is repeated so
    // that the table, --json and --trace-out show every configuration asked for.
    const bool stored = db && !common.force && db->has_run("whatif", hash);
    if (stored) ++skipped;
    const auto result = sim::run_whatif(config, inventory, kernels);
    const auto ivs = interval_model.intervals(config, inventory);
    if (db && !stored)
      db->store(analysis::whatif_record(result, config_json, common.seed, &ivs),
                common.force ? analysis::OnExisting::replace : analysis::OnExisting::skip);
    if (!trace_out.empty()) analysis::write_whatif_trace(result, trace_out, trace_ranks);
    if (common.machine()) {
      auto row = config_json;
      row.update(sim::metrics_json(result));
      analysis::add_interval_json(row, ivs);
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
  }
  if (common.machine()) print_result(common, rows);
  return 0;
}

}  // namespace dionsim::cli
