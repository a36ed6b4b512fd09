#include "sim/whatif.hpp"

#include "sim/whatif_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.hpp"
#include "common/format.hpp"
#include "common/parse.hpp"
#include "sim/whatif_metrics.hpp"
#include "topologies/topology_file.hpp"
#include "optimizer/deferral.hpp"
#include "optimizer/plan_json.hpp"

namespace dionsim::sim {

namespace {

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
  [[nodiscard]] CollectiveChoice choice(const CollectiveRequest& request) const override {
    return inner_.choice(request);
  }

 private:
  const CollectiveTimer& inner_;
  double efficiency_;
  DurationNs latency_ns_;
};

}  // namespace

const OptimizerCollective* WhatifResult::find_collective(const std::string& name, std::int64_t bytes_sent) const {
  for (const auto& c : collectives) {
    if (c.name == name && c.bytes_sent == bytes_sent) return &c;
  }
  return nullptr;
}

nlohmann::json collectives_json(const WhatifResult& r) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : r.collectives) {
    nlohmann::json j = {{"name", c.name}, {"kind", c.kind}, {"bytes_sent", c.bytes_sent}, {"count", c.count},
                        {"algorithm", c.choice.algorithm}, {"protocol", c.choice.protocol}, {"time_ms", ns_to_ms(c.time_ns)}};
    if (!c.choice.chosen_by.empty()) j["chosen_by"] = c.choice.chosen_by;
    out.push_back(std::move(j));
  }
  return out;
}

nlohmann::json to_json(const WhatifConfig& c) {
  const auto& f = c.fabric;
  const double nvlink = f.nvlink_GBps * f.nvlink_efficiency, nic = f.nic_GBps * f.nic_efficiency;
  nlohmann::json j = {
      {"model", c.model},
      {"optimizer", std::string(opt::to_string(c.plan.optimizer))},
      {"ns", std::string(opt::to_string(c.plan.ns))},
      {"scope", std::string(opt::to_string(c.plan.scope))},
      {"fraction", c.plan.fraction},
      {"capacity_factor", c.plan.scope == opt::Scope::global_capped
                              ? opt::capacity_factor_json(c.plan.capacity_factor)
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
  // The analytic estimate is the default and leaves the hash as it was; a simulated one names
  // everything its number depends on.
  if (c.plan.scope == opt::Scope::global_capped && c.deferral.estimator == DeferralEstimator::simulated) {
    j["deferral_estimate"] = "simulated";
    j["deferral_steps"] = c.deferral.steps;
    j["deferral_norms"] = c.deferral.stream.text;
    j["deferral_seed"] = c.deferral.seed;
  }
  // Issue 17's keys, only where they differ from what earlier runs did (their hashes stay).
  if (f.gpus_per_nvlink_domain != c.gpus_per_node) j["gpus_per_nvlink_domain"] = f.gpus_per_nvlink_domain;
  if (f.network != topo::Network::infiniband) j["network"] = topo::to_string(f.network);
  if (f.planes != 1) j["planes"] = f.planes;
  if (c.shard_group > 0) j["shard_group"] = c.shard_group;
  if (c.reduce_dtype != "fp32") j["reduce_dtype"] = c.reduce_dtype;
  if (c.layers > 0) j["layers"] = c.layers;
  // Only when calibrated, so that the hashes of earlier runs stay what they were.
  if (c.alltoall_intra_efficiency != 1.0 || c.alltoall_inter_efficiency != 1.0 || c.alltoall_latency_us != 0.0) {
    j["alltoall_intra_efficiency"] = c.alltoall_intra_efficiency;
    j["alltoall_inter_efficiency"] = c.alltoall_inter_efficiency;
    j["alltoall_latency_us"] = c.alltoall_latency_us;
  }
  const ModelOptions uncalibrated;
  if (c.collective_options.call_overhead_us != uncalibrated.call_overhead_us ||
      c.collective_options.net_hop_extra_us != uncalibrated.net_hop_extra_us ||
      c.collective_options.nvlink_scale != uncalibrated.nvlink_scale) {
    j["collective_call_overhead_us"] = c.collective_options.call_overhead_us;
    j["collective_net_hop_extra_us"] = c.collective_options.net_hop_extra_us;
    j["collective_nvlink_scale"] = c.collective_options.nvlink_scale;
  }
  // Apart from the three above: configurations calibrated before it existed keep their hash.
  if (c.collective_options.p2p_channel_GBps != uncalibrated.p2p_channel_GBps)
    j["collective_p2p_channel_GBps"] = c.collective_options.p2p_channel_GBps;
  return j;
}

namespace {

// The fabric's GPUs per host in this study.
int hosts_gpus(const WhatifStudy& s, const topo::FabricSpec& fabric) {
  return s.gpus_per_node ? *s.gpus_per_node : fabric.gpus_per_host;
}

// Checks a world on a fabric: whole hosts, and whole NVLink domains unless it fits in one (the
// step's closed forms and one-rank-stands-for-all need every domain alike).
int nodes_of_world(std::int64_t world, const topo::FabricSpec& fabric, int gpn, const char* flag) {
  if (world < 1 || world > 1'000'000 || world % gpn != 0) {
    throw_bad_usage(flag, std::to_string(world),
                    "a positive multiple of the GPUs per host (" + std::to_string(gpn) + " on " + fabric.name + ")");
  }
  const int domain = topo::with_gpus_per_host(fabric, gpn).gpus_per_nvlink_domain;
  if (world > domain && world % domain != 0) {
    throw_bad_usage(flag, std::to_string(world) + " GPUs on " + fabric.name,
                    "a world within one " + std::to_string(domain) +
                        "-GPU NVLink domain or of whole domains (partly used racks: --fabric " +
                        fabric.name.substr(0, fabric.name.find('@')) +
                        "@<GPUs per rack>, e.g. @64 for 16 of an NVL72's 18 trays, or a topology file's "
                        "gpus_per_nvlink_domain)");
  }
  return static_cast<int>(world / gpn);
}

void check_shard_group(std::int64_t g, std::int64_t world, int gpn) {
  if (g == 0) return;
  const std::string expected = "a divisor of the world (" + std::to_string(world) +
                               ") that is whole hosts or divides a host (" + std::to_string(gpn) + " GPUs)";
  if (g < 1 || world % g != 0 || (g % gpn != 0 && gpn % g != 0)) throw_bad_usage("--shard-group", std::to_string(g), expected);
}

}  // namespace

std::vector<WhatifConfig> expand(const WhatifStudy& s) {
  check_axis(s.scopes.empty(), "--scope");
  check_axis(s.fractions.empty(), "--fraction");
  check_axis(s.capacity_factors.empty(), "--capacity-factor");
  check_axis(s.nodes.empty() && s.gpus.empty(), "--nodes");
  check_axis(s.fabrics.empty(), "--fabric");
  if (!s.nodes.empty() && !s.gpus.empty()) throw UsageError("give one of --nodes N,.. or --gpus W,..");
  for (double f : s.fractions) opt::check_fraction(f, "--fraction");
  for (const auto& c : s.capacity_factors) {
    opt::check_capacity_factor(c, "--capacity-factor");
  }
  for (auto n : s.nodes) {
    if (n < 1 || n > 1'000'000) throw_bad_usage("--nodes", std::to_string(n), "an integer in [1, 1000000]");
  }
  if (s.gpus_per_node && *s.gpus_per_node < 1) {
    throw_bad_usage("--gpus-per-node", std::to_string(*s.gpus_per_node), "a positive integer");
  }
  if (s.base.tokens_per_gpu < 1) {
    throw_bad_usage("--tokens-per-gpu", std::to_string(s.base.tokens_per_gpu), "a positive integer");
  }
  for (auto t : s.tokens_per_gpus) {
    if (t < 1) throw_bad_usage("--tokens-per-gpu", std::to_string(t), "a positive integer");
  }
  for (auto t : s.global_batch_tokens) {
    if (t < 1) throw_bad_usage("--global-batch-tokens", std::to_string(t), "a positive integer");
  }
  if (!s.tokens_per_gpus.empty() && !s.global_batch_tokens.empty()) {
    throw UsageError("give one of --tokens-per-gpu and --global-batch-tokens");
  }
  const bool fwd_given = s.base.fwd_bwd_ms.has_value() || !s.fwd_bwd_mss.empty();
  const bool mfu_given = s.base.mfu.has_value() || !s.mfus.empty();
  if (fwd_given == mfu_given) {
    throw_bad_usage("--fwd-bwd-ms/--mfu", fwd_given ? "both" : "neither", "exactly one of them");
  }
  for (double v : s.mfus) {
    if (!(v > 0.0 && v <= 1.0)) throw_bad_usage("--mfu", format_g(v), "a fraction in (0, 1] (e.g. 0.45)");
  }
  for (double v : s.fwd_bwd_mss) {
    if (!(v >= 0.0 && std::isfinite(v))) throw_bad_usage("--fwd-bwd-ms", format_g(v), "a finite number >= 0");
  }
  if (s.base.reduce_dtype != "fp32" && s.base.reduce_dtype != "bf16") {
    throw_bad_usage("--reduce-dtype", s.base.reduce_dtype, "fp32 or bf16");
  }
  if (s.base.layers < 0 || s.base.layers > opt::kMaxLayers) {
    throw_bad_usage("--layers", std::to_string(s.base.layers), "an integer in [1, " + std::to_string(opt::kMaxLayers) + "]");
  }
  if (!(s.base.host_launch_us >= 0.0)) {
    throw_bad_usage("--host-launch-us", format_g(s.base.host_launch_us), "a number >= 0");
  }
  if (s.base.rank_skew_ms && !(*s.base.rank_skew_ms >= 0.0 && *s.base.rank_skew_ms <= 1e6)) {
    throw_bad_usage("--rank-skew-ms", format_g(*s.base.rank_skew_ms), "a number in [0, 1e6] (ms)");
  }
  if (s.base.collective_hbm_slowdown &&
      !(*s.base.collective_hbm_slowdown >= 1.0 && *s.base.collective_hbm_slowdown <= 100.0)) {
    throw_bad_usage("--collective-hbm-slowdown", format_g(*s.base.collective_hbm_slowdown), "a factor in [1, 100]");
  }
  if (s.base.alltoall_algbw_GBps && !(*s.base.alltoall_algbw_GBps > 0.0)) {
    throw_bad_usage("--alltoall-algbw-GBps", format_g(*s.base.alltoall_algbw_GBps), "a positive bandwidth in GB/s");
  }
  for (const auto& fabric : s.fabrics) {
    topo::validate(fabric, "--fabric " + fabric.name, true);
    // Builds the smallest topology: throws when the GPUs per host do not fit the fabric (per-host
    // leaves need gpus_per_host to divide leaf_radix; a domain is whole hosts).
    (void)topo::Topology(fabric, 1, hosts_gpus(s, fabric));
  }
  // The axes with "the base's value" when empty.
  const std::vector<std::int64_t> shard_groups = s.shard_groups.empty() ? std::vector<std::int64_t>{s.base.shard_group}
                                                                        : s.shard_groups;
  struct Compute {
    std::optional<double> fwd_bwd_ms, mfu;
  };
  std::vector<Compute> computes;
  for (double v : s.fwd_bwd_mss) computes.push_back({v, std::nullopt});
  for (double v : s.mfus) computes.push_back({std::nullopt, v});
  if (computes.empty()) computes.push_back({s.base.fwd_bwd_ms, s.base.mfu});
  const bool global_batch = !s.global_batch_tokens.empty();
  const std::vector<std::int64_t> tokens = global_batch                ? s.global_batch_tokens
                                           : s.tokens_per_gpus.empty() ? std::vector<std::int64_t>{s.base.tokens_per_gpu}
                                                                       : s.tokens_per_gpus;
  std::vector<WhatifConfig> out;
  for (const auto& fabric : s.fabrics) {
    const int gpn = hosts_gpus(s, fabric);
    std::vector<int> node_counts;
    for (auto n : s.nodes) node_counts.push_back(nodes_of_world(n * gpn, fabric, gpn, "--nodes"));
    for (auto w : s.gpus) node_counts.push_back(nodes_of_world(w, fabric, gpn, "--gpus"));
    for (auto scope : s.scopes) {
      for (double fraction : s.fractions) {
        const std::size_t capacities = scope == opt::Scope::global_capped ? s.capacity_factors.size() : 1;
        for (std::size_t ci = 0; ci < capacities; ++ci) {
          for (auto shard : shard_groups) {
            for (const auto& compute : computes) {
              for (auto tok : tokens) {
                for (auto nodes : node_counts) {
                  WhatifConfig c = s.base;
                  c.plan.scope = scope;
                  c.plan.fraction = fraction;
                  c.plan.capacity_factor = scope == opt::Scope::global_capped ? s.capacity_factors[ci] : std::nullopt;
                  c.fabric = topo::with_gpus_per_host(fabric, gpn);
                  c.nodes = nodes;
                  c.gpus_per_node = gpn;
                  c.fwd_bwd_ms = compute.fwd_bwd_ms;
                  c.mfu = compute.mfu;
                  check_shard_group(shard, c.world(), gpn);
                  const bool fsdp_listed = std::find(shard_groups.begin(), shard_groups.end(), 0) != shard_groups.end();
                  if (shard == c.world() && fsdp_listed) continue;  // the same configuration as 0 (FSDP)
                  c.shard_group = shard == c.world() ? 0 : shard;  // a group of the whole world is FSDP
                  if (global_batch) {
                    if (tok % c.world() != 0) {
                      throw_bad_usage("--global-batch-tokens", std::to_string(tok),
                                      "a multiple of the world (" + std::to_string(c.world()) + " GPUs)");
                    }
                    c.tokens_per_gpu = tok / c.world();
                  } else {
                    c.tokens_per_gpu = tok;
                  }
                  const auto pinned = s.alltoall_algbw_GBps_by_world.find(c.shard_world());
                  if (!c.alltoall_algbw_GBps && pinned != s.alltoall_algbw_GBps_by_world.end()) {
                    c.alltoall_algbw_GBps = pinned->second;
                  }
                  out.push_back(std::move(c));
                }
              }
            }
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

opt::PlanConfig WhatifConfig::plan_config() const {
  opt::PlanConfig pc = plan;
  pc.world = shard_world();
  return pc;
}

opt::PlanConfig WhatifConfig::default_plan() {
  opt::PlanConfig pc;
  pc.optimizer = opt::OptimizerKind::nordion2;
  pc.ns = opt::NsKind::gram;
  return pc;
}

namespace {

// The fabric a shard group of `g` consecutive ranks sees: whole hosts, or part of one.
struct SubFabric {
  int nodes = 1, gpus_per_node = 1;
};
SubFabric shard_fabric(const WhatifConfig& c) {
  const std::int64_t g = c.shard_world();
  if (g % c.gpus_per_node == 0) return {static_cast<int>(g / c.gpus_per_node), c.gpus_per_node};
  return {1, static_cast<int>(g)};  // part of a host (expand checked that g divides it)
}

}  // namespace

DeferralEstimator parse_deferral_estimator(std::string_view text, std::string_view flag) {
  if (text == "analytic") return DeferralEstimator::analytic;
  if (text == "simulated") return DeferralEstimator::simulated;
  throw_bad_usage(flag, text, "analytic or simulated");
}

std::string_view to_string(DeferralEstimator e) {
  return e == DeferralEstimator::analytic ? "analytic" : "simulated";
}

Routing routing_of(const opt::Plan& plan) {
  Routing r;
  for (const auto& g : plan.groups) {
    switch (g.path) {
      case opt::Path::capped_packed: ++r.packed; break;
      case opt::Path::global: ++r.exact_global; break;
      case opt::Path::local: ++r.local; break;
      case opt::Path::ddp:
      case opt::Path::single: ++r.unsharded; break;
    }
    if (g.c > 0.0) {  // a global_capped group (c is 0 for every other scope)
      r.capacity_factor_min = std::min(r.capacity_factor_min.value_or(g.c), g.c);
      r.capacity_factor_max = std::max(r.capacity_factor_max.value_or(g.c), g.c);
    }
    if (g.path == opt::Path::local && g.kw >= g.rows) {
      if (r.local_all_rows++ == 0) {
        r.local_example_kw = g.kw;
        r.local_example_rows = g.rows;
      }
    }
  }
  return r;
}

std::string routing_text(const Routing& r) {
  return std::to_string(r.packed) + "/" + std::to_string(r.exact_global) + "/" + std::to_string(r.local);
}

std::string resolved_capacity_text(const Routing& r) {
  if (!r.capacity_factor_min) return "-";
  char buf[64];
  if (*r.capacity_factor_max - *r.capacity_factor_min < 5e-5) {
    std::snprintf(buf, sizeof buf, "%.4f", *r.capacity_factor_min);
  } else {
    std::snprintf(buf, sizeof buf, "%.3f-%.3f", *r.capacity_factor_min, *r.capacity_factor_max);
  }
  return buf;
}

nlohmann::json routing_json(const Routing& r) {
  return {{"packed", r.packed}, {"exact_global", r.exact_global}, {"local", r.local}, {"unsharded", r.unsharded}};
}

namespace {

// The note of a configuration, its capacity factors given as text (one, or a sweep's list).
std::string note_text(const WhatifConfig& c, const Routing& r, const std::string& capacities) {
  const std::string what = std::string(opt::to_string(c.plan.scope)) + " (fraction " + format_g(c.plan.fraction) +
                           (c.plan.scope == opt::Scope::global_capped ? ", c " + capacities : "") + ") at world " +
                           std::to_string(c.shard_world());
  const std::int64_t groups = r.packed + r.exact_global + r.local + r.unsharded;
  if (c.plan.scope == opt::Scope::global_capped && r.packed == 0 && r.exact_global > 0) {
    return what + ": every one of the " + std::to_string(r.exact_global) +
           " capped groups is routed to exact global (B + 1 >= pr·pl, or 2·pr > cols, spec §4.1) — this is global, "
           "and nothing can be deferred";
  }
  if (c.plan.scope == opt::Scope::local && r.local_all_rows > 0) {
    return what + ": " + std::to_string(r.local_all_rows) + " of " + std::to_string(groups) +
           " groups select k·w >= rows (e.g. " + std::to_string(r.local_example_kw) + " of " +
           std::to_string(r.local_example_rows) + " rows per matrix): every row is applied, not the fraction asked";
  }
  return "";
}

}  // namespace

std::string degeneracy_note(const WhatifConfig& c, const Routing& r) {
  return note_text(c, r, opt::capacity_factor_text(c.plan.capacity_factor));
}

std::vector<std::string> degeneracy_notes(const std::vector<WhatifConfig>& configs, const opt::Inventory& inventory) {
  // One note per distinct text; global_capped's capacity factors with the same note are listed in one.
  std::vector<std::pair<std::string, std::vector<std::string>>> notes;  // (text with a c placeholder, c's)
  std::vector<const WhatifConfig*> firsts;
  std::vector<Routing> routings;
  for (const auto& c : configs) {
    if (c.plan.scope == opt::Scope::global) continue;  // exact by construction
    const Routing r = routing_of(opt::make_plan(inventory, c.plan_config()));
    const std::string key = note_text(c, r, "\x01");
    if (key.empty()) continue;
    auto it = std::find_if(notes.begin(), notes.end(), [&](const auto& n) { return n.first == key; });
    if (it == notes.end()) {
      notes.push_back({key, {}});
      firsts.push_back(&c);
      routings.push_back(r);
      it = notes.end() - 1;
    }
    const std::string cap = opt::capacity_factor_text(c.plan.capacity_factor);
    if (std::find(it->second.begin(), it->second.end(), cap) == it->second.end()) it->second.push_back(cap);
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < notes.size(); ++i) {
    std::string caps;
    for (const auto& cap : notes[i].second) caps += (caps.empty() ? "" : ", ") + cap;
    out.push_back(note_text(*firsts[i], routings[i], caps));
  }
  return out;
}

DeferralResult estimate_deferral(const WhatifConfig& c, const opt::Inventory& inventory, const opt::Plan& plan,
                                 DeferralEstimator estimator) {
  DeferralResult out;
  out.estimator = std::string(to_string(estimator));
  if (c.plan.scope != opt::Scope::global_capped || c.shard_world() < 2) return out;  // no capped path
  if (estimator == DeferralEstimator::analytic) {
    out.fraction = opt::analytic_deferral(plan).fraction();
    return out;
  }
  opt::DeferralConfig d;
  d.inventory = inventory;
  d.plan.optimizer = c.plan.optimizer;
  d.plan.world = c.shard_world();
  d.plan.fraction = c.plan.fraction;
  d.plan.capacity_factor = c.plan.capacity_factor;
  d.stream = c.deferral.stream;
  d.steps = c.deferral.steps;
  d.seed = c.deferral.seed;
  d.threads = c.deferral.threads;
  const opt::DeferralSummary s = opt::run_deferral(d);
  out.fraction = s.deferred_fraction;
  out.mode = std::string(opt::to_string(s.mode));
  return out;
}

opt::SelectionQuality measure_quality(const WhatifConfig& c, const opt::Inventory& inventory) {
  opt::SelectionQualityConfig q;
  q.plan = c.plan_config();
  q.inventory = inventory;
  q.stream = c.deferral.stream;
  q.steps = c.deferral.steps;
  q.seed = c.deferral.seed;
  q.threads = c.deferral.threads;
  return opt::measure_selection_quality(q);
}

WhatifResult run_whatif(const WhatifConfig& config, const opt::Inventory& inventory, const KernelModel& kernels) {
  WhatifResult r;
  r.config = config;
  r.plan = opt::make_plan(inventory, config.plan_config());

  // The optimizer (and FSDP's shard-group collectives) on the shard group's own fabric: every
  // group runs the same collectives at once on disjoint NVLink domains / NICs (exact on
  // non-blocking fabrics; oversubscribed spines shared by the groups are not modelled).
  const SubFabric sub = shard_fabric(config);
  const FabricCollectiveTimer fabric_timer(config.fabric, sub.nodes, sub.gpus_per_node, config.alltoall_algbw_GBps,
                                           config.collective_options);
  const bool crosses_domains = config.shard_world() > topo::with_gpus_per_host(config.fabric, sub.gpus_per_node).gpus_per_nvlink_domain;
  const double a2a_efficiency = crosses_domains ? config.alltoall_inter_efficiency : config.alltoall_intra_efficiency;
  if (!(a2a_efficiency > 0.0 && a2a_efficiency <= 1.0) || !(config.alltoall_latency_us >= 0.0)) {
    throw_bad_input("whatif", "all-to-all calibration",
                    format_g(a2a_efficiency) + ", " + format_g(config.alltoall_latency_us) + " us",
                    "an efficiency in (0, 1] and a latency >= 0");
  }
  const CalibratedAlltoallTimer calibrated(fabric_timer, config.alltoall_algbw_GBps ? 1.0 : a2a_efficiency,
                                           config.alltoall_algbw_GBps ? 0.0 : config.alltoall_latency_us);
  const CollectiveTimer& timer = calibrated;
  StepProgramOptions options;
  options.host_launch_us = config.host_launch_us;
  options.host_ahead = config.host_ahead;
  // Within one NVLink domain the collectives ride NVLink and contend with memory-bound kernels
  // for HBM; across domains the NIC bounds them.
  if (!crosses_domains) options.collective_hbm_slowdown = config.collective_hbm_slowdown.value_or(1.0);
  r.opt = simulate_optimizer_step(r.plan, kernels, timer, options);
  for (const auto& group : r.plan.groups) {
    for (const auto& phase : group.phases) {
      const auto& c = phase.collective;
      if (c.kind == opt::CollectiveKind::none) continue;
      const bool a2a = c.kind == opt::CollectiveKind::all_to_all;
      const CollectiveRequest request{a2a ? StepCollective::all_to_all : StepCollective::all_gather, c.bytes_sent,
                                      c.bytes_per_peer};
      auto it = std::find_if(r.collectives.begin(), r.collectives.end(), [&](const OptimizerCollective& o) {
        return o.name == c.name && o.bytes_sent == c.bytes_sent;
      });
      if (it == r.collectives.end()) {
        r.collectives.push_back({c.name, a2a ? "all_to_all" : "all_gather", c.bytes_sent, 0, timer.time_ns(request),
                                 timer.choice(request)});
        it = r.collectives.end() - 1;
      }
      ++it->count;
    }
  }

  for (const auto& m : inventory.entries) {
    r.params += m.rows * m.cols * m.count;
  }
  r.layers = config.layers > 0 ? config.layers : inventory.layers;  // 0: the whole-step bound
  TrainingConfig tc;
  tc.fwd_bwd_ms = config.fwd_bwd_ms;
  tc.mfu = config.mfu;
  tc.params = r.params;
  tc.tokens_per_gpu = config.tokens_per_gpu;
  tc.world = config.world();
  tc.shard_group = config.shard_group;
  tc.reduce_bytes = config.reduce_dtype == "bf16" ? 2 : 4;
  tc.layers = r.layers;
  tc.peak_bf16_TFLOPs = kernels.config().hardware.peak_bf16_TFLOPs;
  // The forward/backward's GEMMs beside FSDP's collectives: the slowdown the NS GEMMs get beside
  // the optimizer's (a calibration fits it on the 2-node GEMM windows and step walls together).
  tc.compute_overlap_slowdown = kernels.overlap_slowdown("ns_gemm");
  validate(tc);
  const FsdpBytes fb = fsdp_bytes(tc);
  // FSDP's collectives on the collective model, as the optimizer's: the shard group's rings (and
  // trees) cross each node's NICs at once, as NCCL's do; the same calls `collective` prints
  // (all-gather: the gathered output; reduce-scatter, all-reduce: the input).
  LayerCommNs layer;
  layer.allgather_ns = fabric_timer.time_ns({StepCollective::all_gather, fb.allgather_input_bytes, fb.allgather_input_bytes});
  layer.reducescatter_ns = fabric_timer.time_ns({StepCollective::reduce_scatter, fb.reducescatter_input_bytes,
                                                 fb.reducescatter_input_bytes / std::max<std::int64_t>(1, fb.shard_ranks)});
  if (fb.replicas > 1) {
    // HSDP: one all-reduce of the layer's reduced shard across the replicas (NCCL's choice of
    // ring / tree / NVLS and protocol on the replicas' own communicator).
    const ReplicaComm rc = replica_comm(config.fabric, config.nodes, config.gpus_per_node, config.shard_world());
    const CollectiveModel replicas(rc.spec, rc.nodes, rc.gpus_per_node, config.collective_options);
    layer.allreduce_ns = model_time_ns(replicas.cost(CollectiveOp::allreduce, fb.allreduce_bytes));
  }
  r.fwd_bwd = fwd_bwd(tc, layer);

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
    r.rank_wait_ns = expected_rank_wait_ns(config.rank_skew_ms.value_or(0.0), config.shard_world());
  }
  r.exposed_comm_ns = r.fwd_bwd.fsdp_exposed_ns + r.opt.exposed_comm_ns;
  r.mfu_pct = mfu_pct(tc, r.step_wall_ns);
  r.routing = routing_of(r.plan);
  if (config.plan.scope == opt::Scope::global_capped) {
    const DeferralResult d = estimate_deferral(config, inventory, r.plan, config.deferral.estimator);
    r.deferral_fraction = d.fraction;
    r.deferral_estimator = d.estimator;
    r.deferral_mode = d.mode;
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
  out["routing"] = routing_json(r.routing);
  if (r.quality) out["selection_quality"] = opt::to_json(*r.quality);
  if (r.deferral_fraction) {
    out["deferral_estimate"] = r.deferral_estimator;
    if (!r.deferral_mode.empty()) out["deferral_mode"] = r.deferral_mode;
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
                                              const FabricOverrides& o, std::optional<int> gpus_per_node) {
  std::vector<topo::FabricSpec> out;
  const auto nics = nic_GBps.empty() ? std::vector<double>{} : parse_double_list(nic_GBps, "--nic-GBps");
  for (const auto& f : split_list(fabrics, "--fabric")) {
    topo::FabricSpec spec;
    if (gpus_per_node) {
      spec = resolve_fabric(f, *gpus_per_node);
    } else {
      const bool is_file = f.find('/') != std::string::npos || f.ends_with(".toml");
      spec = is_file ? topo::load_topology_file(f).spec : topo::preset(f, "--fabric");
    }
    if (o.nvlink_GBps) spec.nvlink_GBps = *o.nvlink_GBps;
    if (o.oversubscription) spec.oversubscription = *o.oversubscription;
    if (o.latency_us) spec.nvlink_latency_us = spec.nic_latency_us = *o.latency_us;
    if (nics.empty()) out.push_back(spec);
    for (double nic : nics) {
      out.push_back(spec);
      out.back().nic_GBps = nic;  // validated with the fabric by expand()
      out.back().name.append("@").append(format_g(nic));
    }
  }
  return out;
}

namespace {

std::vector<std::int64_t> int_list(const std::string& text, const char* flag) {
  return text.empty() ? std::vector<std::int64_t>{} : parse_int_list(text, flag);
}
std::vector<double> double_list(const std::string& text, const char* flag) {
  return text.empty() ? std::vector<double>{} : parse_double_list(text, flag);
}

}  // namespace

WhatifStudy make_study(const WhatifOptions& o) {
  WhatifStudy study;
  auto& base = study.base;
  base.model = o.model;
  base.plan.optimizer = opt::parse_optimizer(o.optimizer, "--optimizer");
  base.plan.ns = opt::parse_ns(o.ns, "--ns");
  if (o.gpus_per_node) base.gpus_per_node = *o.gpus_per_node;
  study.gpus_per_node = o.gpus_per_node;
  base.host_launch_us = o.host_launch_us;
  base.rank_skew_ms = o.rank_skew_ms;
  base.collective_hbm_slowdown = o.collective_hbm_slowdown;
  base.host_ahead = o.host_ahead;
  base.deferral.estimator = parse_deferral_estimator(o.deferral_estimate, "--deferral-estimate");
  base.deferral.stream = opt::parse_norm_stream(o.norms, "--norms");
  if (o.deferral_steps < 1 || o.deferral_steps > 100000) {
    throw_bad_usage("--steps", std::to_string(o.deferral_steps), "an integer in [1, 100000]");
  }
  base.deferral.steps = o.deferral_steps;
  study.fwd_bwd_mss = double_list(o.fwd_bwd_ms, "--fwd-bwd-ms");
  study.mfus = double_list(o.mfu, "--mfu");
  // The base holds the first value: a calibration fills fwd/bwd only where neither is given.
  if (!study.fwd_bwd_mss.empty()) base.fwd_bwd_ms = study.fwd_bwd_mss.front();
  if (!study.mfus.empty()) base.mfu = study.mfus.front();
  base.alltoall_algbw_GBps = o.alltoall_algbw_GBps;
  base.reduce_dtype = o.reduce_dtype;
  if (o.layers) {
    // Bounded: the FSDP schedule walks every layer (2^31 layers ran for minutes; scripts/fuzz_cli.py).
    if (*o.layers < 1 || *o.layers > opt::kMaxLayers) {
      throw_bad_usage("--layers", std::to_string(*o.layers), "an integer in [1, " + std::to_string(opt::kMaxLayers) + "]");
    }
    base.layers = *o.layers;
  }
  for (const auto& s : split_list(o.scopes, "--scope")) study.scopes.push_back(opt::parse_scope(s, "--scope"));
  study.fractions = parse_double_list(o.fractions, "--fraction");
  for (const auto& c : split_list(o.capacities, "--capacity-factor")) {
    study.capacity_factors.push_back(opt::parse_capacity_factor(c, "--capacity-factor"));
  }
  if (!o.nodes.empty() && !o.gpus.empty()) throw UsageError("give one of --nodes N,.. or --gpus W,..");
  study.nodes = o.gpus.empty() ? parse_int_list(o.nodes.empty() ? "1" : o.nodes, "--nodes") : std::vector<std::int64_t>{};
  study.gpus = int_list(o.gpus, "--gpus");
  study.shard_groups = int_list(o.shard_group, "--shard-group");
  study.global_batch_tokens = int_list(o.global_batch_tokens, "--global-batch-tokens");
  if (study.global_batch_tokens.empty()) {
    study.tokens_per_gpus = parse_int_list(o.tokens_per_gpu, "--tokens-per-gpu");
    if (!study.tokens_per_gpus.empty()) base.tokens_per_gpu = study.tokens_per_gpus.front();
  }
  study.fabrics = resolve_fabrics(o.fabrics, o.nic_GBps, o.overrides, o.gpus_per_node);
  return study;
}

std::string table_header(bool intervals) {
  char buf[512];
  const int w = intervals ? 8 : 0;  // room for " ± half" (half at least 5 wide)
  std::snprintf(buf, sizeof buf, "%-16s %-13s %5s %6s %5s %6s %*s %*s %9s %6s %9s %*s %9s %*s %8s %5s %8s %8s %11s", "fabric",
                "scope", "frac", "cap", "nodes", "world", 9 + w, "step_ms", 8 + w, "opt_ms", "optgpu_ms", "idle%",
                "a2a_MB", 8 + w, "a2a_ms", "exposed_ms", 6 + w, "mfu%", "defer%", "shard", "tok/gpu", "p/g/l", "c_used");
  return buf;
}

std::string table_row(const WhatifResult& r, const std::map<std::string, double>* half_widths) {
  const auto& c = r.config;
  const std::string cap = c.plan.scope != opt::Scope::global_capped ? "-"
                          : c.plan.capacity_factor             ? format_g(*c.plan.capacity_factor)
                                                               : "auto";
  const std::string defer = r.deferral_fraction ? [&] {
    char b[32];
    std::snprintf(b, sizeof b, "%.4f", 100.0 * *r.deferral_fraction);
    return std::string(b);
  }() : "-";
  // A value, or "value ± half" when the metric has an interval.
  auto col = [half_widths](double v, const char* metric, int width, int precision) {
    char b[64];
    const auto it = half_widths ? half_widths->find(metric) : decltype(half_widths->end()){};
    if (half_widths && it != half_widths->end())
      std::snprintf(b, sizeof b, "%*.*f ± %-*.*f", width, precision, v, 5, precision, it->second);
    else
      std::snprintf(b, sizeof b, "%*.*f", width, precision, v);
    return std::string(b);
  };
  char buf[640];
  const std::string shard = c.shard_group > 0 ? std::to_string(c.shard_group) : "-";
  std::snprintf(buf, sizeof buf, "%-16s %-13s %5g %6s %5d %6lld %s %s %9.2f %6.1f %9.1f %s %10.2f %s %8s %5s %8lld %8s %11s",
                c.fabric.name.c_str(), std::string(opt::to_string(c.plan.scope)).c_str(), c.plan.fraction, cap.c_str(), c.nodes,
                static_cast<long long>(c.world()), col(ns_to_ms(r.step_wall_ns), "step_wall_ms", 9, 2).c_str(),
                col(ns_to_ms(r.opt_wall_seen_ns()), "opt_wall_ms", 8, 2).c_str(), ns_to_ms(r.opt.gpu_busy_ns), r.gpu_idle_seen_pct(),
                static_cast<double>(r.plan.a2a_payload_bytes) / 1e6, col(ns_to_ms(r.a2a_seen_ns()), "a2a_ms", 8, 2).c_str(),
                ns_to_ms(r.exposed_comm_ns), col(r.mfu_pct, "mfu_pct", 6, 2).c_str(), defer.c_str(), shard.c_str(),
                static_cast<long long>(c.tokens_per_gpu), routing_text(r.routing).c_str(),
                resolved_capacity_text(r.routing).c_str());
  return buf;
}

}  // namespace dionsim::sim
