// Issue 18: a database file that is refused is not changed and gets no -wal/-shm beside it.
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "analysis/store/store.hpp"
#include "common/error.hpp"
#include "store_test_util.hpp"

using namespace dionsim::analysis;
using dionsim::test::TempDir;

namespace {

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void sqlite(const std::string& path, const std::string& sql) {
  dionsim::test::RawDb(path).exec(sql);  // closed again here, as another program would
}

std::string quick_check(const std::string& path) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &stmt, nullptr) == SQLITE_OK);
  std::string answer;
  if (sqlite3_step(stmt) == SQLITE_ROW) answer = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return answer;
}

void require_refused_unchanged(const std::string& path, const std::string& message) {
  const std::string before = bytes_of(path);
  CHECK_THROWS_WITH(Database::open(path), Catch::Contains(message));
  CHECK(bytes_of(path) == before);
  CHECK_FALSE(std::filesystem::exists(path + "-wal"));
  CHECK_FALSE(std::filesystem::exists(path + "-shm"));
}

}  // namespace

TEST_CASE("a refused WAL file of another application gets no -wal or -shm", "[analysis][store]") {
  const TempDir dir;
  const std::string path = dir.file("other.db");
  sqlite(path, "PRAGMA journal_mode=WAL; CREATE TABLE other(x); INSERT INTO other VALUES (1);");
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
  require_refused_unchanged(path, "not a dionsim results database");
}

TEST_CASE("dionsim's ids without dionsim's tables are refused and the file is unchanged", "[analysis][store]") {
  const TempDir dir;
  const std::string path = dir.file("ids.db");
  sqlite(path, "PRAGMA application_id=1145655118; PRAGMA user_version=3; CREATE TABLE t(x); DROP TABLE t;");
  require_refused_unchanged(path, "table runs: got 'missing'");
}

TEST_CASE("an index that disagrees with its table is caught by integrity_check before any write", "[analysis][store]") {
  const TempDir dir;
  const std::string path = dir.file("damaged.db");
  { auto db = Database::open(path); }
  // Corrupt the runs index behind SQLite's back: quick_check does not look at index contents.
  sqlite(path, "PRAGMA journal_mode=DELETE; CREATE TABLE z(a, b); INSERT INTO z VALUES (1, 9), (2, 8), (3, 7); "
               "CREATE INDEX zi ON z(a); PRAGMA writable_schema=ON; "
               "UPDATE sqlite_schema SET sql='CREATE INDEX zi ON z(b)' WHERE name='zi'; PRAGMA writable_schema=OFF;");
  // The damage is of the kind quick_check does not see.
  REQUIRE(quick_check(path) == "ok");
  require_refused_unchanged(path, "damaged");
}
