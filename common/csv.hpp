#pragma once
// The one CSV reader and writer (RFC 4180): every CSV dionsim reads (measurements, anchors, the
// published nccl-tests rows) and writes goes through here, so that a quoted field means the same
// thing in every file and an error names the file and line.
#include <string>
#include <string_view>
#include <vector>

namespace dionsim {

// One record and the line it starts on (1-based; a quoted field may span lines).
struct CsvRecord {
  std::vector<std::string> fields;
  int line = 0;
};

// RFC 4180 records: commas, double-quoted fields with "" escapes, embedded commas and newlines;
// CRLF, LF or CR line ends; a leading UTF-8 BOM is skipped. A quote opens a quoted field only at
// the start of a field (after spaces or tabs, which are dropped); elsewhere it is a literal
// character. Unquoted fields are not trimmed. An unterminated quote is an InputError naming
// "SOURCE:LINE" of the opening quote. An empty line is a record with one empty field.
[[nodiscard]] std::vector<CsvRecord> parse_csv(std::string_view text, const std::string& source);

// True for a record from an empty (or whitespace-only) line.
[[nodiscard]] bool is_blank(const CsvRecord& record);

// One field as written in a CSV: as it is, unless it holds a comma, a double quote, CR or LF or
// starts/ends with a space or tab; then in double quotes with each " doubled (RFC 4180 §2.6/2.7).
[[nodiscard]] std::string csv_field(std::string_view value);

// The fields joined by commas, each through csv_field; no line end.
[[nodiscard]] std::string csv_row(const std::vector<std::string>& fields);

}  // namespace dionsim
