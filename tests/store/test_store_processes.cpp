// Several processes: a writer killed inside its transaction leaves no partial run, and two
// writers at once both succeed. fork() + SIGKILL, as a crashed or cancelled sweep would.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "analysis/store/store.hpp"
#include "store_test_util.hpp"

using namespace dionsim::analysis;
using dionsim::test::RawDb;
using dionsim::test::TempDir;

namespace {

RunRecord small_run(const std::string& kind, int index, int metrics) {
  auto r = RunRecord::begin(kind, RunMode::simulated, {{"index", index}}, static_cast<std::uint64_t>(index));
  for (int i = 0; i < metrics; ++i)
    r.metrics.push_back({.name = "m", .value = static_cast<double>(i), .unit = "ms", .step = i});
  return r;
}

std::uintmax_t size_or_zero(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  return ec ? 0 : size;
}

}  // namespace

TEST_CASE("a writer killed inside its transaction leaves no partial run", "[analysis][store]") {
  const TempDir dir;
  const std::string path = dir.file("killed.db");
  { Database::open(path).store(small_run("whatif", 0, 10)); }  // closing checkpoints: no -wal left
  REQUIRE(size_or_zero(path + "-wal") == 0);

  // The child builds a run of 2 million deferral rows (~40 MB in memory, far more than the page
  // cache) and stores it; SQLite spills uncommitted pages into the WAL long before the commit.
  constexpr std::int64_t kRows = 2'000'000;
  auto big = RunRecord::begin("deferral", RunMode::simulated, {{"big", true}}, 1);
  big.deferral.reserve(kRows);
  for (std::int64_t i = 0; i < kRows; ++i)
    big.deferral.push_back({.trial = 0, .step = i, .rank = i % 64, .winner_rows = 7});

  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    try {
      auto db = Database::open(path);
      db.store(big);
    } catch (...) {
      _exit(1);
    }
    _exit(0);
  }
  // Kill once 4 MB of uncommitted frames are in the WAL: the child is inside its transaction.
  constexpr std::uintmax_t kThreshold = 4u << 20;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (size_or_zero(path + "-wal") < kThreshold && std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(child, &status, WNOHANG) == child) FAIL("the writer finished before it could be killed");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  const std::uintmax_t wal_at_kill = size_or_zero(path + "-wal");
  kill(child, SIGKILL);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGKILL);
  REQUIRE(wal_at_kill >= kThreshold);

  auto db = Database::open(path);
  CHECK(db.find_runs({.include_failed = true}).size() == 1);
  CHECK_FALSE(db.has_run("deferral", config_hash({{"big", true}})));
  {
    RawDb raw(path);
    CHECK(raw.integer("SELECT count(*) FROM runs") == 1);
    CHECK(raw.integer("SELECT count(*) FROM deferral") == 0);
    CHECK(raw.integer("SELECT count(*) FROM metrics") == 10);
    CHECK(raw.text("PRAGMA integrity_check") == "ok");
  }
  // The file is fully usable: the interrupted run can now be stored (a resumed sweep).
  big.deferral.resize(1000);
  db.store(big);
  CHECK(db.has_run("deferral", config_hash({{"big", true}})));
  CHECK(db.load_run(db.find_runs({.kind = "deferral"})[0].id).record.deferral.size() == 1000);
}

TEST_CASE("two processes writing to one new database at once both succeed", "[analysis][store]") {
  const TempDir dir;
  const std::string path = dir.file("shared.db");  // does not exist yet: both create and migrate it
  constexpr int kRunsPerWriter = 40;
  constexpr int kMetricsPerRun = 500;
  int gate[2];
  REQUIRE(pipe(gate) == 0);
  pid_t children[2];
  for (int w = 0; w < 2; ++w) {
    children[w] = fork();
    REQUIRE(children[w] >= 0);
    if (children[w] == 0) {
      close(gate[1]);
      char byte = 0;
      (void)!read(gate[0], &byte, 1);  // returns when the parent closes the pipe: both start together
      try {
        auto db = Database::open(path);
        for (int i = 0; i < kRunsPerWriter; ++i) {
          const auto record = small_run(w == 0 ? "whatif" : "deferral", i, kMetricsPerRun);
          if (db.has_run(record.kind, config_hash(record.config))) _exit(3);
          db.store(record);
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "writer %d: %s\n", w, e.what());
        _exit(1);
      }
      _exit(0);
    }
  }
  close(gate[0]);
  close(gate[1]);
  for (const pid_t child : children) {
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  auto db = Database::open(path);
  CHECK(db.find_runs({.kind = "whatif"}).size() == kRunsPerWriter);
  CHECK(db.find_runs({.kind = "deferral"}).size() == kRunsPerWriter);
  RawDb raw(path);
  CHECK(raw.integer("SELECT count(*) FROM metrics") == 2 * kRunsPerWriter * kMetricsPerRun);
  // Every run has all its rows: no interleaving lost or mixed any.
  CHECK(raw.integer("SELECT count(*) FROM (SELECT run_id FROM metrics GROUP BY run_id HAVING count(*) <> " +
                    std::to_string(kMetricsPerRun) + ")") == 0);
  CHECK(raw.text("PRAGMA integrity_check") == "ok");
}

TEST_CASE("two identical sweeps started at once store one run per configuration", "[analysis][store]") {
  // Issue 18: both pass the "already stored?" look before either stores; OnExisting::skip repeats
  // that check inside the write transaction, so exactly one run per configuration is stored.
  const TempDir dir;
  const std::string path = dir.file("same.db");
  constexpr int kRuns = 30;
  int gate[2];
  REQUIRE(pipe(gate) == 0);
  pid_t children[2];
  for (int w = 0; w < 2; ++w) {
    children[w] = fork();
    REQUIRE(children[w] >= 0);
    if (children[w] == 0) {
      close(gate[1]);
      char byte = 0;
      (void)!read(gate[0], &byte, 1);
      try {
        auto db = Database::open(path);
        for (int i = 0; i < kRuns; ++i) (void)db.store(small_run("whatif", i, 200), OnExisting::skip);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "writer %d: %s\n", w, e.what());
        _exit(1);
      }
      _exit(0);
    }
  }
  close(gate[0]);
  close(gate[1]);
  for (const pid_t child : children) {
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  auto db = Database::open(path);
  CHECK(db.find_runs({.kind = "whatif"}).size() == kRuns);
  CHECK(db.store(small_run("whatif", 0, 1), OnExisting::skip) == 0);  // stored already: nothing added
  CHECK(db.find_runs({.kind = "whatif"}).size() == kRuns);
}
