#include "experiments/record.hpp"

#include "analysis/records/records.hpp"
#include "common/error.hpp"

namespace dionsim::cli {

Recorder::Recorder(const CommonOptions& common, std::string kind) : common_(common), kind_(std::move(kind)) {
  if (!common_.db.empty()) db_.emplace(analysis::Database::open(common_.db));
}

bool Recorder::skip(const nlohmann::json& config) const {
  if (!db_ || common_.force) return false;
  const auto stored = db_->stored_revision(kind_, analysis::config_hash(config));
  if (!stored) return false;
  log(common_, kind_ + ": configuration already in " + common_.db + other_revision_note(*stored) +
                   ": skipped (--force re-runs it)");
  return true;
}

std::string Recorder::other_revision_note(const std::string& stored_revision) {
  // A run another dionsim stored keeps that version's numbers: said, so an upgrade is not silent.
  if (!other_revision(stored_revision)) return "";
  return ", stored by dionsim " + stored_revision + " (this is " + analysis::git_revision() + ") with that version's numbers";
}

bool Recorder::other_revision(const std::string& stored_revision) { return stored_revision != analysis::git_revision(); }

analysis::RunRecord Recorder::begin(const nlohmann::json& config, analysis::RunMode mode) const {
  return analysis::RunRecord::begin(kind_, mode, config, common_.seed);
}

std::int64_t Recorder::store(const analysis::RunRecord& record) {
  if (!db_) return 0;
  const std::int64_t id =
      db_->store(record, common_.force ? analysis::OnExisting::replace : analysis::OnExisting::skip);
  log(common_, id == 0 ? kind_ + ": an identical run was stored meanwhile in " + common_.db + ", not stored again"
                        : kind_ + ": recorded as run " + std::to_string(id) + " in " + common_.db);
  return id;
}

void record_collective(Recorder& recorder, const nlohmann::json& run_config, const sim::CollectiveSpec& spec,
                       const sim::CollectiveRow& row, const sim::CollectiveResult& r, int ranks, std::int64_t nodes) {
  if (!recorder.enabled()) return;
  auto record = recorder.begin(run_config);
  analysis::add_collective_results(record, spec, row, r, ranks, nodes);
  recorder.store(record);
}

void store_measure(const CommonOptions& common, nlohmann::json config, const nlohmann::json& out) {
  if (common.db.empty()) return;
  auto db = analysis::Database::open(common.db);
  const auto rec = analysis::measure_record(std::move(config), out, common.seed);
  const auto id = db.store(rec, common.force ? analysis::OnExisting::replace : analysis::OnExisting::skip);
  log(common, id == 0 ? "an identical run is already stored in " + common.db + ", not stored again"
                      : "stored run " + std::to_string(id) + " in " + common.db);
}

void save_calibration(const CommonOptions& common, analysis::Database* db, const analysis::Calibration& calibration,
                      const std::string& name, const std::vector<std::string>& sources, const std::string& out) {
  if (db) {
    db->store(analysis::calibration_record(calibration, {{"name", name}, {"sources", sources}}),
              analysis::OnExisting::replace);
    log(common, "stored calibration '" + name + "' in " + common.db);
  }
  if (!out.empty()) {
    analysis::write_calibration(out, calibration);
    log(common, "wrote calibration '" + name + "' to " + out);
  }
}

}  // namespace dionsim::cli
