#pragma once
// JSON form of a Plan (DESIGN.md "Plan" contract): kept apart from plan.hpp so that consumers of
// the plan structs do not pay for nlohmann/json.
#include <nlohmann/json.hpp>

#include "optimizer/plan.hpp"

namespace dionsim::opt {

[[nodiscard]] nlohmann::json to_json(const Plan& plan);
[[nodiscard]] nlohmann::json to_json(const GroupPlan& group);

// The capacity factor in stored configurations: a number, or "auto" — except in the plan's and the
// measured runs' configurations, which have stored auto as null since their first schema. Each
// kind keeps its form so that stored configuration hashes stay valid (docs/database.md); readers
// accept both. capacity_factor_from_json throws InputError naming `where` for anything else.
enum class AutoAs { text, null };
[[nodiscard]] nlohmann::json capacity_factor_json(std::optional<double> c, AutoAs auto_as = AutoAs::text);
[[nodiscard]] std::optional<double> capacity_factor_from_json(const nlohmann::json& value, const std::string& where);

}  // namespace dionsim::opt
