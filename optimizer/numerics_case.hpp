#pragma once
// Numerics case folders (DESIGN.md "Numerics case folder"): case.json + W0_<name>.npy +
// G<t>_<name>.npy in, OUT_DIR/W_<name>.npy + OUT_DIR/stats.json out.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "optimizer/reference_step.hpp"

namespace dionsim::opt {

struct NumericsCase {
  std::string dir;
  StepConfig config;
  std::vector<ParamSpec> params;
  std::int64_t steps = 0;
  std::vector<std::vector<float>> initial;            // [param] full W0
  std::vector<std::vector<std::vector<float>>> grads;  // [step][param] full G<t>
};

// Reads and validates case.json and every input array before any work. Throws InputError naming
// the file and the field (`case.json: fraction: got '1.5', expected a number in (0, 1]`).
// case.json keys: optimizer, scope, world, fraction, steps, lr, ef_decay, weight_decay, adjust_lr,
// capacity_factor, mu, muon_beta2, params, sharding ("rows" | "none" = DDP), dtype ("float32" |
// "bfloat16"), and two optional extensions: ns ("polar_express" | "newton_schulz5"), epsilon.
[[nodiscard]] NumericsCase load_numerics_case(const std::string& dir);

// Runs all steps; returns the optimizer (weights, stats).
[[nodiscard]] std::unique_ptr<ReferenceOptimizer> run_numerics_case(const NumericsCase& c, int threads);

// {"per_rank": [[{"deferred_rows", "winner_rows"} per step] per rank]} (0/0 on steps without a
// packed megabatch).
[[nodiscard]] nlohmann::json stats_to_json(const ReferenceOptimizer& opt);

// Writes W_<name>.npy (float32) and stats.json into out_dir (created if missing). IoError on failure.
void write_numerics_outputs(const std::string& out_dir, const NumericsCase& c, const ReferenceOptimizer& opt);

}  // namespace dionsim::opt
