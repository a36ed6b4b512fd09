#pragma once
// The one JSON reader for files from outside (inventories, numerics cases, calibrations, Kineto
// traces, stored records): a nesting depth limit checked before parsing (printing or destroying a
// document nested 100 000 deep overflows the stack), every number checked by the rule of
// common/parse.hpp (1e400 is refused, not read as infinity), and every failure an InputError
// that names the file.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace dionsim {

// The deepest nesting of arrays and objects accepted in any JSON input.
inline constexpr std::size_t kMaxJsonDepth = 64;

// Parses `text` (the content of `where`). allow_large: numbers may exceed 1e15 in magnitude
// (Kineto's epoch timestamps in µs); finiteness is always required.
[[nodiscard]] nlohmann::json parse_json_input(std::string_view text, std::string_view where, bool allow_large = false);

// read_input_file + parse_json_input.
[[nodiscard]] nlohmann::json read_json_file(const std::string& path, std::string_view what, bool allow_large = false);

// A number field of a parsed document, checked by the common rule and [lo, hi].
[[nodiscard]] double json_number(const nlohmann::json& value, std::string_view where, std::string_view field, double lo,
                                 double hi);
// An integer field in [lo, hi] (a float such as 3.0 is not an integer).
[[nodiscard]] std::int64_t json_integer(const nlohmann::json& value, std::string_view where, std::string_view field,
                                        std::int64_t lo, std::int64_t hi);

// value.dump(), capped: what error messages echo.
[[nodiscard]] std::string json_excerpt(const nlohmann::json& value);

}  // namespace dionsim
