#pragma once
// Parsing of command-line values shared by every subcommand. Each function names the flag in
// its error so that a bad value says where it came from.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dionsim {

// "64M", "1G", "4096", "2.5K" -> bytes. K/M/G/T are powers of 1024 (as nccl-tests' -b/-e);
// an optional trailing 'B' or 'iB' is accepted. Throws UsageError naming `flag`.
[[nodiscard]] std::int64_t parse_size_bytes(std::string_view text, std::string_view flag);

// The one place a number from outside is judged (CLI flags, JSON, TOML, CSV): it must be finite,
// at most kMaxMagnitude in size and either 0 or at least kMinMagnitude (a subnormal such as
// 1e-320 turns into infinities when divided by). Fields then check their own, narrower ranges.
inline constexpr double kMaxMagnitude = 1e15;
inline constexpr double kMinMagnitude = 1e-15;
// Empty when `value` is acceptable, otherwise what is wrong with it ("not finite", ...).
[[nodiscard]] std::string number_problem(double value);
// Returns `value` or throws InputError "WHERE: FIELD: got 'V', expected a finite number ..." .
double check_number(double value, std::string_view where, std::string_view field);
// Text -> number by the same rule (decimal, no inf/nan/hex); nullopt when it is not one.
[[nodiscard]] std::optional<double> to_number(std::string_view text);

// A flag's value: a number by the rule above, else UsageError naming `flag`.
[[nodiscard]] double parse_double(std::string_view text, std::string_view flag);
[[nodiscard]] std::int64_t parse_int(std::string_view text, std::string_view flag);

// ASCII lower case (names and values compared case-insensitively: NCCL's variables, Kineto kinds).
[[nodiscard]] std::string lower(std::string_view text);

// "1,2,4" -> {"1","2","4"}; empty items are an error.
[[nodiscard]] std::vector<std::string> split_list(std::string_view text, std::string_view flag);

// Comma lists of integers with optional doubling ranges: "1,2,4" or "1..64" (FIRST times powers
// of two up to LAST) or "1..64:x4" (factor 4). LAST must be on the sequence (1..100 is refused
// naming 1..64 and 1..128), at most kMaxRangeEnd; a list holds at most kMaxListItems values.
inline constexpr std::int64_t kMaxRangeEnd = std::int64_t{1} << 30;
inline constexpr std::size_t kMaxListItems = 1024;
[[nodiscard]] std::vector<std::int64_t> parse_int_list(std::string_view text, std::string_view flag);
[[nodiscard]] std::vector<double> parse_double_list(std::string_view text, std::string_view flag);

}  // namespace dionsim
