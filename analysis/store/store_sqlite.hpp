#pragma once
// Thin RAII wrappers over the SQLite C API, private to the store (never included by users of
// analysis/store/store.hpp). Every failure becomes an IoError that names the database file.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

#include "common/error.hpp"

namespace dionsim::analysis::sqlite {

// SQLITE_BUSY / SQLITE_LOCKED: another connection holds a lock. Usually the busy timeout absorbs
// it, but SQLite returns BUSY at once in a few deadlock-avoiding cases (e.g. while another
// process switches a new file to WAL); callers that can redo their work retry on this type.
struct BusyError : IoError {
  explicit BusyError(const std::string& m) : IoError(m) {}
};

// One connection. Not copyable; closes on destruction.
class Connection {
 public:
  // flags: SQLITE_OPEN_* bits. Throws IoError naming `path` on failure.
  Connection(std::string path, int flags);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  Connection(Connection&& other) noexcept;
  Connection& operator=(Connection&& other) noexcept;

  [[nodiscard]] sqlite3* handle() const { return db_; }
  [[nodiscard]] const std::string& path() const { return path_; }

  // Runs one or more statements that return no rows we need.
  void exec(std::string_view sql) const;
  // First column of the first row as an integer (0 when there is no row).
  [[nodiscard]] std::int64_t query_int(std::string_view sql) const;
  // First column of the first row as text (nullopt when there is no row or it is NULL).
  [[nodiscard]] std::optional<std::string> query_text(std::string_view sql) const;

  // Throws IoError "<path>: <what>: <sqlite message>" for a non-OK result code.
  [[noreturn]] void fail(std::string_view what, int rc) const;

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

// A prepared statement. bind_* use 1-based indices as SQLite does; column_* 0-based.
class Statement {
 public:
  Statement(const Connection& connection, std::string_view sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view value);
  Statement& bind(int index, std::nullopt_t);
  Statement& bind(int index, const std::optional<std::int64_t>& value);
  Statement& bind(int index, const std::optional<std::string>& value);

  // Advances; true while a row is available.
  bool step();
  // Runs a statement that returns no rows, then resets it for the next bindings.
  void run();
  void reset();

  [[nodiscard]] bool is_null(int column) const;
  [[nodiscard]] std::int64_t column_int(int column) const;
  [[nodiscard]] double column_double(int column) const;
  [[nodiscard]] std::string column_text(int column) const;
  [[nodiscard]] std::optional<std::int64_t> column_optional_int(int column) const;

 private:
  const Connection* connection_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
};

// BEGIN IMMEDIATE … COMMIT; rolls back on destruction unless committed. IMMEDIATE takes the write
// lock up front so that two writers queue on the busy timeout instead of deadlocking on a
// read-to-write upgrade (which SQLite answers with SQLITE_BUSY at once, timeout or not).
class Transaction {
 public:
  explicit Transaction(const Connection& connection);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  const Connection* connection_;
  bool open_ = false;
};

}  // namespace dionsim::analysis::sqlite
