#pragma once
// JSON of the deferral study (`dionsim deferral --json`): one object per configuration; and its
// fixed-width table lines (the default output).
#include <nlohmann/json.hpp>
#include <string>

#include "optimizer/deferral.hpp"

namespace dionsim::opt {

// The configuration alone: model, optimizer, world, fraction, capacity_factor (auto as "auto"), ef,
// norms, steps, trials, seed, and momentum_dtype when not float32. The --json echo and the stored
// run's configuration (analysis/records) both start from it.
[[nodiscard]] nlohmann::json config_json(const DeferralConfig& config);
// The configuration echo and every result key (docs/deferral.md lists them).
[[nodiscard]] nlohmann::json to_json(const DeferralConfig& config, const DeferralSummary& summary);
[[nodiscard]] nlohmann::json to_json(const DeferralConfig& config, double target, const Recommendation& rec);

// Table lines, each ending in '\n': the sweep (one row per configuration) and --recommend.
[[nodiscard]] std::string table_header();
[[nodiscard]] std::string table_row(const DeferralConfig& c, const DeferralSummary& s);
[[nodiscard]] std::string recommend_table_header();
[[nodiscard]] std::string recommend_table_row(const DeferralConfig& c, double target, const Recommendation& r);

}  // namespace dionsim::opt
