#pragma once
// What every recorded run carries besides its results: where it ran, from which source, when,
// and a stable identity for its configuration.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/config_match.hpp"  // canonical_json

namespace dionsim::analysis {

// The git revision of the source tree this binary was built from: the full commit hash, with
// "-dirty" appended when the tree had uncommitted changes or new (non-ignored) files at build time. Resolved at every
// build (not only at configure), so it follows commits. "unknown" when the sources were not a
// git checkout or git was not available — never a guess.
[[nodiscard]] std::string git_revision();

// The dionsim version (CMake project version), e.g. "0.1.0".
[[nodiscard]] std::string dionsim_version();

// This machine's host name (gethostname), "unknown" if the call fails.
[[nodiscard]] std::string host_name();

// Current UTC time as ISO 8601 with milliseconds: "2026-11-30T01:57:03.123Z". Sorts as text.
[[nodiscard]] std::string utc_now();


// SHA-256 of `bytes`, 64 lower-case hex digits (FIPS 180-4).
[[nodiscard]] std::string sha256_hex(std::string_view bytes);

// The identity of a configuration: sha256_hex(canonical_json(config)). SHA-256 rather than a
// 64-bit hash so that the value can be recomputed by any tool (`printf %s "$json" | sha256sum`)
// and collisions are not a concern at any sweep size.
[[nodiscard]] std::string config_hash(const nlohmann::json& config);

}  // namespace dionsim::analysis
