#pragma once
// JSON of the deferral study (`dionsim deferral --json`): one object per configuration.
#include <nlohmann/json.hpp>

#include "optimizer/deferral.hpp"

namespace dionsim::opt {

// The configuration echo and every result key (docs/deferral.md lists them).
[[nodiscard]] nlohmann::json to_json(const DeferralConfig& config, const DeferralSummary& summary);
[[nodiscard]] nlohmann::json to_json(const DeferralConfig& config, double target, const Recommendation& rec);

}  // namespace dionsim::opt
