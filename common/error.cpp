#include "common/error.hpp"

namespace dionsim {

namespace {

// A rejected value is echoed so that the user sees it, but never whole: a 60 KB value (a JSON
// document nested 100 000 deep) would bury the message.
constexpr std::size_t kMaxEcho = 120;

std::string capped(std::string_view got) {
  // +40: an excerpt already capped elsewhere (json_excerpt: 120 characters and its length) passes.
  if (got.size() <= kMaxEcho + 40) return std::string(got);
  return std::string(got.substr(0, kMaxEcho)) + "... (" + std::to_string(got.size()) + " bytes)";
}

}  // namespace

std::string describe_bad_value(std::string_view where, std::string_view field, std::string_view got,
                               std::string_view expected) {
  std::string message;
  if (!where.empty()) {
    message.append(where).append(": ");
  }
  if (!field.empty()) {
    message.append(field).append(": ");
  }
  message.append("got '").append(capped(got)).append("', expected ").append(expected);
  return message;
}

void throw_bad_input(std::string_view where, std::string_view field, std::string_view got,
                     std::string_view expected) {
  throw InputError(describe_bad_value(where, field, got, expected));
}

void throw_bad_usage(std::string_view flag, std::string_view got, std::string_view expected) {
  throw UsageError(describe_bad_value("", flag, got, expected));
}

}  // namespace dionsim
