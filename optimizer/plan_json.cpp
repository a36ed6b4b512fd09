#include "optimizer/plan_json.hpp"

#include "common/error.hpp"

namespace dionsim::opt {

nlohmann::json to_json(const GroupPlan& g) {
  nlohmann::json phases = nlohmann::json::array();
  for (const PhasePlan& p : g.phases) {
    nlohmann::json kernels = nlohmann::json::array();
    for (const KernelWork& k : p.kernels) {
      kernels.push_back({{"kernel", k.kernel}, {"gemm_flops", k.gemm_flops}, {"hbm_bytes", k.hbm_bytes},
                         {"launches", k.launches}});
    }
    phases.push_back({{"kernels", kernels},
                      {"collective",
                       {{"kind", to_string(p.collective.kind)},
                        {"name", p.collective.name},
                        {"bytes_sent", p.collective.bytes_sent},
                        {"bytes_per_peer", p.collective.bytes_per_peer}}}});
  }
  return {{"rows", g.rows},        {"cols", g.cols},
          {"N", g.N},              {"Np", g.Np},
          {"pr", g.pr},            {"pl", g.pl},
          {"k", g.k},              {"k_tot", g.k_tot},
          {"kw", g.kw},            {"c", g.c},
          {"B", g.B},              {"routed", g.routed},
          {"path", to_string(g.path)},
          {"select_rows", g.select_rows},
          {"ns_rows", g.ns_rows},  {"ns_cols", g.ns_cols},
          {"ns_matrices", g.ns_matrices},
          {"ns_flops", g.ns_flops},
          {"a2a_bytes", g.a2a_bytes},
          {"norms_bytes", g.norms_bytes},
          {"allgather_bytes", g.allgather_bytes},
          {"phases", phases}};
}

nlohmann::json to_json(const Plan& plan) {
  nlohmann::json groups = nlohmann::json::array();
  for (const GroupPlan& g : plan.groups) {
    groups.push_back(to_json(g));
  }
  const PlanConfig& c = plan.config;
  return {{"model", plan.model},
          {"config",
           {{"world", c.world},
            {"scope", to_string(c.scope)},
            {"fraction", c.fraction},
            {"capacity_factor", capacity_factor_json(c.capacity_factor, AutoAs::null)},
            {"optimizer", to_string(c.optimizer)},
            {"ns", to_string(c.ns)},
            {"sharded", c.sharded},
            {"momentum_bytes", c.momentum_bytes},
            {"param_bytes", c.param_bytes}}},
          {"a2a_payload_bytes", plan.a2a_payload_bytes},
          {"norms_allgather_bytes", plan.norms_allgather_bytes},
          {"ddp_allgather_bytes", plan.ddp_allgather_bytes},
          {"ns_flops_per_rank", plan.ns_flops_per_rank},
          {"collectives", plan.collectives},
          {"groups", groups}};
}

nlohmann::json capacity_factor_json(std::optional<double> c, AutoAs auto_as) {
  if (c) return *c;
  return auto_as == AutoAs::text ? nlohmann::json("auto") : nlohmann::json(nullptr);
}

std::optional<double> capacity_factor_from_json(const nlohmann::json& value, const std::string& where) {
  if (value.is_null() || (value.is_string() && value.get_ref<const std::string&>() == "auto")) return std::nullopt;
  if (value.is_number() && is_valid_capacity_factor(value.get<double>())) return value.get<double>();
  throw_bad_input(where, "capacity_factor", value.dump(), "\"auto\", null or a number in [1, 1e6]");
}

}  // namespace dionsim::opt
