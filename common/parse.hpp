#pragma once
// Parsing of command-line values shared by every subcommand. Each function names the flag in
// its error so that a bad value says where it came from.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dionsim {

// "64M", "1G", "4096", "2.5K" -> bytes. K/M/G/T are powers of 1024 (as nccl-tests' -b/-e);
// an optional trailing 'B' or 'iB' is accepted. Throws UsageError naming `flag`.
[[nodiscard]] std::int64_t parse_size_bytes(std::string_view text, std::string_view flag);

[[nodiscard]] double parse_double(std::string_view text, std::string_view flag);
[[nodiscard]] std::int64_t parse_int(std::string_view text, std::string_view flag);

// "1,2,4" -> {"1","2","4"}; empty items are an error.
[[nodiscard]] std::vector<std::string> split_list(std::string_view text, std::string_view flag);

// Comma lists of integers with optional doubling ranges: "1,2,4" or "1..64" (powers of two
// between the ends, both included when powers of two) or "1..64:x4" (factor 4).
[[nodiscard]] std::vector<std::int64_t> parse_int_list(std::string_view text, std::string_view flag);
[[nodiscard]] std::vector<double> parse_double_list(std::string_view text, std::string_view flag);

}  // namespace dionsim
