#pragma once
// The results database's schema as an ordered list of migrations. PRAGMA user_version is the
// number of migrations applied; opening a file applies the missing ones, in order, in one
// transaction. To change the schema, append a migration — never edit a released one.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace dionsim::analysis {

// PRAGMA application_id of every dionsim results database: "DION" in ASCII. It is what tells a
// dionsim database from any other SQLite file.
inline constexpr std::int64_t kApplicationId = 0x44494F4E;

struct Migration {
  int version;               // user_version after this step (1, 2, …)
  std::string_view summary;  // one line for docs and error messages
  std::string_view sql;      // statements run inside the migration transaction
};

// All migrations, in order; migrations()[i].version == i + 1.
[[nodiscard]] std::span<const Migration> migrations();

// The schema version this build writes and reads (= the last migration's version).
[[nodiscard]] int latest_schema_version();

// For tests and tooling: creates `path` (which must not exist or be empty) as a dionsim database
// at exactly schema `version` (1 … latest), as an older dionsim would have left it.
void create_database_at_version(const std::string& path, int version);

}  // namespace dionsim::analysis
