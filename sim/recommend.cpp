#include "sim/recommend.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>

#include "common/error.hpp"
#include "common/format.hpp"
#include "optimizer/plan_json.hpp"

namespace dionsim::sim {

namespace {

int scope_rank(opt::Scope s) {
  switch (s) {
    case opt::Scope::local: return 0;
    case opt::Scope::global: return 1;
    case opt::Scope::global_capped: return 2;
  }
  return 3;
}

// The order candidates are considered in: shortest step first; on a tie the candidate that is what
// it says, then the simpler scope, then the smaller c (auto after every number: it is per group).
bool before(const RecommendCandidate& a, const RecommendCandidate& b) {
  if (a.result.step_wall_ns != b.result.step_wall_ns) return a.result.step_wall_ns < b.result.step_wall_ns;
  if (a.degeneracy.empty() != b.degeneracy.empty()) return a.degeneracy.empty();
  const int sa = scope_rank(a.result.config.plan.scope), sb = scope_rank(b.result.config.plan.scope);
  if (sa != sb) return sa < sb;
  const double ca = a.result.config.plan.capacity_factor.value_or(1e300), cb = b.result.config.plan.capacity_factor.value_or(1e300);
  return ca < cb;
}

// The cluster of a configuration: everything but the candidate axes.
nlohmann::json cluster_of(const WhatifConfig& c) {
  nlohmann::json j = to_json(c);
  for (const char* key : {"scope", "capacity_factor", "deferral_estimate", "deferral_steps", "deferral_norms", "deferral_seed"}) {
    j.erase(key);
  }
  return j;
}

void estimate(RecommendCandidate& c, const opt::Inventory& inventory, double target) {
  const auto& cfg = c.result.config;
  if (cfg.plan.scope != opt::Scope::global_capped) {
    c.deferral_fraction = 0.0;  // nothing is ever deferred outside the capped pack
    c.deferral_estimator = "exact";
  } else if (cfg.deferral.estimator == DeferralEstimator::analytic) {
    c.deferral_fraction = c.result.deferral_fraction;  // run_whatif's, the engine's analytic figure
    c.deferral_estimator = c.result.deferral_estimator;
  } else {
    const DeferralResult d = estimate_deferral(cfg, inventory, c.result.plan, DeferralEstimator::simulated);
    c.deferral_fraction = d.fraction;
    c.deferral_estimator = d.estimator + (d.mode.empty() ? "" : " (" + d.mode + ")");
  }
  c.feasible = *c.deferral_fraction <= target;
}

nlohmann::json candidate_json(const RecommendCandidate& c) {
  const auto& r = c.result;
  nlohmann::json j = {
      {"candidate", c.label()},
      {"scope", std::string(opt::to_string(r.config.plan.scope))},
      {"capacity_factor", r.config.plan.scope == opt::Scope::global_capped ? opt::capacity_factor_json(r.config.plan.capacity_factor)
                                                                      : nlohmann::json(nullptr)},
      {"step_wall_ms", ns_to_ms(r.step_wall_ns)},
      {"opt_wall_ms", ns_to_ms(r.opt_wall_seen_ns())},
      {"a2a_payload_bytes", r.plan.a2a_payload_bytes},
      {"deferral_fraction", c.deferral_fraction ? nlohmann::json(*c.deferral_fraction) : nlohmann::json(nullptr)},
      {"deferral_estimate", c.deferral_fraction ? nlohmann::json(c.deferral_estimator) : nlohmann::json(nullptr)},
      {"feasible", c.feasible ? nlohmann::json(*c.feasible) : nlohmann::json(nullptr)},
      {"routing", routing_json(r.routing)},
      {"capacity_factor_resolved_min", r.routing.capacity_factor_min ? nlohmann::json(*r.routing.capacity_factor_min) : nlohmann::json(nullptr)},
      {"capacity_factor_resolved_max", r.routing.capacity_factor_max ? nlohmann::json(*r.routing.capacity_factor_max) : nlohmann::json(nullptr)},
      {"degenerate", c.degeneracy.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.degeneracy)},
      {"eligible", c.eligible()},
      {"selection_quality", r.quality ? opt::to_json(*r.quality) : nlohmann::json(nullptr)},
  };
  for (const auto& [metric, iv] : c.intervals) {
    j[metric + "_lo"] = iv.lo;
    j[metric + "_hi"] = iv.hi;
  }
  return j;
}

std::string percent(const std::optional<double>& f) {
  if (!f) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", 100.0 * *f);
  return buf;
}

std::string cap_text(const WhatifConfig& c) {
  return c.plan.scope == opt::Scope::global_capped ? opt::capacity_factor_text(c.plan.capacity_factor) : "-";
}

}  // namespace

std::string RecommendCandidate::label() const {
  const auto& c = result.config;
  std::string s(opt::to_string(c.plan.scope));
  if (c.plan.scope == opt::Scope::global_capped) s += "@" + opt::capacity_factor_text(c.plan.capacity_factor);
  return s;
}

opt::Scope RecommendCandidate::effective_scope() const {
  const auto& c = result.config;
  if (c.plan.scope == opt::Scope::global_capped && result.routing.packed == 0) return opt::Scope::global;
  return c.plan.scope;
}

bool RecommendCandidate::eligible() const {
  return !(result.config.plan.scope == opt::Scope::local && result.routing.local_all_rows > 0);
}

std::optional<double> ClusterRecommendation::margin_ms() const {
  if (!pick || !runner_up) return std::nullopt;
  return ns_to_ms(candidates[*runner_up].result.step_wall_ns - candidates[*pick].result.step_wall_ns);
}

void validate(const RecommendStudy& s) {
  if (!(s.target_deferral > 0.0 && s.target_deferral < 1.0)) {
    throw_bad_usage("--target-deferral", format_g(s.target_deferral), "a fraction of winner rows in (0, 1), e.g. 1e-4");
  }
  if (s.study.fractions.size() != 1) {
    throw_bad_usage("--fraction", std::to_string(s.study.fractions.size()) + " values",
                    "one fraction (recommend compares scopes and capacity factors at one fraction)");
  }
  (void)expand(s.study);
}

std::vector<ClusterRecommendation> recommend(const RecommendStudy& study, const opt::Inventory& inventory,
                                             const KernelModel& kernels,
                                             const std::function<void(const ClusterRecommendation&)>& done,
                                             const MarginModel& margin_model,
                                             const CandidateIntervals& candidate_intervals) {
  validate(study);
  // Clusters in the sweep's order (the first scope lists every one), candidates within each.
  std::vector<std::string> order;
  std::map<std::string, std::vector<WhatifConfig>> clusters;
  auto configs = expand(study.study);
  if (study.fabric_calibration) (void)apply_fabric_calibration(*study.fabric_calibration, study.study, configs);
  for (auto& c : configs) {
    const std::string key = cluster_of(c).dump();
    if (!clusters.count(key)) order.push_back(key);
    // Every candidate runs with the analytic estimate (cheap); a simulated one is run below only
    // where the choice needs it.
    c.deferral.estimator = DeferralEstimator::analytic;
    clusters[key].push_back(std::move(c));
  }
  const DeferralEstimator estimator = study.study.base.deferral.estimator;
  std::vector<ClusterRecommendation> out;
  for (const auto& key : order) {
    ClusterRecommendation rec;
    for (auto c : clusters[key]) {
      RecommendCandidate cand;
      cand.result = run_whatif(c, inventory, kernels);
      cand.result.config.deferral.estimator = estimator;
      cand.degeneracy = degeneracy_note(cand.result.config, cand.result.routing);
      rec.candidates.push_back(std::move(cand));
    }
    std::vector<std::size_t> idx(rec.candidates.size());
    std::iota(idx.begin(), idx.end(), std::size_t{0});
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return before(rec.candidates[a], rec.candidates[b]); });
    for (std::size_t i : idx) {
      auto& cand = rec.candidates[i];
      // Analytic: every candidate's deferral (cheap). Simulated: only until the choice is made.
      if (estimator == DeferralEstimator::simulated && rec.pick && rec.runner_up) break;
      estimate(cand, inventory, study.target_deferral);
      if (!*cand.feasible || !cand.eligible()) continue;
      if (!rec.pick) {
        rec.pick = i;
      } else if (!rec.runner_up && cand.effective_scope() != rec.candidates[*rec.pick].effective_scope()) {
        rec.runner_up = i;
      }
    }
    // What the pick and the runner-up buy: the share of the exact top-k rows they apply.
    for (const auto& i : {rec.pick, rec.runner_up}) {
      if (i) rec.candidates[*i].result.quality = measure_quality(rec.candidates[*i].result.config, inventory);
      if (i && candidate_intervals) rec.candidates[*i].intervals = candidate_intervals(rec.candidates[*i].result.config);
    }
    if (margin_model && rec.pick && rec.runner_up) {
      rec.margin_interval = margin_model(rec.candidates[*rec.pick].result.config, rec.candidates[*rec.runner_up].result.config);
    }
    if (study.collective_stress_low && study.collective_stress_high && rec.pick && rec.runner_up) {
      // Both candidates with every collective call at one end of the record (correlated: a cluster
      // the model misses, misses in every call of a regime alike).
      const auto margin_at = [&](const std::array<double, 3>& factors) {
        WhatifConfig pick = rec.candidates[*rec.pick].result.config, runner_up = rec.candidates[*rec.runner_up].result.config;
        pick.collective_options.time_factor_by_size_regime = factors;
        runner_up.collective_options.time_factor_by_size_regime = factors;
        return ns_to_ms(run_whatif(runner_up, inventory, kernels).step_wall_ns) -
               ns_to_ms(run_whatif(pick, inventory, kernels).step_wall_ns);
      };
      rec.stress_margin_ms = {{margin_at(*study.collective_stress_low), margin_at(*study.collective_stress_high)}};
    }
    rec.cluster = rec.candidates[rec.pick.value_or(idx.front())].result.config;
    if (done) done(rec);
    out.push_back(std::move(rec));
  }
  return out;
}

std::optional<bool> ClusterRecommendation::pick_holds_under_stress() const {
  if (!stress_margin_ms) return std::nullopt;
  return stress_margin_ms->first > 0 && stress_margin_ms->second > 0;
}

nlohmann::json cluster_json(const ClusterRecommendation& r) { return cluster_of(r.cluster); }

nlohmann::json to_json(const ClusterRecommendation& r, const RecommendStudy& study) {
  nlohmann::json j = cluster_json(r);
  j["target_deferral"] = study.target_deferral;
  const auto& d = study.study.base.deferral;
  j["deferral_estimate"] = std::string(to_string(d.estimator));
  if (d.estimator == DeferralEstimator::simulated) {
    j["deferral_steps"] = d.steps;
    j["deferral_norms"] = d.stream.text;
    j["deferral_seed"] = d.seed;
  }
  j["pick"] = r.pick ? candidate_json(r.candidates[*r.pick]) : nlohmann::json(nullptr);
  j["runner_up"] = r.runner_up ? candidate_json(r.candidates[*r.runner_up]) : nlohmann::json(nullptr);
  const auto margin = r.margin_ms();
  j["margin_ms"] = margin ? nlohmann::json(*margin) : nlohmann::json(nullptr);
  if (r.margin_interval) {
    j["margin_ms_lo"] = r.margin_interval->lo_ms;
    j["margin_ms_hi"] = r.margin_interval->hi_ms;
    j["p_pick_wins"] = r.margin_interval->p_pick_wins;
  }
  if (r.stress_margin_ms) {
    j["margin_ms_collectives_at_record_low"] = r.stress_margin_ms->first;
    j["margin_ms_collectives_at_record_high"] = r.stress_margin_ms->second;
    j["pick_holds_at_record_ends"] = *r.pick_holds_under_stress();
  }
  nlohmann::json all = nlohmann::json::array();
  for (const auto& c : r.candidates) all.push_back(candidate_json(c));
  j["candidates"] = std::move(all);
  return j;
}

std::string recommend_table_header() {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-16s %5s %6s  %-13s %6s %19s %8s %7s %11s %7s  %-13s %6s %19s %7s  %16s %6s  %s",
                "fabric", "nodes", "world", "pick", "cap", "step_ms", "defer%", "p/g/l", "c_used", "quality", "runner_up",
                "cap", "step_ms", "quality", "margin_ms", "P(win)", "margin@record");
  return buf;
}

namespace {

// Right-aligned in `width` characters (UTF-8 code points: "±" is two bytes, one column).
std::string pad_left(const std::string& text, std::size_t width) {
  const auto chars = static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char ch) { return (static_cast<unsigned char>(ch) & 0xC0) != 0x80; }));
  return std::string(width > chars ? width - chars : 0, ' ') + text;
}

// "3887.21 ± 156.72" with the candidate's step interval, "3887.21" without one.
std::string step_text(const RecommendCandidate& c) {
  char b[64];
  const auto it = c.intervals.find("step_wall_ms");
  if (it == c.intervals.end()) {
    std::snprintf(b, sizeof b, "%.2f", ns_to_ms(c.result.step_wall_ns));
  } else {
    std::snprintf(b, sizeof b, "%.2f ± %.2f", ns_to_ms(c.result.step_wall_ns), 0.5 * (it->second.hi - it->second.lo));
  }
  return b;
}

std::string quality_text(const WhatifResult& r) {
  if (!r.quality) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.4f", r.quality->overlap_mean);
  return b;
}

}  // namespace

std::string recommend_table_row(const ClusterRecommendation& r) {
  const auto& c = r.cluster;
  char buf[512];
  if (!r.pick) {
    std::snprintf(buf, sizeof buf, "%-16s %5d %6lld  %s", c.fabric.name.c_str(), c.nodes,
                  static_cast<long long>(c.world()), "(no candidate meets the deferral target)");
    return buf;
  }
  const auto& p = r.candidates[*r.pick];
  std::string ru = "-", ru_cap = "-", ru_step = "-", ru_quality = "-", margin = "-", p_win = "-", stress = "-";
  if (r.runner_up) {
    const auto& q = r.candidates[*r.runner_up];
    ru = std::string(opt::to_string(q.result.config.plan.scope));
    ru_cap = cap_text(q.result.config);
    ru_quality = quality_text(q.result);
    char b[64];
    ru_step = step_text(q);
    if (r.margin_interval) {
      std::snprintf(b, sizeof b, "%+.2f ± %.2f", *r.margin_ms(), 0.5 * (r.margin_interval->hi_ms - r.margin_interval->lo_ms));
      margin = b;
      std::snprintf(b, sizeof b, "%.3f", r.margin_interval->p_pick_wins);
      p_win = b;
    } else {
      std::snprintf(b, sizeof b, "%+.2f", *r.margin_ms());
      margin = b;
    }
    if (r.stress_margin_ms) {
      std::snprintf(b, sizeof b, "%+.1f / %+.1f%s", r.stress_margin_ms->first, r.stress_margin_ms->second,
                    *r.pick_holds_under_stress() ? "" : " (flips)");
      stress = b;
    }
  }
  std::snprintf(buf, sizeof buf, "%-16s %5d %6lld  %-13s %6s %s %8s %7s %11s %7s  %-13s %6s %s %7s  %s %6s  %s",
                c.fabric.name.c_str(), c.nodes, static_cast<long long>(c.world()),
                std::string(opt::to_string(p.result.config.plan.scope)).c_str(), cap_text(p.result.config).c_str(),
                pad_left(step_text(p), 19).c_str(), percent(p.deferral_fraction).c_str(), routing_text(p.result.routing).c_str(),
                resolved_capacity_text(p.result.routing).c_str(), quality_text(p.result).c_str(), ru.c_str(),
                ru_cap.c_str(), pad_left(ru_step, 19).c_str(), ru_quality.c_str(), pad_left(margin, 16).c_str(), p_win.c_str(),
                stress.c_str());
  return buf;
}

}  // namespace dionsim::sim
