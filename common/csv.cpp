#include "common/csv.hpp"

#include "common/error.hpp"

namespace dionsim {

namespace {

bool only_spaces(std::string_view text) { return text.find_first_not_of(" \t") == std::string_view::npos; }

}  // namespace

std::vector<CsvRecord> parse_csv(std::string_view text, const std::string& source) {
  std::vector<CsvRecord> records;
  CsvRecord current;
  std::string field;
  int line = 1;
  current.line = 1;
  bool quoted = false;
  int quote_line = 0;
  std::size_t i = 0;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // UTF-8 BOM
  const auto end_record = [&] {
    current.fields.push_back(std::move(field));
    field.clear();
    records.push_back(std::move(current));
    current = CsvRecord{};
    current.line = line;
  };
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field.push_back('"');
          ++i;
        } else {
          quoted = false;
        }
      } else {
        if (c == '\n') ++line;
        field.push_back(c);
      }
      continue;
    }
    if (c == '"' && only_spaces(field)) {
      field.clear();
      quoted = true;
      quote_line = line;
    } else if (c == ',') {
      current.fields.push_back(std::move(field));
      field.clear();
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      ++line;
      end_record();
    } else {
      field.push_back(c);
    }
  }
  if (quoted) {
    throw_bad_input(source + ":" + std::to_string(quote_line), "quoted field", field.substr(0, 40),
                    "a closing double quote");
  }
  if (!field.empty() || !current.fields.empty()) end_record();
  return records;
}

bool is_blank(const CsvRecord& record) { return record.fields.size() == 1 && only_spaces(record.fields[0]); }

std::string csv_field(std::string_view value) {
  const bool edge_space = !value.empty() && (value.front() == ' ' || value.front() == '\t' ||
                                             value.back() == ' ' || value.back() == '\t');
  // Edge spaces are quoted because the reader drops spaces before an opening quote only, and
  // other readers trim unquoted fields: quoting keeps them.
  if (value.find_first_of(",\"\r\n") == std::string_view::npos && !edge_space) return std::string(value);
  std::string out = "\"";
  for (const char c : value) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

std::string csv_row(const std::vector<std::string>& fields) {
  std::string out;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out.push_back(',');
    out += csv_field(fields[i]);
  }
  return out;
}

}  // namespace dionsim
