#include "common/json_input.hpp"

#include <cmath>
#include <cstdio>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/parse.hpp"

namespace dionsim {

namespace {

// Depth of the deepest array/object, strings skipped; stops counting past the limit.
void check_depth(std::string_view text, std::string_view where) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        throw_bad_input(where, "(document)", "nesting deeper than " + std::to_string(kMaxJsonDepth) + " at byte " + std::to_string(i),
                        "JSON nested at most " + std::to_string(kMaxJsonDepth) + " levels deep");
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

}  // namespace

nlohmann::json parse_json_input(std::string_view text, std::string_view where, bool allow_large) {
  check_depth(text, where);
  std::string problem;
  const auto check = [&](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::value && parsed.is_number_float() && problem.empty()) {
      const double v = parsed.get<double>();
      if (!std::isfinite(v)) {
        problem = "a number out of range (not finite as a double)";
      } else if (!allow_large && !number_problem(v).empty()) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.17g", v);
        problem = std::string(buf) + " (" + number_problem(v) + ")";
      }
    }
    return true;
  };
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text.begin(), text.end(), check);
  } catch (const nlohmann::json::exception& e) {
    throw_bad_input(where, "(document)", std::string("not JSON: ") + e.what(), "valid JSON");
  }
  if (!problem.empty()) {
    throw_bad_input(where, "(number)", problem, "numbers that are finite, 0 or between 1e-15 and 1e15 in magnitude");
  }
  return doc;
}

nlohmann::json read_json_file(const std::string& path, std::string_view what, bool allow_large) {
  return parse_json_input(read_input_file(path, what), path, allow_large);
}

double json_number(const nlohmann::json& value, std::string_view where, std::string_view field, double lo, double hi) {
  if (!value.is_number()) throw_bad_input(where, field, json_excerpt(value), "a number");
  const double v = check_number(value.get<double>(), where, field);
  if (!(v >= lo && v <= hi)) {
    char range[96];
    std::snprintf(range, sizeof range, "a number in [%g, %g]", lo, hi);
    throw_bad_input(where, field, json_excerpt(value), range);
  }
  return v;
}

std::int64_t json_integer(const nlohmann::json& value, std::string_view where, std::string_view field, std::int64_t lo,
                          std::int64_t hi) {
  const std::string expected = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (value.is_number_unsigned()) {
    const auto u = value.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi) || (lo > 0 && u < static_cast<std::uint64_t>(lo))) {
      throw_bad_input(where, field, json_excerpt(value), expected);
    }
    return static_cast<std::int64_t>(u);
  }
  if (!value.is_number_integer()) throw_bad_input(where, field, json_excerpt(value), expected);
  const auto v = value.get<std::int64_t>();
  if (v < lo || v > hi) throw_bad_input(where, field, json_excerpt(value), expected);
  return v;
}

std::string json_excerpt(const nlohmann::json& value) {
  // The document is at most kMaxJsonDepth deep, so dump() cannot overflow the stack; cap its size.
  std::string text = value.dump();
  if (text.size() > 120) text = text.substr(0, 120) + "... (" + std::to_string(text.size()) + " bytes)";
  return text;
}

}  // namespace dionsim
