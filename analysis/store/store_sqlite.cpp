#include "analysis/store/store_sqlite.hpp"

#include <sqlite3.h>

#include <utility>

#include "common/error.hpp"

namespace dionsim::analysis::sqlite {

Connection::Connection(std::string path, int flags) : path_(std::move(path)) {
  const int rc = sqlite3_open_v2(path_.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    const std::string message = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw IoError(path_ + ": cannot open: " + message +
                  ((flags & SQLITE_OPEN_CREATE) != 0 ? ", expected a path in an existing, writable folder" : ""));
  }
  sqlite3_extended_result_codes(db_, 1);
}

Connection::~Connection() {
  // close_v2 defers the close until every statement is finalized; ours are RAII so none remain.
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

Connection::Connection(Connection&& other) noexcept
    : path_(std::move(other.path_)), db_(std::exchange(other.db_, nullptr)) {}

Connection& Connection::operator=(Connection&& other) noexcept {
  if (this != &other) {
    if (db_ != nullptr) sqlite3_close_v2(db_);
    path_ = std::move(other.path_);
    db_ = std::exchange(other.db_, nullptr);
  }
  return *this;
}

namespace {

// Appends what a damaged or busy database means for the user and throws the matching error:
// BusyError (callers may retry) for BUSY/LOCKED, IoError otherwise.
[[noreturn]] void throw_classified(std::string message, int rc) {
  const int primary = rc & 0xff;
  if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB) {
    message.append(" (the file is damaged or not a database; expected an intact dionsim results database)");
  } else if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
    message.append(" (another process held the database longer than the busy timeout)");
    throw BusyError(message);
  }
  throw IoError(message);
}

}  // namespace

void Connection::fail(std::string_view what, int rc) const {
  std::string message = path_;
  message.append(": ").append(what).append(": ");
  const char* detail = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  message.append(detail != nullptr ? detail : "unknown SQLite error");
  throw_classified(std::move(message), rc);
}

void Connection::exec(std::string_view sql) const {
  const std::string text(sql);
  char* error = nullptr;
  const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    std::string detail = error != nullptr ? error : sqlite3_errstr(rc);
    sqlite3_free(error);
    throw_classified(path_ + ": " + detail + " (in: " + text.substr(0, 80) + ")", rc);
  }
}

std::int64_t Connection::query_int(std::string_view sql) const {
  Statement statement(*this, sql);
  return statement.step() ? statement.column_int(0) : 0;
}

std::optional<std::string> Connection::query_text(std::string_view sql) const {
  Statement statement(*this, sql);
  if (!statement.step() || statement.is_null(0)) return std::nullopt;
  return statement.column_text(0);
}

Statement::Statement(const Connection& connection, std::string_view sql) : connection_(&connection), sql_(sql) {
  const int rc = sqlite3_prepare_v2(connection.handle(), sql_.data(), static_cast<int>(sql_.size()), &stmt_, nullptr);
  if (rc != SQLITE_OK) {
    std::string what = "cannot prepare '";
    what.append(sql_, 0, 60).append("'");
    connection.fail(what, rc);
  }
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int index, std::int64_t value) {
  const int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK) connection_->fail("bind", rc);
  return *this;
}

Statement& Statement::bind(int index, double value) {
  const int rc = sqlite3_bind_double(stmt_, index, value);
  if (rc != SQLITE_OK) connection_->fail("bind", rc);
  return *this;
}

Statement& Statement::bind(int index, std::string_view value) {
  const int rc = sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) connection_->fail("bind", rc);
  return *this;
}

Statement& Statement::bind(int index, std::nullopt_t) {
  const int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK) connection_->fail("bind", rc);
  return *this;
}

Statement& Statement::bind(int index, const std::optional<std::int64_t>& value) {
  return value ? bind(index, *value) : bind(index, std::nullopt);
}

Statement& Statement::bind(int index, const std::optional<std::string>& value) {
  return value ? bind(index, std::string_view(*value)) : bind(index, std::nullopt);
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  // (append, not "'" + string&&: GCC 12 -O2 misreports the latter under -Wrestrict)
  std::string what = "'";
  what.append(sql_, 0, 60).append("'");
  connection_->fail(what, rc);
}

void Statement::run() {
  while (step()) {
  }
  reset();
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Statement::is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

std::int64_t Statement::column_int(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::column_double(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::column_text(int column) const {
  const auto* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
}

std::optional<std::int64_t> Statement::column_optional_int(int column) const {
  if (is_null(column)) return std::nullopt;
  return column_int(column);
}

Transaction::Transaction(const Connection& connection) : connection_(&connection) {
  connection.exec("BEGIN IMMEDIATE");
  open_ = true;
}

Transaction::~Transaction() {
  if (open_) {
    // Best effort: a failed ROLLBACK (e.g. the statement already rolled back) must not throw here.
    sqlite3_exec(connection_->handle(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

void Transaction::commit() {
  connection_->exec("COMMIT");
  open_ = false;
}

}  // namespace dionsim::analysis::sqlite
