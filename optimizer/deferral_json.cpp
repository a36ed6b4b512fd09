#include "optimizer/deferral_json.hpp"

namespace dionsim::opt {

namespace {

nlohmann::json config_json(const DeferralConfig& c) {
  return {{"model", c.inventory.name},
          {"optimizer", std::string(to_string(c.optimizer))},
          {"world", c.world},
          {"fraction", c.fraction},
          {"capacity_factor", c.capacity_factor ? nlohmann::json(*c.capacity_factor) : nlohmann::json("auto")},
          {"ef", c.ef},
          {"norms", c.stream.text},
          {"steps", c.steps},
          {"trials", c.trials},
          {"seed", c.seed}};
}

}  // namespace

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

}  // namespace dionsim::opt
