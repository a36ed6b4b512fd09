#pragma once
// Reading back what a database holds, for the subcommands that start from stored runs: measured
// configurations (calibrate --db, validate --db), stored calibrations by name (whatif and validate
// --calibration NAME), measured GEMM timings (whatif --db), gradient row statistics (deferral
// --norms replay:DB). Errors name the database file and the run.
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analysis/calibration/fit_calibration.hpp"
#include "analysis/measured/measurements.hpp"
#include "analysis/store/store.hpp"
#include "optimizer/deferral_stream.hpp"
#include "sim/whatif_calibration.hpp"

namespace dionsim::analysis {

using Note = std::function<void(const std::string&)>;

// Every measured run of `db` that describes a whole configuration (hardware, model, scope, …) with
// its aggregated metrics; InputError when there is none or a stored metric is unknown.
[[nodiscard]] std::vector<MeasuredConfiguration> measured_configurations_from_db(const Database& db);

// The calibration stored in `db` under `name`, unless `name` is an existing file (a path wins) or
// there is no database; nullopt then. UsageError (naming --calibration and the database) for a
// name that is neither a file nor stored.
[[nodiscard]] std::optional<Calibration> stored_calibration(const Database* db, const std::string& name,
                                                            const std::string& db_label);
// validate --calibration: a `dionsim calibrate` file, or (with a database) a stored calibration's
// name; a file wins when both exist. UsageError (naming --calibration) for a name neither stored nor
// a file; InputError for a calibration of another GPU or fabric than the selected runs'.
[[nodiscard]] Calibration calibration_for_runs(const std::string& name_or_path, const Database* db,
                                               const std::string& db_label,
                                               const std::vector<MeasuredConfiguration>& selected);
// whatif --calibration: a stored name, a `dionsim calibrate` file or a kernel-calibration file, as
// the kernel and step calibration whatif applies; `note` hears the parameters whatif does not use.
// `ns_variant` ("gram", "gram+triton"): the NS variant whatif runs; a calibration's parameters of
// that variant ("…@gram+triton") replace the plain ones, other variants' are not used.
[[nodiscard]] sim::KernelCalibration load_whatif_calibration(const std::string& path, const sim::Hardware& hw,
                                                             const Database* db, const std::string& db_label,
                                                             const Note& note, const std::string& ns_variant = "");
// The `dionsim calibrate` calibration behind a whatif --calibration value (a stored name or a
// calibrate file, with its covariance and model-form error, for the intervals); nullopt for a
// kernel-calibration file or no value.
[[nodiscard]] std::optional<Calibration> fitted_calibration(const std::string& path, const Database* db,
                                                            const std::string& db_label);
// whatif --db: the database's measured bf16 GEMMs of this GPU replace the preset's anchors.
void use_db_gemms(const Database& db, sim::KernelCalibration& cal, const std::string& db_label, const Note& note);

// deferral --norms replay:DB: loads the newest recorded gradient row statistics of DB into the
// stream (IoError exit 4 for a bad file, InputError exit 3 when DB has none) and returns the
// identity of what is replayed ({"run_id", "config_hash"}) for the run's configuration.
nlohmann::json load_replay(opt::NormStream& stream);

}  // namespace dionsim::analysis
