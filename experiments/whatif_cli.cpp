#include "experiments/whatif_cli.hpp"

#include <iostream>

#include "analysis/measured/measurements.hpp"
#include "analysis/records/stored_runs.hpp"
#include "common/error.hpp"
#include "common/parse.hpp"

namespace dionsim::cli {

void add_whatif_options(po::options_description& options, WhatifCli& cli) {
  auto& o = cli.options;
  const auto set = [](std::optional<double>& target) { return [&target](double v) { target = v; }; };
  // clang-format off
  options.add_options()
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
      ("fabric", po::value(&o.fabrics)->default_value(o.fabrics), "list of presets (an NVL72 one with @<GPUs per rack>: gb200-nvl72@64) or TOML topology files")
      ("shard-group", po::value(&o.shard_group), "list: HSDP shard group sizes (the optimizer's world; gradients "
       "all-reduced across world/G replicas); 0 = FSDP over the world (the default)")
      ("reduce-dtype", po::value(&o.reduce_dtype)->default_value(o.reduce_dtype), "FSDP gradient reduction: fp32 | bf16")
      ("layers", po::value(&cli.layers), "FSDP units (default: the model's layers; without them the whole-step bound max(compute, FSDP comm))")
      ("nic-GBps", po::value(&o.nic_GBps), "list: override the fabrics' NIC bandwidth per GPU (nominal GB/s)")
      ("nvlink-GBps", po::value<double>()->notifier(set(o.overrides.nvlink_GBps)), "override NVLink GB/s per GPU")
      ("oversubscription", po::value<double>()->notifier(set(o.overrides.oversubscription)), "override leaf ratio")
      ("latency-us", po::value<double>()->notifier(set(o.overrides.latency_us)), "override NVLink and NIC latency")
      ("alltoall-algbw-GBps", po::value<double>()->notifier(set(o.alltoall_algbw_GBps)), "pin a2a algbw (GB/s)")
      ("hardware", po::value(&cli.hardware)->default_value(cli.hardware), "GPU preset or a GPU TOML file (docs/whatif.md)")
      ("calibration", po::value(&cli.calibration), "kernel calibration JSON, a `dionsim calibrate` file, or (with --db) a stored calibration's name")
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
      ("fabric-spread", po::value<std::string>()->default_value(std::to_string(analysis::kPublishedFabricSpread))->notifier(
           [&cli](const std::string& v) { cli.intervals.fabric_spread = parse_double(v, "--fabric-spread"); }),
       "relative sd of inter-node bandwidth between node sets, for the 90 % intervals (docs/calibration.md)")
      ("inter-node-prior", po::value<std::string>()->value_name("LO,HI")->notifier(
           [&cli](const std::string& v) { analysis::parse_inter_node_prior(v, cli.intervals); }),
       "90 % range of the inter-node link's time as a factor on the fabric's model, for a calibration without "
       "inter-node runs (default: the published clusters', 0.780,3.198; docs/calibration.md)")
      ("net-step-prior", po::value<std::string>()->value_name("LO,HI")->notifier(
           [&cli](const std::string& v) { analysis::parse_net_step_prior(v, cli.intervals); }),
       "90 % range of one network step's cost beyond the model's (us; collectives and the all-to-all's network "
       "rounds), for a calibration without one from nccl-tests logs (default: the published clusters', -0.6,64.1; "
       "docs/calibration.md)")
      ("deferral-estimate", po::value(&o.deferral_estimate)->default_value(o.deferral_estimate),
       "global_capped's deferral by the deferral engine: analytic (spec §4.12, first step, iid) | simulated "
       "(--deferral-steps of momentum + error feedback, the optimizer's own capped pack)")
      ("steps", po::value(&o.deferral_steps)->default_value(o.deferral_steps),
       "optimizer steps of momentum + error feedback simulated for a simulated deferral estimate (and recommend's selection quality)")
      ("norms", po::value(&o.norms)->default_value(o.norms),
       "gradient statistics of those steps: iid | lognormal:SIGMA | skew:rank=R,factor=F | "
       "skew:rows=P,factor=F | replay:DB (as in `dionsim deferral`)");
  // clang-format on
}

WhatifSetup resolve_whatif(WhatifCli& cli, const Command& cmd) {
  const auto& common = cmd.common();
  if (cmd.has("layers")) cli.options.layers = cli.layers;
  // Options -> study, validated completely before anything runs. A step-model calibration gives
  // fwd/bwd when neither --fwd-bwd-ms nor --mfu does, and its NIC/all-to-all efficiencies.
  if (!cli.dynamics_always && cli.options.deferral_estimate != "simulated") {
    for (const char* flag : {"norms", "steps"}) {
      if (cmd.has(flag)) {
        throw UsageError(std::string("--") + flag + " applies to --deferral-estimate simulated only (the analytic "
                         "deferral estimate is one step of iid gradients; whatif's selection quality takes "
                         "--selection-quality=STREAM)");
      }
    }
  }
  WhatifSetup s;
  const sim::Hardware hw = sim::resolve_hardware(cli.hardware, "--hardware");
  s.calibration = {hw.name, sim::default_kernel_model_config(hw), {}, {}, {}, {}};
  if (!common.db.empty()) s.db = analysis::Database::open(common.db);
  const analysis::Note note = [&common](const std::string& line) { log(common, line); };
  // --ns: numerics (the plan's FLOPs) + implementation ("gram+triton": a calibration's rates of that variant).
  std::string ns_variant;
  try {
    ns_variant = analysis::parse_ns_variant(cli.options.ns, "--ns").text();
  } catch (const InputError& e) {
    throw UsageError(e.what());
  }
  cli.options.ns = ns_variant.substr(0, ns_variant.find('+'));
  if (!cli.calibration.empty()) {
    s.calibration =
        analysis::load_whatif_calibration(cli.calibration, hw, s.db ? &*s.db : nullptr, common.db, note, ns_variant);
  }
  s.study = sim::make_study(cli.options);
  sim::apply_step_calibration(s.calibration.step, s.study);
  auto& base = s.study.base;
  base.deferral.seed = common.seed;
  if (base.deferral.stream.kind == opt::StreamKind::replay) {
    (void)analysis::load_replay(base.deferral.stream);  // the file is checked before any work
  }
  s.inventory = opt::load_inventory(cli.options.model);
  if (s.db) analysis::use_db_gemms(*s.db, s.calibration, common.db, note);
  s.study.alltoall_algbw_GBps_by_world = s.calibration.alltoall_algbw_GBps_by_world;
  base.hardware = s.calibration.config.hardware.name;
  base.calibration = cli.calibration.empty() ? s.calibration.name : cli.calibration + " (" + s.calibration.name + ")";
  if (ns_variant != cli.options.ns) base.calibration += "; ns " + ns_variant;  // the variant's rates (config.ns: its numerics)
  s.kernels.emplace(s.calibration.config, s.calibration.measured);
  const auto& o = cli.options;
  analysis::IntervalOptions io = cli.intervals;
  if (!o.fwd_bwd_ms.empty() || !o.mfu.empty()) io.fixed.insert("fwd_bwd_ms");
  if (o.rank_skew_ms) io.fixed.insert("rank_skew_ms");
  if (o.collective_hbm_slowdown) io.fixed.insert("collective_hbm_slowdown");
  if (o.host_launch_us != 0.0) io.fixed.insert("host_launch_us");
  const auto fitted = analysis::fitted_calibration(cli.calibration, s.db ? &*s.db : nullptr, common.db);
  s.intervals.emplace(s.calibration, s.calibration.config.hardware,
                      analysis::uncertainty_of(fitted ? &*fitted : nullptr, io));
  return s;
}

std::vector<sim::WhatifConfig> expand_calibrated(const WhatifSetup& setup, const CommonOptions& common) {
  auto configs = sim::expand(setup.study);
  for (const auto& other : sim::apply_fabric_calibration(setup.calibration.step, setup.study, configs))
    log(common, "calibration '" + setup.calibration.name + "' was fitted on " + setup.calibration.step.fabric + ": on " +
                    other + " its fabric parameters do not apply (the preset's NIC and all-to-all figures; GPU parameters only)");
  return configs;
}

void warn_degenerate(const std::vector<std::string>& notes) {
  for (const auto& n : notes) std::cerr << "dionsim: warning: " << n << '\n';
}

}  // namespace dionsim::cli
