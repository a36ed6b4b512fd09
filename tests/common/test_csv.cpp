// The one CSV reader and writer (common/csv.hpp): RFC 4180 quoting both ways, file:line in errors.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/csv.hpp"
#include "common/error.hpp"

using namespace dionsim;

TEST_CASE("CSV records: quotes, escaped quotes, embedded commas and newlines, CRLF", "[csv]") {
  const auto r = parse_csv("a,\"b,c\",\"say \"\"hi\"\"\"\r\nx,\"multi\nline\",z\nlast,,\n", "t.csv");
  REQUIRE(r.size() == 3);
  CHECK(r[0].fields == std::vector<std::string>{"a", "b,c", "say \"hi\""});
  CHECK(r[1].fields == std::vector<std::string>{"x", "multi\nline", "z"});
  CHECK(r[1].line == 2);
  CHECK(r[2].line == 4);
  CHECK(r[2].fields == std::vector<std::string>{"last", "", ""});
  CHECK_THROWS_WITH(parse_csv("a,\"open\n", "t.csv"),
                    Catch::Contains("t.csv:1: quoted field") && Catch::Contains("closing double quote"));
}

TEST_CASE("CSV records: BOM, lone CR, blank lines, quotes inside a field, no final newline", "[csv]") {
  const auto r = parse_csv("\xEF\xBB\xBFh1,h2\r\r\n  \"q\" ,x\ny\"z,\"\"\nend", "u.csv");
  REQUIRE(r.size() == 5);
  CHECK(r[0].fields == std::vector<std::string>{"h1", "h2"});
  CHECK(is_blank(r[1]));  // the CR ends line 1, the CRLF ends the empty line 2
  CHECK(r[1].line == 2);
  // Spaces before an opening quote are dropped; what follows the closing quote is kept as written.
  CHECK(r[2].fields == std::vector<std::string>{"q ", "x"});
  CHECK(r[2].line == 3);
  // A quote inside an unquoted field is a character; "" alone is an empty field.
  CHECK(r[3].fields == std::vector<std::string>{"y\"z", ""});
  CHECK(r[4].fields == std::vector<std::string>{"end"});
  CHECK(r[4].line == 5);
  CHECK(parse_csv("", "e.csv").empty());
  CHECK_FALSE(is_blank(parse_csv(",\n", "e.csv")[0]));
  // The opening quote's line is named, not the end of the file.
  CHECK_THROWS_WITH(parse_csv("a\nb\nc,\"x\ny\nz", "v.csv"), Catch::Contains("v.csv:3: quoted field"));
}

TEST_CASE("CSV writer: quotes exactly the fields that need it, and reads back", "[csv]") {
  CHECK(csv_field("plain") == "plain");
  CHECK(csv_field("") == "");
  CHECK(csv_field("1e-3") == "1e-3");
  CHECK(csv_field("a,b") == "\"a,b\"");
  CHECK(csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(csv_field("two\nlines") == "\"two\nlines\"");
  CHECK(csv_field("cr\r") == "\"cr\r\"");
  CHECK(csv_field(" lead") == "\" lead\"");
  CHECK(csv_field("trail\t") == "\"trail\t\"");
  CHECK(csv_row({"a", "b,c", "", "d\"e"}) == "a,\"b,c\",,\"d\"\"e\"");
  CHECK(csv_row({}) == "");

  const std::vector<std::vector<std::string>> rows = {
      {"source", "notes"}, {"x", "torch.matmul, mean of 50"}, {" padded ", "\"quoted\"\r\nand more"}, {"", ","}};
  std::string text;
  for (const auto& row : rows) text += csv_row(row) + "\r\n";
  const auto back = parse_csv(text, "round.csv");
  REQUIRE(back.size() == rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) CHECK(back[i].fields == rows[i]);
  CHECK(back[3].line == 5);  // the CRLF inside row 2's quoted field counts as a line
}
