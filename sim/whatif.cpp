#include "sim/whatif.hpp"

#include "sim/whatif_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.hpp"
#include "common/parse.hpp"
#include "sim/whatif_metrics.hpp"
#include "topologies/topology_file.hpp"

namespace dionsim::sim {

namespace {

double ms(DurationNs ns) { return static_cast<double>(ns) * 1e-6; }

std::string shortest(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

nlohmann::json optional_number(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

void check_axis(bool empty, const char* flag) {
  if (empty) {
    throw_bad_usage(flag, "an empty list", "at least one value (the sweep would be empty)");
  }
}

// The calibrated all-to-all: the fabric's time / efficiency + a fixed cost (WhatifConfig).
class CalibratedAlltoallTimer final : public CollectiveTimer {
 public:
  CalibratedAlltoallTimer(const CollectiveTimer& inner, double efficiency, double latency_us)
      : inner_(inner), efficiency_(efficiency), latency_ns_(std::llround(latency_us * 1e3)) {}
  [[nodiscard]] DurationNs time_ns(const CollectiveRequest& request) const override {
    const DurationNs t = inner_.time_ns(request);
    if (request.kind != StepCollective::all_to_all) return t;
    return static_cast<DurationNs>(std::llround(static_cast<double>(t) / efficiency_)) + latency_ns_;
  }

 private:
  const CollectiveTimer& inner_;
  double efficiency_;
  DurationNs latency_ns_;
};

}  // namespace

nlohmann::json to_json(const WhatifConfig& c) {
  const auto& f = c.fabric;
  const double nvlink = f.nvlink_GBps * f.nvlink_efficiency, nic = f.nic_GBps * f.nic_efficiency;
  nlohmann::json j = {
      {"model", c.model},
      {"optimizer", std::string(opt::to_string(c.optimizer))},
      {"ns", std::string(opt::to_string(c.ns))},
      {"scope", std::string(opt::to_string(c.scope))},
      {"fraction", c.fraction},
      {"capacity_factor", c.scope == opt::Scope::global_capped
                              ? (c.capacity_factor ? nlohmann::json(*c.capacity_factor) : nlohmann::json("auto"))
                              : nlohmann::json(nullptr)},
      {"nodes", c.nodes},
      {"gpus_per_node", c.gpus_per_node},
      {"world", c.world()},
      {"fabric", f.name},
      {"nvlink_effective_GBps", nvlink},
      {"nvlink_latency_us", f.nvlink_latency_us},
      {"nic_effective_GBps", nic},
      {"nic_latency_us", f.nic_latency_us},
      {"layout", topo::to_string(f.layout)},
      {"leaf_radix", f.leaf_radix},
      {"oversubscription", f.oversubscription},
      {"alltoall_algbw_GBps", optional_number(c.alltoall_algbw_GBps)},
      {"hardware", c.hardware},
      {"calibration", c.calibration},
      {"fwd_bwd_ms", optional_number(c.fwd_bwd_ms)},
      {"mfu", optional_number(c.mfu)},
      {"tokens_per_gpu", c.tokens_per_gpu},
      {"host_launch_us", c.host_launch_us},
  };
  if (c.rank_skew_ms) j["rank_skew_ms"] = *c.rank_skew_ms;  // only when set: earlier hashes stay
  if (c.collective_hbm_slowdown) j["collective_hbm_slowdown"] = *c.collective_hbm_slowdown;
  if (c.host_ahead) j["host_ahead"] = true;
  // Only when calibrated, so that the hashes of earlier runs stay what they were.
  if (c.alltoall_intra_efficiency != 1.0 || c.alltoall_inter_efficiency != 1.0 || c.alltoall_latency_us != 0.0) {
    j["alltoall_intra_efficiency"] = c.alltoall_intra_efficiency;
    j["alltoall_inter_efficiency"] = c.alltoall_inter_efficiency;
    j["alltoall_latency_us"] = c.alltoall_latency_us;
  }
  return j;
}

std::vector<WhatifConfig> expand(const WhatifStudy& s) {
  check_axis(s.scopes.empty(), "--scope");
  check_axis(s.fractions.empty(), "--fraction");
  check_axis(s.capacity_factors.empty(), "--capacity-factor");
  check_axis(s.nodes.empty(), "--nodes");
  check_axis(s.fabrics.empty(), "--fabric");
  for (double f : s.fractions) {
    if (!(f > 0.0 && f <= 1.0)) throw_bad_usage("--fraction", shortest(f), "a number in (0, 1]");
  }
  for (const auto& c : s.capacity_factors) {
    if (c && !(*c >= 1.0)) throw_bad_usage("--capacity-factor", shortest(*c), "a number >= 1.0 (or auto)");
  }
  for (auto n : s.nodes) {
    if (n < 1 || n > 1'000'000) throw_bad_usage("--nodes", std::to_string(n), "an integer in [1, 1000000]");
  }
  const int gpn = s.base.gpus_per_node;
  if (gpn < 1) throw_bad_usage("--gpus-per-node", std::to_string(gpn), "a positive integer");
  if (s.base.tokens_per_gpu < 1) {
    throw_bad_usage("--tokens-per-gpu", std::to_string(s.base.tokens_per_gpu), "a positive integer");
  }
  if (s.base.fwd_bwd_ms.has_value() == s.base.mfu.has_value()) {
    throw_bad_usage("--fwd-bwd-ms/--mfu", s.base.fwd_bwd_ms ? "both" : "neither", "exactly one of them");
  }
  if (!(s.base.host_launch_us >= 0.0)) {
    throw_bad_usage("--host-launch-us", shortest(s.base.host_launch_us), "a number >= 0");
  }
  if (s.base.rank_skew_ms && !(*s.base.rank_skew_ms >= 0.0 && *s.base.rank_skew_ms <= 1e6)) {
    throw_bad_usage("--rank-skew-ms", shortest(*s.base.rank_skew_ms), "a number in [0, 1e6] (ms)");
  }
  if (s.base.collective_hbm_slowdown &&
      !(*s.base.collective_hbm_slowdown >= 1.0 && *s.base.collective_hbm_slowdown <= 100.0)) {
    throw_bad_usage("--collective-hbm-slowdown", shortest(*s.base.collective_hbm_slowdown), "a factor in [1, 100]");
  }
  if (s.base.alltoall_algbw_GBps && !(*s.base.alltoall_algbw_GBps > 0.0)) {
    throw_bad_usage("--alltoall-algbw-GBps", shortest(*s.base.alltoall_algbw_GBps), "a positive bandwidth in GB/s");
  }
  for (const auto& fabric : s.fabrics) {
    topo::validate(fabric, "--fabric " + fabric.name, true);
    // Builds the smallest topology: throws when the GPUs per node do not fit the fabric (per-node
    // leaves need gpus_per_node to divide leaf_radix).
    (void)topo::Topology(fabric, 1, gpn);
  }
  std::vector<WhatifConfig> out;
  for (const auto& fabric : s.fabrics) {
    for (auto scope : s.scopes) {
      for (double fraction : s.fractions) {
        const std::size_t capacities = scope == opt::Scope::global_capped ? s.capacity_factors.size() : 1;
        for (std::size_t ci = 0; ci < capacities; ++ci) {
          for (auto nodes : s.nodes) {
            WhatifConfig c = s.base;
            c.scope = scope;
            c.fraction = fraction;
            c.capacity_factor = scope == opt::Scope::global_capped ? s.capacity_factors[ci] : std::nullopt;
            c.fabric = fabric;
            c.nodes = static_cast<int>(nodes);
            c.gpus_per_node = gpn;
            if (!c.alltoall_algbw_GBps) {
              if (const auto it = s.alltoall_algbw_GBps_by_world.find(c.world());
                  it != s.alltoall_algbw_GBps_by_world.end()) {
                c.alltoall_algbw_GBps = it->second;
              }
            }
            out.push_back(std::move(c));
          }
        }
      }
    }
  }
  return out;
}

DurationNs WhatifResult::a2a_seen_ns() const {
  return opt.a2a_ns + (first_collective == StepCollective::all_to_all ? rank_wait_ns : 0);
}

DurationNs WhatifResult::allgather_seen_ns() const {
  return opt.allgather_ns + (first_collective == StepCollective::all_gather ? rank_wait_ns : 0);
}

DurationNs WhatifResult::comm_window_seen_ns() const {
  DurationNs first = 0, last = 0;
  bool any = false;
  for (const auto& e : opt.events) {
    if (e.stream != StreamKind::collective) continue;
    first = any ? std::min(first, e.start_ns) : e.start_ns;
    last = any ? std::max(last, e.start_ns + e.duration_ns) : e.start_ns + e.duration_ns;
    any = true;
  }
  return any ? last - first + rank_wait_ns : 0;
}

double expected_max_standard_normal(std::int64_t n) {
  if (n < 1) throw_bad_input("expected_max_standard_normal", "n", std::to_string(n), "an integer >= 1");
  if (n == 1) return 0.0;
  // Simpson's rule on [-12, 12]: the integrand n·x·φ(x)·Φ(x)^(n−1) is smooth and below 1e-30
  // outside for any n up to 1e12 (Φ(x)^(n−1) kills the left tail, φ the right).
  const double nn = static_cast<double>(n);
  auto f = [nn](double x) {
    const double phi = std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    return cdf <= 0.0 ? 0.0 : x * nn * phi * std::exp((nn - 1.0) * std::log(cdf));
  };
  constexpr int kIntervals = 4800;  // even
  constexpr double a = -12.0, b = 12.0, h = (b - a) / kIntervals;
  double sum = f(a) + f(b);
  for (int i = 1; i < kIntervals; ++i) sum += f(a + i * h) * (i % 2 ? 4.0 : 2.0);
  return sum * h / 3.0;
}

DurationNs expected_rank_wait_ns(double sigma_ms, std::int64_t world) {
  if (!(sigma_ms > 0.0) || world <= 1) return 0;
  // A calibration fit evaluates thousands of configurations of a handful of worlds: integrate once.
  thread_local std::map<std::int64_t, double> by_world;
  auto it = by_world.find(world);
  if (it == by_world.end()) it = by_world.emplace(world, expected_max_standard_normal(world)).first;
  return static_cast<DurationNs>(std::llround(sigma_ms * 1e6 * it->second));
}

double predicted_deferral_fraction(const opt::GroupPlan& g, double fraction, std::int64_t world) {
  if (g.path != opt::Path::capped_packed || world <= 1) {
    return 0.0;
  }
  const double w = static_cast<double>(world);
  const double mu = static_cast<double>(g.pr) * static_cast<double>(g.k_tot) / w;
  const double var = static_cast<double>(g.pr) * static_cast<double>(g.k) * (1.0 - 1.0 / w) * (1.0 - fraction);
  if (mu <= 0.0) {
    return 0.0;
  }
  if (var <= 0.0) {
    return std::max(0.0, mu - static_cast<double>(g.B)) / mu;
  }
  const double sigma = std::sqrt(var);
  const double z = (static_cast<double>(g.B) - mu) / sigma;
  const double phi = std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI);
  const double tail = 0.5 * std::erfc(z / std::sqrt(2.0));  // 1 - Phi(z)
  return std::max(0.0, (sigma * phi - (static_cast<double>(g.B) - mu) * tail) / mu);
}

opt::PlanConfig WhatifConfig::plan_config() const {
  opt::PlanConfig pc;
  pc.world = world();
  pc.scope = scope;
  pc.fraction = fraction;
  pc.capacity_factor = capacity_factor;
  pc.optimizer = optimizer;
  pc.ns = ns;
  return pc;
}

WhatifResult run_whatif(const WhatifConfig& config, const opt::Inventory& inventory, const KernelModel& kernels) {
  WhatifResult r;
  r.config = config;
  r.plan = opt::make_plan(inventory, config.plan_config());

  const FabricCollectiveTimer fabric_timer(config.fabric, config.nodes, config.gpus_per_node,
                                           config.alltoall_algbw_GBps);
  const double a2a_efficiency = config.nodes > 1 ? config.alltoall_inter_efficiency : config.alltoall_intra_efficiency;
  if (!(a2a_efficiency > 0.0 && a2a_efficiency <= 1.0) || !(config.alltoall_latency_us >= 0.0)) {
    throw_bad_input("whatif", "all-to-all calibration",
                    shortest(a2a_efficiency) + ", " + shortest(config.alltoall_latency_us) + " us",
                    "an efficiency in (0, 1] and a latency >= 0");
  }
  const CalibratedAlltoallTimer calibrated(fabric_timer, config.alltoall_algbw_GBps ? 1.0 : a2a_efficiency,
                                           config.alltoall_algbw_GBps ? 0.0 : config.alltoall_latency_us);
  const CollectiveTimer& timer = calibrated;
  StepProgramOptions options;
  options.host_launch_us = config.host_launch_us;
  options.host_ahead = config.host_ahead;
  // Within one node the collectives ride NVLink and contend with memory-bound kernels for HBM;
  // across nodes the NIC bounds them.
  if (config.nodes == 1) options.collective_hbm_slowdown = config.collective_hbm_slowdown.value_or(1.0);
  r.opt = simulate_optimizer_step(r.plan, kernels, timer, options);

  for (const auto& m : inventory.entries) {
    r.params += m.rows * m.cols * m.count;
  }
  TrainingConfig tc;
  tc.fwd_bwd_ms = config.fwd_bwd_ms;
  tc.mfu = config.mfu;
  tc.params = r.params;
  tc.tokens_per_gpu = config.tokens_per_gpu;
  tc.world = config.world();
  tc.peak_bf16_TFLOPs = kernels.config().hardware.peak_bf16_TFLOPs;
  validate(tc);
  const FsdpBytes fb = fsdp_bytes(r.params, tc.world);
  const DurationNs ag = timer.time_ns({StepCollective::all_gather, fb.allgather_input_bytes, fb.allgather_input_bytes});
  const DurationNs rs = timer.time_ns({StepCollective::reduce_scatter, fb.reducescatter_input_bytes,
                                       fb.reducescatter_input_bytes / std::max<std::int64_t>(1, tc.world)});
  r.fwd_bwd = fwd_bwd(tc, fb.allgathers * ag + rs);

  // The critical path is the slowest rank's; a measured rank that arrived earlier waits in the
  // step's first collective (the one that starts first on the collective stream).
  r.step_wall_ns = r.fwd_bwd.wall_ns + r.opt.wall_ns;
  const StepEvent* first = nullptr;
  for (const auto& e : r.opt.events) {
    if (e.stream == StreamKind::collective && (first == nullptr || e.start_ns < first->start_ns)) first = &e;
  }
  if (first != nullptr) {
    const auto kind = r.plan.groups.at(static_cast<std::size_t>(first->task))
                          .phases.at(static_cast<std::size_t>(first->phase))
                          .collective.kind;
    r.first_collective = kind == opt::CollectiveKind::all_to_all ? StepCollective::all_to_all : StepCollective::all_gather;
    r.rank_wait_ns = expected_rank_wait_ns(config.rank_skew_ms.value_or(0.0), config.world());
  }
  r.exposed_comm_ns = r.fwd_bwd.fsdp_exposed_ns + r.opt.exposed_comm_ns;
  r.mfu_pct = mfu_pct(tc, r.step_wall_ns);
  if (config.scope == opt::Scope::global_capped) {
    double deferred = 0.0, winners = 0.0;
    for (const auto& g : r.plan.groups) {
      const double group_winners = static_cast<double>(g.N) * static_cast<double>(g.k_tot);
      deferred += predicted_deferral_fraction(g, config.fraction, config.world()) * group_winners;
      winners += group_winners;
    }
    r.deferral_pct = winners > 0.0 ? 100.0 * deferred / winners : 0.0;
  }
  return r;
}

nlohmann::json metrics_json(const WhatifResult& r) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& m : whatif_metrics()) {
    if (m.output == MetricOutput::not_printed) continue;
    const auto v = m.read(r);
    if (!v) {
      out[std::string(m.name)] = nullptr;
    } else if (m.output == MetricOutput::integer) {
      out[std::string(m.name)] = static_cast<std::int64_t>(*v);
    } else {
      out[std::string(m.name)] = *v;
    }
  }
  return out;
}

topo::FabricSpec resolve_fabric(const std::string& preset_or_file, int gpus_per_node) {
  const bool is_file = preset_or_file.find('/') != std::string::npos || preset_or_file.ends_with(".toml");
  if (!is_file) {
    return topo::preset(preset_or_file, "--fabric");
  }
  const auto file = topo::load_topology_file(preset_or_file);
  if (file.gpus_per_node && *file.gpus_per_node != gpus_per_node) {
    throw_bad_usage("--gpus-per-node", std::to_string(gpus_per_node),
                    std::to_string(*file.gpus_per_node) + " as " + preset_or_file + " says");
  }
  return file.spec;
}

std::vector<topo::FabricSpec> resolve_fabrics(const std::string& fabrics, const std::string& nic_GBps,
                                              const FabricOverrides& o, int gpus_per_node) {
  std::vector<topo::FabricSpec> out;
  const auto nics = nic_GBps.empty() ? std::vector<double>{} : parse_double_list(nic_GBps, "--nic-GBps");
  for (const auto& f : split_list(fabrics, "--fabric")) {
    auto spec = resolve_fabric(f, gpus_per_node);
    if (o.nvlink_GBps) spec.nvlink_GBps = *o.nvlink_GBps;
    if (o.oversubscription) spec.oversubscription = *o.oversubscription;
    if (o.latency_us) spec.nvlink_latency_us = spec.nic_latency_us = *o.latency_us;
    if (nics.empty()) out.push_back(spec);
    for (double nic : nics) {
      out.push_back(spec);
      out.back().nic_GBps = nic;  // validated with the fabric by expand()
      out.back().name.append("@").append(shortest(nic));
    }
  }
  return out;
}

WhatifStudy make_study(const WhatifOptions& o) {
  WhatifStudy study;
  auto& base = study.base;
  base.model = o.model;
  base.optimizer = opt::parse_optimizer(o.optimizer, "--optimizer");
  base.ns = opt::parse_ns(o.ns, "--ns");
  base.gpus_per_node = o.gpus_per_node;
  base.tokens_per_gpu = o.tokens_per_gpu;
  base.host_launch_us = o.host_launch_us;
  base.rank_skew_ms = o.rank_skew_ms;
  base.collective_hbm_slowdown = o.collective_hbm_slowdown;
  base.host_ahead = o.host_ahead;
  base.fwd_bwd_ms = o.fwd_bwd_ms;
  base.mfu = o.mfu;
  base.alltoall_algbw_GBps = o.alltoall_algbw_GBps;
  for (const auto& s : split_list(o.scopes, "--scope")) study.scopes.push_back(opt::parse_scope(s, "--scope"));
  study.fractions = parse_double_list(o.fractions, "--fraction");
  for (const auto& c : split_list(o.capacities, "--capacity-factor")) {
    study.capacity_factors.push_back(c == "auto" ? std::nullopt : std::optional(parse_double(c, "--capacity-factor")));
  }
  study.nodes = parse_int_list(o.nodes, "--nodes");
  study.fabrics = resolve_fabrics(o.fabrics, o.nic_GBps, o.overrides, o.gpus_per_node);
  return study;
}

std::string table_header() {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-16s %-13s %5s %6s %5s %6s %9s %8s %8s %6s %9s %8s %9s %6s %8s", "fabric", "scope",
                "frac", "cap", "nodes", "world", "step_ms", "opt_ms", "optgpu_ms", "idle%", "a2a_MB", "a2a_ms",
                "exposed_ms", "mfu%", "defer%");
  return buf;
}

std::string table_row(const WhatifResult& r) {
  const auto& c = r.config;
  const std::string cap = c.scope != opt::Scope::global_capped ? "-"
                          : c.capacity_factor                  ? shortest(*c.capacity_factor)
                                                               : "auto";
  const std::string defer = r.deferral_pct ? [&] {
    char b[32];
    std::snprintf(b, sizeof b, "%.4f", *r.deferral_pct);
    return std::string(b);
  }() : "-";
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-16s %-13s %5g %6s %5d %6lld %9.2f %8.2f %9.2f %6.1f %9.1f %8.2f %10.2f %6.2f %8s",
                c.fabric.name.c_str(), std::string(opt::to_string(c.scope)).c_str(), c.fraction, cap.c_str(), c.nodes,
                static_cast<long long>(c.world()), ms(r.step_wall_ns), ms(r.opt_wall_seen_ns()), ms(r.opt.gpu_busy_ns),
                r.gpu_idle_seen_pct(), static_cast<double>(r.plan.a2a_payload_bytes) / 1e6, ms(r.a2a_seen_ns()),
                ms(r.exposed_comm_ns), r.mfu_pct, defer.c_str());
  return buf;
}

}  // namespace dionsim::sim
