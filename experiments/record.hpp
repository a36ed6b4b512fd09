#pragma once
// Recording a subcommand's run in the results database (--db FILE): the glue every subcommand
// shares — open the file before any work (a bad file stops the run with exit 4 before anything is
// computed), skip a configuration already stored unless --force (a sweep re-run resumes), and
// store a run in one transaction, replacing the stored one under --force. See docs/database.md.
//
//   Recorder rec(cmd.common(), "plan");                 // opens --db now, if given
//   if (rec.skip(config)) return 0;                     // stored already, no --force
//   auto run = rec.begin(config);                       // provenance, start time
//   run.metrics.push_back({...});
//   rec.store(run);
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analysis/calibration/fit_calibration.hpp"
#include "analysis/records/records.hpp"  // the records the subcommands store
#include "analysis/store/store.hpp"
#include "experiments/cli.hpp"
#include "sim/collective_table.hpp"

namespace dionsim::cli {

class Recorder {
 public:
  // Opens common.db (created or migrated) when it is given; IoError (exit 4) when it is refused.
  Recorder(const CommonOptions& common, std::string kind);

  [[nodiscard]] bool enabled() const { return db_.has_value(); }
  // True (and logs why) when --db holds an ok run of this kind and configuration and --force is
  // not given: the caller skips the work. False without --db.
  [[nodiscard]] bool skip(const nlohmann::json& config) const;
  // The revision note of a stored run --db skips: ", stored by dionsim X (this is Y) with that
  // version's numbers" when another dionsim stored it, "" when this one did.
  [[nodiscard]] static std::string other_revision_note(const std::string& stored_revision);
  // Whether a stored run's git revision is another dionsim's than this one.
  [[nodiscard]] static bool other_revision(const std::string& stored_revision);
  // A record of this kind started now; seed = --seed.
  [[nodiscard]] analysis::RunRecord begin(const nlohmann::json& config,
                                          analysis::RunMode mode = analysis::RunMode::simulated) const;
  // Stores the record (one transaction; --force replaces the stored runs of that configuration).
  // Returns the run id; no-op returning 0 without --db.
  std::int64_t store(const analysis::RunRecord& record);
  [[nodiscard]] analysis::Database* database() { return db_ ? &*db_ : nullptr; }

 private:
  const CommonOptions& common_;
  std::string kind_;
  std::optional<analysis::Database> db_;
};

// ---- storing what a subcommand made (the records themselves: analysis/records/records.hpp) -----

// collective: one run per size (configuration with size_bytes): the collectives row and the message
// count. No-op without --db.
void record_collective(Recorder& recorder, const nlohmann::json& run_config, const sim::CollectiveSpec& spec,
                       const sim::CollectiveRow& row, const sim::CollectiveResult& r, int ranks, std::int64_t nodes);

// measure --db: stores one `measure` run (mode measured) of `out` (what --json prints): the
// collective rows, or the step's metrics, per-step times, per kernel class and per collective
// times; --force replaces a stored run of the same configuration. No-op without --db.
void store_measure(const CommonOptions& common, nlohmann::json config, const nlohmann::json& out);

// calibrate: stores the calibration under `name` in db (when given; replacing one of that name)
// and writes it to `out` (when not empty), logging each.
void save_calibration(const CommonOptions& common, analysis::Database* db, const analysis::Calibration& calibration,
                      const std::string& name, const std::vector<std::string>& sources, const std::string& out);

}  // namespace dionsim::cli
