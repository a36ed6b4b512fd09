#include "common/error.hpp"

namespace dionsim {

std::string describe_bad_value(std::string_view where, std::string_view field, std::string_view got,
                               std::string_view expected) {
  std::string message;
  if (!where.empty()) {
    message.append(where).append(": ");
  }
  if (!field.empty()) {
    message.append(field).append(": ");
  }
  message.append("got '").append(got).append("', expected ").append(expected);
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
