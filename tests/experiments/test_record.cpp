// `--db` through the binary: each subcommand records its run, a second invocation skips the stored
// configuration, --force replaces it, and a file that is not a dionsim database is refused.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/store/store.hpp"

namespace fs = std::filesystem;
using namespace dionsim::analysis;

namespace {

struct Result {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};

// Runs build/dionsim with `args` (shell words), capturing stdout and stderr in a file.
Result run_dionsim(const std::string& args) {
  const fs::path log = fs::temp_directory_path() / ("dionsim_record_test_" + std::to_string(::getpid()) + ".log");
  const int status = std::system((std::string(DIONSIM_EXE) + " " + args + " > " + log.string() + " 2>&1").c_str());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  fs::remove(log);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text.str()};
}

fs::path fresh_db(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("dionsim_record_" + std::to_string(::getpid()) + "_" + name);
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(p.string() + suffix);
  return p;
}

std::vector<StoredRun> runs_of(const fs::path& db, const std::string& kind) {
  return Database::open(db.string(), Access::read_only).find_runs({.kind = kind});
}

const std::string kCase = std::string(DIONSIM_SHARED_DIR) + "/fixtures/numerics/d2_capped_w2_pool";

}  // namespace

TEST_CASE("plan --db records one run with totals and per-group metrics, resume and --force", "[record]") {
  const fs::path db = fresh_db("plan.db");
  const std::string args =
      "plan --model seed-5120x8 --world 16 --scope global_capped --fraction 0.25 -q --db " + db.string();
  Result r = run_dionsim(args);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("a2a_payload_bytes 205127680") != std::string::npos);
  auto runs = runs_of(db, "plan");
  REQUIRE(runs.size() == 1);
  const StoredRun run = Database::open(db.string(), Access::read_only).load_run(runs[0].id);
  CHECK(run.record.mode == RunMode::simulated);
  CHECK(run.record.config.at("model") == "seed-5120x8");
  CHECK(run.record.config.at("plan").at("world") == 16);
  CHECK(run.record.config.at("plan").at("scope") == "global_capped");
  bool payload = false;
  int group_rows = 0;
  for (const auto& m : run.record.metrics) {
    if (m.name == "a2a_payload_bytes") {
      payload = true;
      CHECK(m.value == 205127680.0);
      CHECK(m.unit == "bytes");
    }
    if (m.name == "group_a2a_bytes") {
      ++group_rows;
      CHECK(m.labels.contains("rows"));
      CHECK(m.labels.contains("cols"));
    }
  }
  CHECK(payload);
  CHECK(group_rows >= 2);  // seed-5120x8 has several shape groups

  // Resume: the same configuration is skipped (nothing printed, no second run).
  r = run_dionsim(args.substr(0, args.find(" -q")) + " --db " + db.string());
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("skipped") != std::string::npos);
  CHECK(r.output.find("a2a_payload_bytes 205127680") == std::string::npos);
  CHECK(runs_of(db, "plan").size() == 1);
  // Another configuration is a new run.
  REQUIRE(run_dionsim("plan --model seed-5120x8 --world 32 --scope global_capped -q --db " + db.string()).exit_code ==
          0);
  CHECK(runs_of(db, "plan").size() == 2);
  // --force replaces the stored run of that configuration (a new id, the old one gone).
  REQUIRE(run_dionsim(args + " --force").exit_code == 0);
  runs = runs_of(db, "plan");
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].id != run.id);
  CHECK(runs[1].id != run.id);
}

TEST_CASE("collective --db records one run per size, so a sweep resumes size by size", "[record]") {
  const fs::path db = fresh_db("collective.db");
  const std::string base =
      "collective --op alltoall --nodes 2 --gpus-per-node 8 --fabric h200-ndr400 -q --db " + db.string();
  REQUIRE(run_dionsim(base + " -b 1M -e 4M -f 2").exit_code == 0);
  auto runs = runs_of(db, "collective");
  REQUIRE(runs.size() == 3);
  const auto first = Database::open(db.string(), Access::read_only).load_run(runs[0].id);
  REQUIRE(first.record.collectives.size() == 1);
  const CollectiveRow& row = first.record.collectives[0];
  CHECK(row.op == "alltoall");
  CHECK(row.bytes == 1 << 20);
  CHECK(row.world == 16);
  CHECK(row.nodes == 2);
  CHECK(row.time_us > 0);
  CHECK(row.busbw_GBps == Approx(row.algbw_GBps * 15.0 / 16.0));
  CHECK(first.record.config.at("size_bytes") == 1 << 20);
  // A wider sweep: the three stored sizes are skipped, only 8M and 16M are simulated and printed.
  const Result r = run_dionsim(base + " -b 1M -e 16M -f 2 --json");
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("\"size_bytes\": 8388608") != std::string::npos);
  CHECK(r.output.find("\"size_bytes\": 1048576") == std::string::npos);
  CHECK(runs_of(db, "collective").size() == 5);
  REQUIRE(run_dionsim(base + " --bytes 2M --force").exit_code == 0);
  runs = runs_of(db, "collective");
  CHECK(runs.size() == 5);
  CHECK(runs.back().record.config.at("size_bytes") == 2 << 20);  // replaced: now the newest run
}

TEST_CASE("a run another dionsim revision stored in --db is named, and still skipped", "[record]") {
  const fs::path db = fresh_db("revision.db");
  const std::string args =
      "collective --op alltoall --nodes 2 --gpus-per-node 8 --fabric h200-ndr400 --bytes 1M --db " + db.string();
  REQUIRE(run_dionsim(args + " -q").exit_code == 0);
  const Result same = run_dionsim(args);
  CHECK(same.output.find("skipped") != std::string::npos);
  CHECK(same.output.find("stored by dionsim") == std::string::npos);  // this revision's own run
  // The same configuration as an older dionsim would have stored it.
  {
    auto file = Database::open(db.string());
    auto record = file.load_run(runs_of(db, "collective").at(0).id).record;
    record.git_revision = "0123abc";
    file.store(record, OnExisting::replace);
  }
  const Result older = run_dionsim(args);
  REQUIRE(older.exit_code == 0);
  CHECK(older.output.find("stored by dionsim 0123abc") != std::string::npos);
  CHECK(older.output.find("with that version's numbers: skipped (--force re-runs it)") != std::string::npos);
  CHECK(runs_of(db, "collective").size() == 1);
}

TEST_CASE("step --db records the case config and the per-rank deferral counters", "[record]") {
  const fs::path db = fresh_db("step.db");
  const fs::path out = fs::temp_directory_path() / ("dionsim_record_step_out_" + std::to_string(::getpid()));
  const std::string args = "step " + kCase + " --out " + out.string() + " -q --db " + db.string();
  REQUIRE(run_dionsim(args).exit_code == 0);
  auto runs = runs_of(db, "step");
  REQUIRE(runs.size() == 1);
  const auto run = Database::open(db.string(), Access::read_only).load_run(runs[0].id);
  CHECK(run.record.config.at("case").at("world") == 2);
  CHECK(run.record.config.at("case").at("scope") == "global_capped");
  CHECK(run.record.config.at("inputs_sha256").get<std::string>().size() == 64);
  // 2 ranks x 3 steps; the fixture's total: 96 winners, none deferred (cli:step_fixture_capped).
  REQUIRE(run.record.deferral.size() == 6);
  std::int64_t winners = 0, deferred = 0;
  for (const auto& d : run.record.deferral) {
    CHECK(d.trial == 0);
    winners += d.winner_rows;
    deferred += d.deferred_rows;
  }
  CHECK(winners == 96);
  CHECK(deferred == 0);
  const Result again = run_dionsim("step " + kCase + " --out " + out.string() + " --db " + db.string());  // not -q
  REQUIRE(again.exit_code == 0);
  CHECK(again.output.find("skipped") != std::string::npos);
  CHECK(runs_of(db, "step").size() == 1);
  REQUIRE(run_dionsim(args + " --force").exit_code == 0);
  runs = runs_of(db, "step");
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].id != run.id);
  fs::remove_all(out);
}

TEST_CASE("a --db that is not a dionsim database stops every subcommand with exit 4, file unchanged", "[record]") {
  const fs::path db = fresh_db("notes.db");
  { std::ofstream(db) << "step_wall_ms,812\n"; }
  const auto size = fs::file_size(db);
  for (const std::string& args : std::vector<std::string>{
           "plan --model gpt-128x2 --world 4",
           "collective --op allgather --nodes 1 --gpus-per-node 8 --fabric h200-ndr400 --bytes 1M",
           "step " + kCase + " --out " + (fs::temp_directory_path() / "dionsim_record_never").string()}) {
    const Result r = run_dionsim(args + " --db " + db.string());
    CHECK(r.exit_code == 4);
    CHECK(r.output.find("file header") != std::string::npos);
  }
  CHECK(fs::file_size(db) == size);
  CHECK_FALSE(fs::exists(fs::temp_directory_path() / "dionsim_record_never"));
}

TEST_CASE("step --db records gradient row statistics that deferral --norms replay:DB replays", "[record][replay]") {
  const fs::path db = fresh_db("replay.db");
  const fs::path out = fs::temp_directory_path() / ("dionsim_record_replay_out_" + std::to_string(::getpid()));
  REQUIRE(run_dionsim("step " + kCase + " --out " + out.string() + " -q --db " + db.string()).exit_code == 0);
  {
    const auto store = Database::open(db.string(), Access::read_only);
    const auto rows = store.gradient_row_stats();
    REQUIRE(rows.size() == 6);  // 3 steps x one 32x48 group x 2 rank shards of 16 rows x 4 matrices
    for (const auto& g : rows) {
      CHECK(g.rows == 32);
      CHECK(g.cols == 48);
      CHECK(g.world == 2);
      CHECK(g.row_count == 64);
      CHECK(g.mean_l1 > 0);
      CHECK(g.quantiles.size() == 33);
    }
  }
  const std::string deferral = "deferral --model gpt-128x2 --world 4 --steps 3 --json -q --norms replay:" + db.string();
  Result r = run_dionsim(deferral);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("\"deferred_fraction\"") != std::string::npos);
  CHECK(r.output.find("replay:" + db.string()) != std::string::npos);
  // Recorded into the same file: the configuration names the replayed run.
  r = run_dionsim(deferral + " --db " + db.string());
  REQUIRE(r.exit_code == 0);
  const auto runs = runs_of(db, "deferral");
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].record.config.at("replayed").at("run_id") == runs_of(db, "step").at(0).id);
  fs::remove_all(out);
}

TEST_CASE("replay:DB without gradient row statistics or without a database is refused", "[record][replay]") {
  const fs::path db = fresh_db("noreplay.db");
  REQUIRE(run_dionsim("plan --model gpt-128x2 --world 4 -q --db " + db.string()).exit_code == 0);
  Result r = run_dionsim("deferral --model gpt-128x2 --world 4 --steps 2 --norms replay:" + db.string());
  CHECK(r.exit_code == 3);
  CHECK(r.output.find("gradient row statistics: got 'none'") != std::string::npos);
  r = run_dionsim("deferral --model gpt-128x2 --world 4 --steps 2 --norms replay:/no_such_dir/x.db");
  CHECK(r.exit_code == 4);
}
