#include "common/parse.hpp"

#include <cctype>
#include <charconv>
#include <cstdio>
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

std::string number_problem(double value) {
  if (!std::isfinite(value)) return "not finite";
  const double a = std::fabs(value);
  if (a > kMaxMagnitude) return "larger than 1e15 in magnitude";
  if (a != 0.0 && a < kMinMagnitude) return "nonzero and smaller than 1e-15 in magnitude";
  return {};
}

namespace {
constexpr const char* kNumberRule = "a finite number, 0 or between 1e-15 and 1e15 in magnitude";

std::string show(double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  return buf;
}
}  // namespace

double check_number(double value, std::string_view where, std::string_view field) {
  if (const std::string p = number_problem(value); !p.empty()) throw_bad_input(where, field, show(value), kNumberRule);
  return value;
}

std::optional<double> to_number(std::string_view text) {
  std::string_view t = trim(text);
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  double value = 0;
  const auto* end = t.data() + t.size();
  // from_chars: no locale, no "inf"/"nan" text accepted below, out-of-range is an error (1e400).
  const auto [ptr, ec] = std::from_chars(t.data(), end, value, std::chars_format::general);
  if (t.empty() || ec != std::errc{} || ptr != end || !number_problem(value).empty()) return std::nullopt;
  return value;
}

double parse_double(std::string_view text, std::string_view flag) {
  const std::optional<double> value = to_number(text);
  if (!value) throw_bad_usage(flag, text, kNumberRule);
  return *value;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
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
    if (items.size() > kMaxListItems) {
      throw_bad_usage(flag, text, "a list of at most " + std::to_string(kMaxListItems) + " values");
    }
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
    if (first < 1 || last < first || factor < 2 || last > kMaxRangeEnd) {
      throw_bad_usage(flag, item,
                      "a range FIRST..LAST[:xFACTOR] with 1 <= FIRST <= LAST <= " + std::to_string(kMaxRangeEnd) +
                          " and FACTOR >= 2");
    }
    // last <= 2^30 and factor may be large: stop before v * factor can overflow.
    std::int64_t v = first;
    while (true) {
      values.push_back(v);
      if (v >= last || v > last / factor) break;
      v *= factor;
    }
    if (values.back() != last) {
      const std::int64_t below = values.back();
      throw_bad_usage(flag, item,
                      "a range whose LAST is FIRST times a power of " + std::to_string(factor) + " (" +
                          std::to_string(first) + ".." + std::to_string(below) + " or " + std::to_string(first) +
                          ".." + std::to_string(below * factor) + "), or a comma list");
    }
    if (values.size() > kMaxListItems) break;
  }
  if (values.size() > kMaxListItems) {
    throw_bad_usage(flag, text, "a list of at most " + std::to_string(kMaxListItems) + " values");
  }
  return values;
}

std::vector<double> parse_double_list(std::string_view text, std::string_view flag) {
  std::vector<double> values;
  for (const std::string& item : split_list(text, flag)) values.push_back(parse_double(item, flag));
  if (values.size() > kMaxListItems) {
    throw_bad_usage(flag, text, "a list of at most " + std::to_string(kMaxListItems) + " values");
  }
  return values;
}

}  // namespace dionsim
