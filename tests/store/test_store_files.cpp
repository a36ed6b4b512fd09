// Files the store must refuse — not SQLite, SQLite of another application, a newer schema, damaged
// — each with a message naming the file and what was expected, exit code 4, and the file unchanged.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "analysis/store/store.hpp"
#include "common/error.hpp"
#include "store_test_util.hpp"

using namespace dionsim::analysis;
using dionsim::test::RawDb;
using dionsim::test::read_bytes;
using dionsim::test::TempDir;
using dionsim::test::write_bytes;

namespace {

// Opens `path` expecting an IoError whose message contains `path` and `expected_text`; returns it.
std::string refused(const std::string& path, const std::string& expected_text) {
  try {
    auto db = Database::open(path);
  } catch (const dionsim::Error& e) {
    CHECK(e.code() == dionsim::ExitCode::io);
    CHECK_THAT(e.what(), Catch::Contains(path));
    CHECK_THAT(e.what(), Catch::Contains(expected_text));
    return e.what();
  }
  FAIL("Database::open accepted " << path);
  return {};
}

// A closed dionsim database holding one run, checkpointed into the main file (no -wal left).
void make_dionsim_db(const std::string& path) {
  auto db = Database::open(path);
  auto r = RunRecord::begin("whatif", RunMode::simulated, {{"nodes", 2}}, 0);
  for (int i = 0; i < 2000; ++i)
    r.metrics.push_back(
        {.name = std::string("m").append(std::to_string(i)), .value = static_cast<double>(i), .unit = "ms"});
  db.store(r);
}

}  // namespace

TEST_CASE("a file that is not SQLite is refused and left as it was", "[analysis][store]") {
  const TempDir dir;
  const std::string path = dir.file("notes.txt");
  const std::string bytes = "step_wall_ms,812.5\nthis is a CSV, not a database\n" + std::string(200, 'x');
  write_bytes(path, bytes);
  const std::string message = refused(path, "expected 'SQLite format 3'");
  CHECK_THAT(message, Catch::Contains("file header: got 'step_wall_ms,812'"));
  CHECK(read_bytes(path) == bytes);
  CHECK_FALSE(std::filesystem::exists(path + "-wal"));
  CHECK_FALSE(std::filesystem::exists(path + "-shm"));

  const std::string tiny = dir.file("tiny.db");
  write_bytes(tiny, "SQLite");
  refused(tiny, "a file of 6 bytes is not an SQLite database");
  CHECK(read_bytes(tiny) == "SQLite");
}

TEST_CASE("an SQLite file of another application is refused and left as it was", "[analysis][store]") {
  const TempDir dir;
  const std::string path = dir.file("other.sqlite");
  {
    RawDb raw(path);
    raw.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers VALUES (1, 'a');");
  }
  const std::string before = read_bytes(path);
  const std::string message = refused(path, "not a dionsim results database");
  CHECK_THAT(message, Catch::Contains("tables: customers"));
  CHECK(read_bytes(path) == before);
  CHECK_FALSE(std::filesystem::exists(path + "-wal"));
  RawDb raw(path);
  CHECK(raw.text("PRAGMA journal_mode") == "delete");  // not switched to WAL

  // Even one with our user_version but no dionsim application_id.
  const std::string lookalike = dir.file("lookalike.db");
  {
    RawDb other(lookalike);
    other.exec("PRAGMA user_version = 1; CREATE TABLE runs (id INTEGER);");
  }
  const std::string lookalike_before = read_bytes(lookalike);
  refused(lookalike, "0x00000000, tables: runs");
  CHECK(read_bytes(lookalike) == lookalike_before);
}

TEST_CASE("a dionsim file from a newer schema is refused and left as it was", "[analysis][store]") {
  const TempDir dir;
  const std::string path = dir.file("future.db");
  make_dionsim_db(path);
  {
    RawDb raw(path);
    raw.exec("PRAGMA user_version = " + std::to_string(latest_schema_version() + 1) +
             "; PRAGMA wal_checkpoint(TRUNCATE);");
  }
  const std::string before = read_bytes(path);
  const std::string message = refused(path, "written by a newer dionsim");
  CHECK_THAT(message, Catch::Contains("schema version (PRAGMA user_version): got '" +
                                      std::to_string(latest_schema_version() + 1) + "', expected at most " +
                                      std::to_string(latest_schema_version())));
  CHECK(read_bytes(path) == before);
  CHECK_THROWS_AS(Database::open(path, Access::read_only), dionsim::IoError);
  CHECK(read_bytes(path) == before);
}

TEST_CASE("a damaged dionsim file is refused and left as it was", "[analysis][store]") {
  const TempDir dir;
  const std::string path = dir.file("damaged.db");
  make_dionsim_db(path);
  std::string bytes = read_bytes(path);
  REQUIRE(bytes.size() > 4 * 4096);
  SECTION("garbage over the pages after the header page") {
    for (std::size_t i = 4096; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 131) & 0xff);
    write_bytes(path, bytes);
    refused(path, "expected an intact dionsim results database");
    CHECK(read_bytes(path) == bytes);
  }
  SECTION("the file cut short") {
    bytes.resize(4096 + 100);
    write_bytes(path, bytes);
    refused(path, "expected an intact dionsim results database");
    CHECK(read_bytes(path) == bytes);
  }
  SECTION("one damaged page in the middle (found by the integrity check)") {
    const std::size_t page = bytes.size() / 4096 / 2;
    for (std::size_t i = page * 4096; i < (page + 1) * 4096; ++i) bytes[i] = static_cast<char>(0xff);
    write_bytes(path, bytes);
    refused(path, "the file is damaged (SQLite integrity check");
    CHECK(read_bytes(path) == bytes);
  }
  SECTION("a damaged header page") {
    for (std::size_t i = 100; i < 4096; ++i) bytes[i] = static_cast<char>(0xff);
    write_bytes(path, bytes);
    refused(path, "expected an intact dionsim results database");
    CHECK(read_bytes(path) == bytes);
  }
}

TEST_CASE("a directory or an unreachable path is refused with the path in the message", "[analysis][store]") {
  const TempDir dir;
  const std::string folder = dir.file("a-folder");
  std::filesystem::create_directory(folder);
  refused(folder, "not a regular file");
  refused(dir.file("missing-dir/results.db"), "cannot open");
}
