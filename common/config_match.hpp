#pragma once
// Matching `--where key=value` conditions against a configuration's JSON, and the canonical JSON
// text that configurations are hashed and compared by. Shared by the store (queries) and the
// calibration (selecting measured configurations), which know nothing of each other.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace dionsim {

// The canonical text of a JSON value: no whitespace, object keys sorted (nlohmann::json's object
// is ordered), invalid UTF-8 replaced by U+FFFD rather than refused.
[[nodiscard]] std::string canonical_json(const nlohmann::json& value);

// One "key=value" condition on a run's configuration. The key is a dotted path into the config
// object ("fabric.nic_GBps"); the value matches a JSON string by text, a number by numeric value
// ("0.25" matches 0.25, "64" matches 64), a boolean by "true"/"false", null by "null", and an
// array or object by its canonical JSON text. A run lacking the key does not match.
struct ConfigMatch {
  std::string key;
  std::string value;
  // Parses "key=value" (as given to --where); throws UsageError for anything else.
  [[nodiscard]] static ConfigMatch parse(std::string_view text);
  [[nodiscard]] bool matches(const nlohmann::json& config) const;
};

}  // namespace dionsim
