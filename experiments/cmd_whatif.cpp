// dionsim whatif: a predicted training step (fwd/bwd + FSDP + the optimizer step of a scope) for
// every configuration of a sweep. Logic: sim/whatif.hpp (configurations, runs), sim/step_program.hpp,
// sim/kernel_model.hpp, sim/training_model.hpp; traces via analysis/perfetto.hpp.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "analysis/fit_calibration.hpp"
#include "analysis/perfetto.hpp"
#include "analysis/store.hpp"
#include "common/error.hpp"
#include "common/parse.hpp"
#include "common/progress.hpp"
#include "experiments/cli.hpp"
#include "sim/whatif.hpp"
#include "sim/whatif_calibration.hpp"
#include "sim/whatif_trace.hpp"

namespace dionsim::cli {

namespace {

void write_trace(const sim::WhatifResult& r, const std::string& dir, const std::string& ranks_spec) {
  std::filesystem::create_directories(dir);
  analysis::TraceWriter out(std::filesystem::path(dir) / sim::trace_file_name(r.config));
  const auto events = sim::trace_events(r);
  for (auto rank : sim::trace_ranks(ranks_spec, r.config.world())) {
    const int pid = static_cast<int>(rank);
    out.process_name(pid, "rank " + std::to_string(rank));
    for (const auto& t : sim::trace_threads()) out.thread_name(pid, t.tid, t.name);
    for (const auto& e : events) {
      out.complete(pid, e.tid, e.name, e.category, analysis::TracePs::from_ns(e.start_ns),
                   analysis::TracePs::from_ns(e.duration_ns), e.args);
    }
  }
  out.close();
}

// The run as the database stores it: the configuration, every metric (unit from its name's
// suffix), and rank 0's optimizer phases (all ranks alike under the plan's symmetry).
analysis::RunRecord record_of(const sim::WhatifResult& r, const nlohmann::json& config, std::uint64_t seed) {
  auto rec = analysis::RunRecord::begin("whatif", analysis::RunMode::simulated, config, seed);
  const auto metrics = sim::metrics_json(r);
  for (const auto& [name, value] : metrics.items()) {
    if (!value.is_number()) continue;
    const std::string unit = name.ends_with("_ms")      ? "ms"
                             : name.ends_with("_bytes") ? "bytes"
                             : name.ends_with("_pct")   ? "pct"
                                                        : "";
    analysis::MetricRow m;
    m.name = name;
    m.value = value.get<double>();
    m.unit = unit;
    rec.metrics.push_back(std::move(m));
  }
  for (const auto& e : r.opt.events) {
    const bool compute = e.stream == sim::StreamKind::compute;
    analysis::PhaseRow p;  // rank 0, step 0
    p.megabatch = e.task;
    p.phase = e.name;
    p.kernel_class = compute ? e.name : "nccl_" + e.name;
    p.start_ns = e.start_ns;
    p.duration_ns = e.duration_ns;
    p.bytes = e.bytes;
    p.flops = static_cast<std::int64_t>(e.flops);
    rec.phases.push_back(std::move(p));
  }
  return rec;
}

// Measured bf16 GEMMs of this GPU in the database replace the compiled-in anchors.
void use_db_gemms(const analysis::Database& db, sim::KernelCalibration& cal, const CommonOptions& common) {
  std::string gpu = cal.config.hardware.name.substr(0, cal.config.hardware.name.find('-'));
  for (auto& c : gpu) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::vector<sim::GemmAnchor> anchors;
  for (const auto& label : {gpu, "NVIDIA " + gpu}) {
    for (const auto& t : db.kernel_timings(label, "gemm", "bf16")) {
      anchors.push_back(sim::gemm_anchor_from_timing(t.m, t.n, t.k, t.batch, t.time_us));
    }
  }
  if (anchors.empty()) return;
  cal.config.gemm_anchors = anchors;
  cal.config.anchors_peak_TFLOPs = cal.config.hardware.peak_bf16_TFLOPs;
  cal.name += "+db-gemms(" + std::to_string(anchors.size()) + ")";
  log(common, common.db + ": GEMM efficiency from " + std::to_string(anchors.size()) + " measured " + gpu + " GEMMs");
}

// A `dionsim calibrate` file (schema_version) or a kernel calibration (schema); with --db, a name
// that is not a file is looked up in the database's calibrations.
sim::KernelCalibration load_calibration(const std::string& path, const sim::Hardware& hw, const CommonOptions& common,
                                        const analysis::Database* db) {
  if (db && !std::filesystem::exists(path)) {
    if (const auto row = db->calibration(path)) {
      const auto fitted = analysis::calibration_from_json(row->body, common.db + ": calibration '" + path + "'");
      std::map<std::string, double> values;
      for (const auto& [name, p] : fitted.parameters) values[name] = p.value;
      auto cal = sim::kernel_calibration_from_parameters(fitted.name, fitted.hardware, values, hw);
      for (const auto& name : cal.unused_parameters) log(common, path + ": " + name + " is not used by whatif");
      return cal;
    }
  }
  std::ifstream in(path);
  if (!in) throw IoError(path + ": cannot open the calibration file");
  const auto doc = nlohmann::json::parse(in, nullptr, false);
  if (!doc.is_object() || !doc.contains("schema_version")) return sim::load_kernel_calibration(path, hw);
  const auto fitted = analysis::read_calibration(path);  // strict: other versions, unknown keys
  std::map<std::string, double> values;
  for (const auto& [name, p] : fitted.parameters) values[name] = p.value;
  auto cal = sim::kernel_calibration_from_parameters(fitted.name, fitted.hardware, values, hw);
  for (const auto& name : cal.unused_parameters) log(common, path + ": " + name + " is not used by whatif");
  return cal;
}

}  // namespace

int run_whatif(std::span<const std::string> args) {
  Command cmd("whatif",
              "--model M [--scope S,..] [--fraction F,..] [--nodes N,..] [--fabric F,..] (--fwd-bwd-ms X | --mfu X)",
              "Predicts the training step of every configuration of the sweep (cross product of the list options):\n"
              "forward/backward with FSDP2 collectives, then the optimizer step of the scope from its plan on\n"
              "per-rank compute and collective streams, collectives simulated on the fabric.");
  sim::WhatifOptions o;
  std::string hardware = "h100-sxm", calibration, trace_out, trace_ranks;
  const auto set = [](std::optional<double>& target) { return [&target](double v) { target = v; }; };
  // clang-format off
  cmd.options().add_options()
      ("model", po::value(&o.model)->required(), "seed-5120x8, gpt-<h>x<L>, gpt-1b, gpt-14b or inventory.json")
      ("optimizer", po::value(&o.optimizer)->default_value(o.optimizer), "dion2 | nordion2")
      ("ns", po::value(&o.ns)->default_value(o.ns), "polar_express | newton_schulz5 | gram (NS FLOP model)")
      ("scope", po::value(&o.scopes)->default_value(o.scopes), "list of local, global, global_capped")
      ("fraction", po::value(&o.fractions)->default_value(o.fractions), "list of fractions in (0, 1]")
      ("capacity-factor", po::value(&o.capacities)->default_value(o.capacities), "list for global_capped: auto or >= 1")
      ("nodes", po::value(&o.nodes)->default_value(o.nodes), "list of node counts (1,2,4 or 1..64)")
      ("gpus-per-node", po::value(&o.gpus_per_node)->default_value(o.gpus_per_node), "GPUs per node")
      ("fabric", po::value(&o.fabrics)->default_value(o.fabrics), "list of presets or TOML topology files")
      ("nic-GBps", po::value(&o.nic_GBps), "list: override the fabrics' NIC bandwidth per GPU (nominal GB/s)")
      ("nvlink-GBps", po::value<double>()->notifier(set(o.overrides.nvlink_GBps)), "override NVLink GB/s per GPU")
      ("oversubscription", po::value<double>()->notifier(set(o.overrides.oversubscription)), "override leaf ratio")
      ("latency-us", po::value<double>()->notifier(set(o.overrides.latency_us)), "override NVLink and NIC latency")
      ("alltoall-algbw-GBps", po::value<double>()->notifier(set(o.alltoall_algbw_GBps)), "pin a2a algbw (GB/s)")
      ("hardware", po::value(&hardware)->default_value(hardware), "GPU: h100-sxm | h200")
      ("calibration", po::value(&calibration), "kernel calibration JSON, a `dionsim calibrate` file, or (with --db) a stored calibration's name")
      ("fwd-bwd-ms", po::value<double>()->notifier(set(o.fwd_bwd_ms)), "forward+backward compute per step, ms")
      ("mfu", po::value<double>()->notifier(set(o.mfu)), "forward+backward MFU in (0, 1]: 6·params·tokens / (peak·mfu)")
      ("tokens-per-gpu", po::value(&o.tokens_per_gpu)->default_value(o.tokens_per_gpu), "tokens per GPU per step")
      ("host-launch-us", po::value(&o.host_launch_us)->default_value(0), "host cost per launch (0 = host runs ahead)")
      ("trace-out", po::value(&trace_out), "write a Chrome trace per configuration into this directory")
      ("trace-ranks", po::value(&trace_ranks), "ranks in traces: 0,1,.. or all (default: first 4)");
  // clang-format on
  if (!cmd.parse(args)) return 0;
  const auto& common = cmd.common();

  // Options -> study, validated completely before anything runs. A step-model calibration gives
  // fwd/bwd when neither --fwd-bwd-ms nor --mfu does, and its NIC/all-to-all efficiencies.
  sim::Hardware hw = sim::hardware_preset(hardware, "--hardware");
  sim::KernelCalibration cal{hw.name, sim::default_kernel_model_config(hw), {}, {}, {}, {}};
  std::optional<analysis::Database> db;
  if (!common.db.empty()) db = analysis::Database::open(common.db);
  if (!calibration.empty()) cal = load_calibration(calibration, hw, common, db ? &*db : nullptr);
  if (cal.step.fwd_bwd_ms && !o.fwd_bwd_ms && !o.mfu) o.fwd_bwd_ms = cal.step.fwd_bwd_ms;
  auto study = sim::make_study(o);
  sim::apply_step_calibration(cal.step, study);
  auto& base = study.base;
  const auto inventory = opt::load_inventory(o.model);
  if (db) use_db_gemms(*db, cal, common);
  study.alltoall_algbw_GBps_by_world = cal.alltoall_algbw_GBps_by_world;
  base.hardware = cal.config.hardware.name;
  base.calibration = calibration.empty() ? cal.name : calibration + " (" + cal.name + ")";
  const sim::KernelModel kernels(cal.config, cal.measured);
  const auto configs = sim::expand(study);
  for (const auto& c : configs) (void)sim::trace_ranks(trace_ranks, c.world());  // every world, before running

  nlohmann::json rows = nlohmann::json::array();
  std::int64_t skipped = 0;
  if (!common.json) std::cout << sim::table_header() << '\n';
  ProgressBar bar("whatif", static_cast<std::int64_t>(configs.size()), common.quiet);
  for (const auto& config : configs) {
    const auto config_json = sim::to_json(config);
    const auto hash = analysis::config_hash(config_json);
    if (db && !common.force && db->has_run("whatif", hash)) {
      ++skipped;  // a re-run resumes: stored configurations are not simulated again
      bar.advance();
      continue;
    }
    const auto result = sim::run_whatif(config, inventory, kernels);
    if (db)
      db->store(record_of(result, config_json, common.seed),
                common.force ? analysis::OnExisting::replace : analysis::OnExisting::keep);
    if (!trace_out.empty()) write_trace(result, trace_out, trace_ranks);
    if (common.json) {
      auto row = config_json;
      row.update(sim::metrics_json(result));
      rows.push_back(std::move(row));
    } else {
      std::cout << sim::table_row(result) << '\n' << std::flush;
    }
    bar.advance();
  }
  bar.finish();
  if (skipped > 0) {
    log(common, std::to_string(skipped) + " of " + std::to_string(configs.size()) + " configurations already in " +
                    common.db + " (skipped; --force re-runs them)");
  }
  if (common.json) print_json(rows);
  return 0;
}

}  // namespace dionsim::cli
