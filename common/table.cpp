#include "common/table.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "common/csv.hpp"

namespace dionsim {

namespace {

using nlohmann::json;

bool is_object_array(const json& value) {
  return value.is_array() && !value.empty() &&
         std::all_of(value.begin(), value.end(), [](const json& e) { return e.is_object(); });
}

// Every scalar leaf of `value` under `prefix`: objects descend with dotted names; arrays and empty
// objects are one cell holding their compact JSON text (a cell is a scalar).
void flatten(const json& value, const std::string& prefix, std::vector<std::pair<std::string, json>>& out) {
  if (value.is_object() && !value.empty()) {
    for (const auto& [key, member] : value.items()) flatten(member, prefix.empty() ? key : prefix + "." + key, out);
  } else if (value.is_structured()) {
    out.emplace_back(prefix, value.dump());
  } else {
    out.emplace_back(prefix, value);
  }
}

std::string number_text(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string plain_text(const json& v, int significant) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", significant, v.get<double>());
    return buf;
  }
  return v.dump();
}

}  // namespace

std::vector<std::pair<std::string, json>> flatten_object(const json& object) {
  std::vector<std::pair<std::string, json>> cells;
  if (!object.is_object() || !object.empty()) flatten(object, "", cells);
  return cells;
}

void Table::add_row(const json& object) {
  auto cells = flatten_object(object);
  std::vector<json> row(columns.size());
  for (auto& [key, value] : cells) {
    std::size_t i = column(key);
    if (i == std::string::npos) {
      i = columns.size();
      columns.push_back(key);
      for (auto& earlier : rows) earlier.emplace_back();
      row.emplace_back();
    }
    row[i] = std::move(value);
  }
  rows.push_back(std::move(row));
}

std::size_t Table::column(std::string_view wanted) const {
  const auto it = std::find(columns.begin(), columns.end(), wanted);
  return it == columns.end() ? std::string::npos : static_cast<std::size_t>(it - columns.begin());
}

json Table::to_json() const {
  json out = json::array();
  for (const auto& row : rows) {
    json object = json::object();
    for (std::size_t i = 0; i < columns.size(); ++i) object[columns[i]] = i < row.size() ? row[i] : json();
    out.push_back(std::move(object));
  }
  return out;
}

std::vector<Table> tables_from_json(const json& result) {
  if (is_object_array(result) || (result.is_array() && result.empty())) {
    Table t;
    for (const auto& row : result) t.add_row(row);
    return {t};
  }
  if (!result.is_object()) {
    Table t;
    t.add_row(json{{"value", result}});
    return {t};
  }
  json context = json::object();
  std::vector<std::string> members;
  for (const auto& [key, value] : result.items()) {
    if (is_object_array(value)) {
      members.push_back(key);
    } else {
      context[key] = value;
    }
  }
  if (members.empty()) {
    Table t;
    t.add_row(result);
    return {t};
  }
  std::vector<Table> tables;
  for (const auto& member : members) {
    Table t;
    t.name = member;
    for (const auto& row : result[member]) {
      json merged = row;
      for (const auto& [key, value] : context.items())
        if (!merged.contains(key)) merged[key] = value;
      t.add_row(merged);
    }
    tables.push_back(std::move(t));
  }
  return tables;
}

Table table_from_map(std::string name, const json& map, const std::string& key_column) {
  Table t;
  t.name = std::move(name);
  for (const auto& [key, value] : map.items()) {
    json row = {{key_column, key}};
    if (value.is_object()) {
      row.update(value);
    } else {
      row["value"] = value;
    }
    t.add_row(row);
  }
  return t;
}

std::string csv_cell(const json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return csv_field(value.get_ref<const std::string&>());
  if (value.is_number_float()) return number_text(value.get<double>());
  return csv_field(value.dump());  // booleans, integers; structured values arrive as text already
}

std::string to_csv(std::span<const Table> tables) {
  std::vector<std::string> columns;
  for (const auto& t : tables)
    for (const auto& c : t.columns)
      if (std::find(columns.begin(), columns.end(), c) == columns.end()) columns.push_back(c);
  if (columns.empty()) return "";
  const bool stacked = tables.size() > 1;
  std::string out;
  std::vector<std::string> header;
  if (stacked) header.push_back("table");
  header.insert(header.end(), columns.begin(), columns.end());
  out += csv_row(header) + "\n";
  for (const auto& t : tables) {
    std::vector<std::size_t> index;
    for (const auto& c : columns) index.push_back(t.column(c));
    for (const auto& row : t.rows) {
      std::string line = stacked ? csv_field(t.name) : "";
      for (std::size_t i = 0; i < columns.size(); ++i) {
        if (stacked || i > 0) line += ',';
        if (index[i] != std::string::npos && index[i] < row.size()) line += csv_cell(row[index[i]]);
      }
      out += line + "\n";
    }
  }
  return out;
}

std::string to_text(const Table& table, std::span<const std::string> columns, int significant) {
  std::vector<std::size_t> index;
  std::vector<std::string> names;
  if (columns.empty()) {
    names = table.columns;
    for (std::size_t i = 0; i < names.size(); ++i) index.push_back(i);
  } else {
    for (const auto& c : columns) {
      names.push_back(c);
      index.push_back(table.column(c));
    }
  }
  std::vector<std::vector<std::string>> cells;
  std::vector<bool> right(names.size(), false);
  std::vector<std::size_t> width;
  for (const auto& n : names) width.push_back(n.size());
  for (const auto& row : table.rows) {
    auto& line = cells.emplace_back();
    for (std::size_t i = 0; i < names.size(); ++i) {
      const json cell = index[i] < row.size() ? row[index[i]] : json();
      if (cell.is_number()) right[i] = true;
      line.push_back(plain_text(cell, significant));
      width[i] = std::max(width[i], line.back().size());
    }
  }
  std::string out;
  const auto emit = [&](const std::vector<std::string>& line) {
    std::string text;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const std::string pad(width[i] - line[i].size(), ' ');
      if (i > 0) text += "  ";
      text += right[i] ? pad + line[i] : (i + 1 < line.size() ? line[i] + pad : line[i]);
    }
    out += text + "\n";
  };
  emit(names);
  for (const auto& line : cells) emit(line);
  return out;
}

}  // namespace dionsim
