#include "sim/whatif_trace.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/parse.hpp"

namespace dionsim::sim {

std::vector<std::int64_t> trace_ranks(const std::string& spec, std::int64_t world) {
  std::vector<std::int64_t> ranks;
  if (spec == "all") {
    for (std::int64_t r = 0; r < world; ++r) ranks.push_back(r);
    return ranks;
  }
  if (spec.empty()) {
    for (std::int64_t r = 0; r < std::min<std::int64_t>(world, 4); ++r) ranks.push_back(r);
    return ranks;
  }
  for (const auto& item : split_list(spec, "--trace-ranks")) {
    const auto r = parse_int(item, "--trace-ranks");
    if (r < 0 || r >= world) {
      throw_bad_usage("--trace-ranks", item, "a rank in [0, " + std::to_string(world - 1) + "] or 'all'");
    }
    ranks.push_back(r);
  }
  return ranks;
}

std::string trace_file_name(const WhatifConfig& c) {
  char buf[256];
  const std::string cap = c.plan.scope != opt::Scope::global_capped ? ""
                          : c.plan.capacity_factor                  ? "_c" + std::to_string(*c.plan.capacity_factor).substr(0, 5)
                                                               : "_cauto";
  std::snprintf(buf, sizeof buf, "%s_f%g%s_n%d_%s.json", std::string(opt::to_string(c.plan.scope)).c_str(), c.plan.fraction,
                cap.c_str(), c.nodes, c.fabric.name.c_str());
  std::string name = buf;
  for (char& ch : name) {
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-')) ch = '_';
  }
  return name;
}

std::vector<TraceThread> trace_threads() {
  return {{0, "compute"}, {1, "optimizer collectives"}, {2, "fsdp collectives"}};
}

std::vector<TraceEvent> trace_events(const WhatifResult& r) {
  std::vector<TraceEvent> out;
  const DurationNs opt_start = r.fwd_bwd.wall_ns;
  out.push_back({0, "forward+backward", "compute", 0, r.fwd_bwd.compute_ns, {{"model_params", r.params}}});
  if (r.fwd_bwd.fsdp_comm_ns > 0) {
    out.push_back({2,
                   "fsdp all-gather x2 + reduce-scatter",
                   "fsdp",
                   0,
                   r.fwd_bwd.fsdp_comm_ns,
                   {{"exposed_ms", static_cast<double>(r.fwd_bwd.fsdp_exposed_ns) * 1e-6}}});
  }
  for (int tid : {0, 1}) {
    out.push_back({tid,
                   "opt.step",
                   "optimizer",
                   opt_start,
                   r.opt.wall_ns,
                   {{"scope", std::string(opt::to_string(r.config.plan.scope))}}});
  }
  for (const auto& e : r.opt.events) {
    if (e.duration_ns <= 0) continue;
    const auto& g = r.plan.groups[static_cast<std::size_t>(e.task)];
    nlohmann::json args{
        {"task", e.task}, {"phase", e.phase}, {"group", std::to_string(g.rows) + "x" + std::to_string(g.cols)}};
    const bool compute = e.stream == StreamKind::compute;
    if (compute) {
      args["hbm_bytes"] = e.bytes;
      args["gemm_flops"] = e.flops;
      args["launches"] = e.launches;
    } else {
      args["bytes"] = e.bytes;
      if (const auto* c = r.find_collective(e.name, e.bytes); c != nullptr && !c->choice.algorithm.empty()) {
        args["algorithm"] = c->choice.algorithm;
        args["protocol"] = c->choice.protocol;
        if (!c->choice.chosen_by.empty()) args["chosen_by"] = c->choice.chosen_by;
      }
    }
    out.push_back({compute ? 0 : 1, e.name, compute ? "kernel" : "collective", opt_start + e.start_ns, e.duration_ns,
                   std::move(args)});
  }
  return out;
}

}  // namespace dionsim::sim
