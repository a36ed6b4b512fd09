#include "optimizer/deferral_json.hpp"

#include "common/format.hpp"
#include "optimizer/plan_json.hpp"

namespace dionsim::opt {

nlohmann::json config_json(const DeferralConfig& c) {
  nlohmann::json j = {{"model", c.inventory.name},
          {"optimizer", std::string(to_string(c.plan.optimizer))},
          {"world", c.plan.world},
          {"fraction", c.plan.fraction},
          {"capacity_factor", capacity_factor_json(c.plan.capacity_factor)},
          {"ef", c.ef},
          {"norms", c.stream.text},
          {"steps", c.steps},
          {"trials", c.trials},
          {"seed", c.seed}};
  // Named only when not the default, so that runs stored before the option keep their hashes.
  if (c.momentum_dtype != Dtype::float32) j["momentum_dtype"] = std::string(to_string(c.momentum_dtype));
  return j;
}

nlohmann::json to_json(const DeferralConfig& c, const DeferralSummary& s) {
  nlohmann::json j = config_json(c);
  j["mode"] = std::string(to_string(s.mode));
  j["packed_groups"] = s.packed_groups;
  j["routed_groups"] = s.routed_groups;
  j["group_c"] = s.group_c;
  j["winner_rows"] = s.winner_rows;
  j["deferred_rows"] = s.deferred_rows;
  j["applied_rows"] = s.applied_rows;
  j["deferred_fraction"] = s.deferred_fraction;
  j["deferred_fraction_step_p50"] = s.step_p50;
  j["deferred_fraction_step_p99"] = s.step_p99;
  j["deferred_fraction_step_max"] = s.step_max;
  j["steps_with_deferral"] = s.steps_with_deferral;
  j["per_step_deferred_fraction"] = s.per_step_mean;
  nlohmann::json hist = nlohmann::json::array();
  for (std::size_t i = 1; i < s.waits.hist.size(); ++i) {
    if (s.waits.hist[i] != 0) hist.push_back({{"steps", i}, {"count", s.waits.hist[i]}});
  }
  j["wait_histogram"] = hist;  // the last bin (steps = kMaxWait) collects >= kMaxWait
  j["wait_histogram_open_bin"] = kMaxWait;
  j["waits_censored"] = s.waits.censored;
  j["waits_abandoned"] = s.waits.abandoned;
  j["nominal_fraction"] = s.nominal_fraction;
  j["effective_applied_fraction"] = s.effective_fraction;
  j["a2a_payload_bytes"] = s.a2a_payload_bytes;
  j["a2a_payload_bytes_c1"] = s.a2a_payload_bytes_c1;
  j["extra_bytes_over_c1"] = s.extra_bytes;
  j["analytic_deferred_fraction"] = s.analytic_deferred_fraction;
  j["wall_ms"] = s.wall_ms;
  return j;
}

nlohmann::json to_json(const DeferralConfig& c, double target, const Recommendation& r) {
  nlohmann::json j = config_json(c);
  j.erase("capacity_factor");
  j["target"] = target;
  j["recommended_capacity_factor"] = r.capacity_factor ? nlohmann::json(*r.capacity_factor) : nlohmann::json(nullptr);
  j["deferred_fraction"] = r.deferred_fraction;
  j["extra_bytes_over_c1"] = r.extra_bytes;
  j["evaluations"] = r.evaluations;
  return j;
}

std::string table_header() {
  return format("%6s %8s %-22s %-7s %12s %10s %10s %10s %7s %12s %9s %14s\n", "world", "c", "norms", "mode",
                "deferred", "step_p50", "step_p99", "step_max", "any%", "analytic", "eff_frac", "extra_bytes");
}

std::string table_row(const DeferralConfig& c, const DeferralSummary& s) {
  const std::string cf = c.plan.capacity_factor ? std::to_string(*c.plan.capacity_factor).substr(0, 6) : "auto";
  return format("%6lld %8s %-22s %-7s %12.4e %10.3e %10.3e %10.3e %7.2f %12.4e %9.5f %14lld%s\n",
                static_cast<long long>(c.plan.world), cf.c_str(), c.stream.text.c_str(),
                std::string(to_string(s.mode)).c_str(), s.deferred_fraction, s.step_p50, s.step_p99, s.step_max,
                100.0 * s.steps_with_deferral, s.analytic_deferred_fraction, s.effective_fraction,
                static_cast<long long>(s.extra_bytes), s.packed_groups == 0 ? "  (no packed group: all routed)" : "");
}

std::string recommend_table_header() {
  return format("%6s %-22s %10s %12s %14s %6s\n", "world", "norms", "target", "c", "deferred", "extra_bytes");
}

std::string recommend_table_row(const DeferralConfig& c, double target, const Recommendation& r) {
  return format("%6lld %-22s %10.2e %12s %14.4e %14lld\n", static_cast<long long>(c.plan.world), c.stream.text.c_str(),
                target, r.capacity_factor ? std::to_string(*r.capacity_factor).substr(0, 6).c_str() : "> 4",
                r.deferred_fraction, static_cast<long long>(r.extra_bytes));
}

}  // namespace dionsim::opt
