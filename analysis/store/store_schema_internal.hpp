#pragma once
// Private to the store: applying migrations on an open connection.
namespace dionsim::analysis::sqlite {
class Connection;
}

namespace dionsim::analysis::detail {

// Applies migrations (user_version, target_version] in one IMMEDIATE transaction; sets the
// application_id on a new file. Returns the version the file had before. No-op when the file
// is already at or beyond target_version.
int migrate(const sqlite::Connection& connection, int target_version);

}  // namespace dionsim::analysis::detail
