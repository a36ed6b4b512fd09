#pragma once
// A result table as rows of named columns, rendered three ways from the one structure: --json (an
// array of objects), --csv (RFC 4180 quoting, a header line) and a fixed-width text table. A
// subcommand's --csv is its --json result put through tables_from_json, so the two can never name
// or scale a column differently (README "Output formats" gives the rules).
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dionsim {

struct Table {
  std::string name;                               // the JSON member it came from ("" for a bare array)
  std::vector<std::string> columns;               // in first-seen order
  std::vector<std::vector<nlohmann::json>> rows;  // one scalar (or null: an empty cell) per column

  // Appends `object`'s members as one row: nested objects become dotted columns ("fabric.nic_GBps"),
  // arrays their compact JSON text; a column not seen before is added (empty in earlier rows).
  void add_row(const nlohmann::json& object);
  // Index of `column`, or npos.
  [[nodiscard]] std::size_t column(std::string_view wanted) const;
  // The rows as an array of flat objects, nulls kept: what --json prints for a Table.
  [[nodiscard]] nlohmann::json to_json() const;
};

// The scalar leaves of a JSON object as (dotted path, value): nested objects descend ("fabric.nic_GBps"),
// arrays and empty objects are one leaf holding their compact JSON text. What a Table row holds.
[[nodiscard]] std::vector<std::pair<std::string, nlohmann::json>> flatten_object(const nlohmann::json& object);

// The tables of a subcommand's --json result:
//  * an array of objects: one table, one row per object;
//  * an object: one table per member that is an array of objects, named by that member; the
//    object's other members (scalars, flattened objects) are repeated as columns of every row;
//    an object without such a member is a table of one row.
// Anything else (a bare scalar, an array of scalars) is a table of one column "value".
[[nodiscard]] std::vector<Table> tables_from_json(const nlohmann::json& result);

// A JSON object of objects keyed by name ({"fwd_bwd_ms": {"value": …}, …}) as a table named `name`
// with the key in a first column `key_column`.
[[nodiscard]] Table table_from_map(std::string name, const nlohmann::json& map, const std::string& key_column);

// One cell as CSV text: null → empty, a string as it is, true/false, integers in decimal, doubles
// in the shortest form that reads back to the same double (std::to_chars), then RFC 4180 quoting.
[[nodiscard]] std::string csv_cell(const nlohmann::json& value);

// The tables as one CSV document (LF line ends): a header line, then the rows. Several tables are
// stacked with a first column "table" naming each row's table and the union of their columns
// (a cell of a column another table has is empty). No tables or no columns: "".
[[nodiscard]] std::string to_csv(std::span<const Table> tables);

// A fixed-width text table of `columns` (all when empty): strings left-aligned, numbers right-
// aligned with at most `significant` significant digits, null as "-".
[[nodiscard]] std::string to_text(const Table& table, std::span<const std::string> columns = {}, int significant = 6);

}  // namespace dionsim
