#include "sim/whatif_trace.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/parse.hpp"

namespace dionsim::sim {

namespace {

double us(DurationNs ns) { return static_cast<double>(ns) * 1e-3; }

nlohmann::json complete(const std::string& name, std::int64_t pid, int tid, DurationNs start, DurationNs dur,
                        nlohmann::json args) {
  return {{"name", name}, {"ph", "X"}, {"pid", pid}, {"tid", tid}, {"ts", us(start)}, {"dur", us(dur)},
          {"args", std::move(args)}};
}

nlohmann::json meta(const char* what, std::int64_t pid, int tid, const std::string& name) {
  nlohmann::json m{{"name", what}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}};
  if (tid >= 0) m["tid"] = tid;
  return m;
}

}  // namespace

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
  const std::string cap = c.scope != opt::Scope::global_capped ? "" :
                          c.capacity_factor ? "_c" + std::to_string(*c.capacity_factor).substr(0, 5) : "_cauto";
  std::snprintf(buf, sizeof buf, "%s_f%g%s_n%d_%s.json", std::string(opt::to_string(c.scope)).c_str(), c.fraction,
                cap.c_str(), c.fabric.nodes, c.fabric.name.c_str());
  std::string name = buf;
  for (char& ch : name) {
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-')) ch = '_';
  }
  return name;
}

nlohmann::json chrome_trace(const WhatifResult& r, const std::vector<std::int64_t>& ranks) {
  nlohmann::json events = nlohmann::json::array();
  const DurationNs opt_start = r.fwd_bwd.wall_ns;
  for (auto rank : ranks) {
    events.push_back(meta("process_name", rank, -1, "rank " + std::to_string(rank)));
    events.push_back(meta("thread_name", rank, 0, "compute"));
    events.push_back(meta("thread_name", rank, 1, "optimizer collectives"));
    events.push_back(meta("thread_name", rank, 2, "fsdp collectives"));
    events.push_back(complete("forward+backward", rank, 0, 0, r.fwd_bwd.compute_ns, {{"model_params", r.params}}));
    if (r.fwd_bwd.fsdp_comm_ns > 0) {
      events.push_back(complete("fsdp all-gather x2 + reduce-scatter", rank, 2, 0, r.fwd_bwd.fsdp_comm_ns,
                                {{"exposed_ms", static_cast<double>(r.fwd_bwd.fsdp_exposed_ns) * 1e-6}}));
    }
    for (int tid : {0, 1}) {
      events.push_back(complete("opt.step", rank, tid, opt_start, r.opt.wall_ns,
                                {{"scope", std::string(opt::to_string(r.config.scope))}}));
    }
    for (const auto& e : r.opt.events) {
      if (e.duration_ns <= 0) continue;
      const auto& g = r.plan.groups[static_cast<std::size_t>(e.task)];
      nlohmann::json args{{"task", e.task}, {"phase", e.phase}, {"group", std::to_string(g.rows) + "x" + std::to_string(g.cols)}};
      if (e.stream == StreamKind::compute) {
        args["hbm_bytes"] = e.bytes;
        args["gemm_flops"] = e.flops;
        args["launches"] = e.launches;
      } else {
        args["bytes"] = e.bytes;
      }
      events.push_back(complete(e.name, rank, e.stream == StreamKind::compute ? 0 : 1, opt_start + e.start_ns,
                                e.duration_ns, std::move(args)));
    }
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"},
          {"otherData", {{"config", to_json(r.config)}}}};
}

}  // namespace dionsim::sim
