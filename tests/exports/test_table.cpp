// common/table: one table of named columns rendered as JSON, CSV (RFC 4180) and text; the --csv
// of every subcommand is its --json through tables_from_json.
#include <bit>
#include <catch2/catch.hpp>
#include <charconv>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/csv.hpp"
#include "common/table.hpp"

using namespace dionsim;
using nlohmann::json;

namespace {

double read_double(const std::string& text) {
  double v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  REQUIRE(r.ec == std::errc());
  REQUIRE(r.ptr == text.data() + text.size());
  return v;
}

}  // namespace

TEST_CASE("tables_from_json: an array of objects is one table, and nested objects flatten, arrays are JSON text", "[table]") {
  const json rows = json::parse(R"([{"b": 1, "fabric": {"nic_GBps": 50, "name": "x"}, "list": [1, 2]},
                                    {"b": 2, "extra": "only here"}])");
  const auto tables = tables_from_json(rows);
  REQUIRE(tables.size() == 1);
  const Table& t = tables[0];
  CHECK(t.columns == std::vector<std::string>{"b", "fabric.name", "fabric.nic_GBps", "list", "extra"});
  REQUIRE(t.rows.size() == 2);
  CHECK(t.rows[0][3] == "[1,2]");
  CHECK(t.rows[0][4].is_null());  // a column first seen in a later row is empty before it
  CHECK(t.rows[1][1].is_null());
  CHECK(to_csv(tables) == "b,fabric.name,fabric.nic_GBps,list,extra\n1,x,50,\"[1,2]\",\n2,,,,only here\n");
  // The flat objects of to_json hold the same cells.
  CHECK(t.to_json()[1] == json::parse(R"({"b": 2, "extra": "only here", "fabric.name": null, "fabric.nic_GBps": null, "list": null})"));
}

TEST_CASE("tables_from_json: an object's arrays of objects are tables, its scalars columns of every row", "[table]") {
  const json result = json::parse(R"({"skipped": 3, "rows": [{"x": 1}, {"x": 2}], "regimes": [{"regime": "latency", "rows": 5}]})");
  const auto tables = tables_from_json(result);
  REQUIRE(tables.size() == 2);
  CHECK(tables[0].name == "regimes");  // nlohmann's object is ordered by key
  CHECK(tables[1].name == "rows");
  // Stacked: a first column names the table; the union of the columns, empty where a table has none.
  CHECK(to_csv(tables) == "table,regime,rows,skipped,x\nregimes,latency,5,3,\nrows,,,3,1\nrows,,,3,2\n");
  // An object without such a member is one row; a scalar a column "value".
  CHECK(to_csv(tables_from_json(json{{"a", 1}, {"b", {{"c", true}}}})) == "a,b.c\n1,true\n");
  CHECK(to_csv(tables_from_json(json(2.5))) == "value\n2.5\n");
  CHECK(to_csv(tables_from_json(json::array())).empty());
}

TEST_CASE("csv_cell: RFC 4180 quoting and doubles that read back bit for bit", "[table]") {
  CHECK(csv_cell(json()) == "");
  CHECK(csv_cell("plain") == "plain");
  CHECK(csv_cell("a,b") == "\"a,b\"");
  CHECK(csv_cell("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(csv_cell("two\nlines") == "\"two\nlines\"");
  CHECK(csv_cell(" edge") == "\" edge\"");
  CHECK(csv_cell(true) == "true");
  CHECK(csv_cell(std::numeric_limits<std::int64_t>::min()) == "-9223372036854775808");
  CHECK(csv_cell(std::numeric_limits<std::uint64_t>::max()) == "18446744073709551615");
  CHECK(csv_cell(0.1) == "0.1");
  CHECK(csv_cell(340787200.0) == "340787200");
  const std::vector<double> awkward{0.1 + 0.2, 1.0 / 3.0, 6.02214076e23, 1e-15, 5e-324, 1.7976931348623157e308,
                                    -0.0, 578.108648, std::nextafter(1.0, 2.0), 2.5e-7};
  json rows = json::array();
  for (const double v : awkward) rows.push_back({{"v", v}, {"label", "x,\"y\"\nz"}});
  const auto records = parse_csv(to_csv(tables_from_json(rows)), "t.csv");
  REQUIRE(records.size() == awkward.size() + 1);
  for (std::size_t i = 0; i < awkward.size(); ++i) {
    CHECK(records[i + 1].fields[0] == "x,\"y\"\nz");
    CHECK(std::bit_cast<std::uint64_t>(read_double(records[i + 1].fields[1])) == std::bit_cast<std::uint64_t>(awkward[i]));
  }
}

TEST_CASE("to_text: aligned columns, chosen columns, null as -", "[table]") {
  Table t;
  t.add_row({{"name", "local"}, {"ms", 1.23456789}, {"n", 8}});
  t.add_row({{"name", "global_capped"}, {"ms", nullptr}, {"n", 1024}});
  // Columns in first-seen order (a JSON object's keys are sorted).
  CHECK(to_text(t) == "     ms     n  name\n1.23457     8  local\n      -  1024  global_capped\n");
  const std::vector<std::string> columns{"n", "name"};
  CHECK(to_text(t, columns, 3) == "   n  name\n   8  local\n1024  global_capped\n");
  CHECK(table_from_map("p", json::parse(R"({"a": {"value": 1, "stderr": 0.5}, "b": {"value": 2}})"), "parameter").columns ==
        std::vector<std::string>{"parameter", "stderr", "value"});
}
