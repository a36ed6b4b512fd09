#pragma once
// What `dionsim whatif` reads and writes around sim::run_whatif: its kernel calibration (a kernel
// calibration file, a `dionsim calibrate` file, or a calibration stored in the database), measured
// GEMMs from the database, the run as the database stores it, and the Chrome trace of a result.
// `note` receives the lines meant for people (the CLI logs them to stderr).
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "analysis/fit_calibration.hpp"
#include "analysis/store.hpp"
#include "sim/whatif.hpp"
#include "sim/whatif_calibration.hpp"

namespace dionsim::analysis {

using Note = std::function<void(const std::string&)>;

// A calibration stored in the database under `name`, when `db` is given, has one and `name` is not
// a file (a file wins); nullopt otherwise. `db_label` names the database in errors.
[[nodiscard]] std::optional<Calibration> stored_calibration(const Database* db, const std::string& name,
                                                            const std::string& db_label);

// A `dionsim calibrate` file (schema_version) or a kernel calibration (schema); with a database, a
// name that is not a file is looked up in its calibrations (`db_label` names the database in errors).
[[nodiscard]] sim::KernelCalibration load_whatif_calibration(const std::string& path, const sim::Hardware& hw,
                                                             const Database* db, const std::string& db_label,
                                                             const Note& note);

// Measured bf16 GEMMs of this GPU in the database replace the compiled-in anchors (no change when
// the database holds none).
void use_db_gemms(const Database& db, sim::KernelCalibration& cal, const std::string& db_label, const Note& note);

// The run as the database stores it: the configuration, every metric (unit from its name's
// suffix), and rank 0's optimizer phases (all ranks alike under the plan's symmetry).
[[nodiscard]] RunRecord whatif_record(const sim::WhatifResult& r, const nlohmann::json& config, std::uint64_t seed);

// One Chrome trace file of the result in `dir` (created), with the ranks of `ranks_spec`.
void write_whatif_trace(const sim::WhatifResult& r, const std::string& dir, const std::string& ranks_spec);

}  // namespace dionsim::analysis
