// dionsim plan: the optimizer plan of a model at one world size and scope (bytes, k, B, routing,
// FLOPs per shape group and phase). Logic: optimizer/plan.hpp.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "common/error.hpp"
#include "common/parse.hpp"
#include "experiments/cli.hpp"
#include "experiments/record.hpp"
#include "optimizer/inventory.hpp"
#include "optimizer/plan.hpp"
#include "optimizer/plan_json.hpp"

namespace dionsim::cli {

namespace {

void print_table(const opt::Plan& plan) {
  const auto& c = plan.config;
  std::printf("# model %s  world %lld  scope %s  fraction %g  capacity_factor %s  optimizer %s  ns %s  %s\n",
              plan.model.c_str(), static_cast<long long>(c.world), std::string(opt::to_string(c.scope)).c_str(),
              c.fraction, c.capacity_factor ? std::to_string(*c.capacity_factor).c_str() : "auto",
              std::string(opt::to_string(c.optimizer)).c_str(), std::string(opt::to_string(c.ns)).c_str(),
              c.sharded ? "fsdp-rows" : "ddp");
  std::printf("%5s %7s %7s %5s %5s %5s %6s %7s %7s %7s %9s %7s %-13s %10s\n", "group", "rows", "cols", "N", "Np",
              "pr", "pl", "k", "k_tot", "kw", "c", "B", "path", "NS_TFLOP");
  for (std::size_t i = 0; i < plan.groups.size(); ++i) {
    const auto& g = plan.groups[i];
    std::printf("%5zu %7lld %7lld %5lld %5lld %5lld %6lld %7lld %7lld %7lld %9.6f %7lld %-13s %10.4f\n", i,
                static_cast<long long>(g.rows), static_cast<long long>(g.cols), static_cast<long long>(g.N),
                static_cast<long long>(g.Np), static_cast<long long>(g.pr), static_cast<long long>(g.pl),
                static_cast<long long>(g.k), static_cast<long long>(g.k_tot), static_cast<long long>(g.kw), g.c,
                static_cast<long long>(g.B),
                (std::string(opt::to_string(g.path)) + (g.routed ? "*" : "")).c_str(), g.ns_flops / 1e12);
  }
  std::printf("\n%5s %-16s %-11s %16s %16s\n", "group", "collective", "kind", "bytes_sent", "bytes_per_peer");
  for (std::size_t i = 0; i < plan.groups.size(); ++i) {
    for (const auto& p : plan.groups[i].phases) {
      if (p.collective.kind == opt::CollectiveKind::none) continue;
      std::printf("%5zu %-16s %-11s %16lld %16lld\n", i, p.collective.name.c_str(),
                  std::string(opt::to_string(p.collective.kind)).c_str(),
                  static_cast<long long>(p.collective.bytes_sent), static_cast<long long>(p.collective.bytes_per_peer));
    }
  }
  std::printf("\na2a_payload_bytes %lld (%.2f MB)  norms_allgather_bytes %lld (%.3f MB)  ddp_allgather_bytes %lld  "
              "NS %.4f TFLOP/rank  collectives %lld   (* = global_capped routed to global)\n",
              static_cast<long long>(plan.a2a_payload_bytes), static_cast<double>(plan.a2a_payload_bytes) / 1e6,
              static_cast<long long>(plan.norms_allgather_bytes), static_cast<double>(plan.norms_allgather_bytes) / 1e6,
              static_cast<long long>(plan.ddp_allgather_bytes), plan.ns_flops_per_rank / 1e12,
              static_cast<long long>(plan.collectives));
}

}  // namespace

int run_plan(std::span<const std::string> args) {
  Command cmd("plan", "--model M --world W --scope S --fraction F [--capacity-factor C] [--json]",
              "Host-side plan of one Dion2/NorDion2 step: shape groups (N, Np, pr, pl, k, k_tot, c, B, routing),\n"
              "each collective's bytes per rank (fwd+rev a2a, norm all-gather) and the NS GEMM FLOPs.");
  std::string model, scope = "global", capacity = "auto", optimizer = "dion2", ns = "polar_express";
  std::string momentum = "float32";
  std::int64_t world = 1;
  double fraction = 0.25;
  bool ddp = false;
  cmd.options().add_options()
      ("model", po::value(&model)->required(), "seed-5120x8, gpt-<h>x<L>, gpt-1b, gpt-14b or inventory.json")
      ("world", po::value(&world)->default_value(1), "ranks in the optimizer's process group")
      ("scope", po::value(&scope)->default_value(scope), "local | global | global_capped")
      ("fraction", po::value(&fraction)->default_value(0.25), "selected fraction, in (0, 1]")
      ("capacity-factor", po::value(&capacity)->default_value(capacity), "global_capped c >= 1, or auto")
      ("optimizer", po::value(&optimizer)->default_value(optimizer), "dion2 | nordion2")
      ("ns", po::value(&ns)->default_value(ns), "polar_express | newton_schulz5 | gram (FLOP model)")
      ("momentum-dtype", po::value(&momentum)->default_value(momentum), "float32 | bfloat16 (HBM bytes only)")
      ("ddp", po::bool_switch(&ddp), "unsharded parameters (DDP) instead of FSDP2 row shards");
  cmd.offer_csv();
  if (!cmd.parse(args)) return 0;
  opt::PlanConfig config;
  config.world = world;
  config.scope = opt::parse_scope(scope, "--scope");
  config.fraction = fraction;
  config.capacity_factor = opt::parse_capacity_factor(capacity, "--capacity-factor");
  config.optimizer = opt::parse_optimizer(optimizer, "--optimizer");
  config.ns = opt::parse_ns(ns, "--ns");
  config.sharded = !ddp;
  config.momentum_bytes = config.param_bytes = opt::parse_dtype(momentum, "--momentum-dtype") == opt::Dtype::float32 ? 4 : 2;
  opt::validate(config);
  const opt::Inventory inventory = opt::load_inventory(model);
  Recorder recorder(cmd.common(), "plan");
  const nlohmann::json run_config = analysis::plan_config_json(inventory, config);
  if (recorder.skip(run_config)) return 0;
  auto record = recorder.begin(run_config);
  const opt::Plan plan = opt::make_plan(inventory, config);
  analysis::add_plan_metrics(record, plan);
  recorder.store(record);
  if (cmd.common().machine()) {
    print_result(cmd.common(), opt::to_json(plan));
  } else {
    print_table(plan);
  }
  return 0;
}

}  // namespace dionsim::cli
