#include "common/parse.hpp"

#include <charconv>
#include <cmath>
#include <limits>

#include "common/error.hpp"

namespace dionsim {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

double parse_double(std::string_view text, std::string_view flag) {
  const std::string_view t = trim(text);
  double value = 0;
  const auto* end = t.data() + t.size();
  const auto [ptr, ec] = std::from_chars(t.data(), end, value);
  if (t.empty() || ec != std::errc{} || ptr != end || !std::isfinite(value)) {
    throw_bad_usage(flag, text, "a finite number");
  }
  return value;
}

std::int64_t parse_int(std::string_view text, std::string_view flag) {
  const std::string_view t = trim(text);
  std::int64_t value = 0;
  const auto* end = t.data() + t.size();
  const auto [ptr, ec] = std::from_chars(t.data(), end, value);
  if (t.empty() || ec != std::errc{} || ptr != end) {
    throw_bad_usage(flag, text, "an integer");
  }
  return value;
}

std::int64_t parse_size_bytes(std::string_view text, std::string_view flag) {
  std::string_view t = trim(text);
  if (t.ends_with("iB")) {
    t.remove_suffix(2);
  } else if (t.ends_with('B') && t.size() > 1 && std::string_view("KMGT").find(t[t.size() - 2]) != std::string_view::npos) {
    t.remove_suffix(1);
  }
  double scale = 1;
  if (!t.empty()) {
    switch (t.back()) {
      case 'K': case 'k': scale = 1024.0; break;
      case 'M': case 'm': scale = 1024.0 * 1024; break;
      case 'G': case 'g': scale = 1024.0 * 1024 * 1024; break;
      case 'T': case 't': scale = 1024.0 * 1024 * 1024 * 1024; break;
      default: break;
    }
    if (scale != 1) t.remove_suffix(1);
  }
  double number = 0;
  const auto* end = t.data() + t.size();
  const auto [ptr, ec] = std::from_chars(t.data(), end, number);
  const double bytes = number * scale;
  if (t.empty() || ec != std::errc{} || ptr != end || !std::isfinite(bytes) || bytes < 0 ||
      bytes > static_cast<double>(std::numeric_limits<std::int64_t>::max() / 2) || bytes != std::floor(bytes)) {
    throw_bad_usage(flag, text, "a whole number of bytes such as 4096, 64K, 8M or 1G");
  }
  return static_cast<std::int64_t>(bytes);
}

std::vector<std::string> split_list(std::string_view text, std::string_view flag) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item = trim(text.substr(start, comma == std::string_view::npos ? text.npos : comma - start));
    if (item.empty()) {
      throw_bad_usage(flag, text, "a comma-separated list without empty items");
    }
    items.emplace_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return items;
}

std::vector<std::int64_t> parse_int_list(std::string_view text, std::string_view flag) {
  std::vector<std::int64_t> values;
  for (const std::string& item : split_list(text, flag)) {
    const std::size_t dots = item.find("..");
    if (dots == std::string::npos) {
      values.push_back(parse_int(item, flag));
      continue;
    }
    std::string_view rest = std::string_view(item).substr(dots + 2);
    std::int64_t factor = 2;
    if (const std::size_t colon = rest.find(":x"); colon != std::string_view::npos) {
      factor = parse_int(rest.substr(colon + 2), flag);
      rest = rest.substr(0, colon);
    }
    const std::int64_t first = parse_int(std::string_view(item).substr(0, dots), flag);
    const std::int64_t last = parse_int(rest, flag);
    if (first < 1 || last < first || factor < 2) {
      throw_bad_usage(flag, item, "a range FIRST..LAST[:xFACTOR] with 1 <= FIRST <= LAST and FACTOR >= 2");
    }
    for (std::int64_t v = first; v <= last; v *= factor) values.push_back(v);
  }
  return values;
}

std::vector<double> parse_double_list(std::string_view text, std::string_view flag) {
  std::vector<double> values;
  for (const std::string& item : split_list(text, flag)) values.push_back(parse_double(item, flag));
  return values;
}

}  // namespace dionsim
