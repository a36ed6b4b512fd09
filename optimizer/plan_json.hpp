#pragma once
// JSON form of a Plan (DESIGN.md "Plan" contract): kept apart from plan.hpp so that consumers of
// the plan structs do not pay for nlohmann/json.
#include <nlohmann/json.hpp>

#include "optimizer/plan.hpp"

namespace dionsim::opt {

[[nodiscard]] nlohmann::json to_json(const Plan& plan);
[[nodiscard]] nlohmann::json to_json(const GroupPlan& group);

}  // namespace dionsim::opt
