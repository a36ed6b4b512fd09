#include "common/config_match.hpp"

#include <charconv>
#include <system_error>

#include "common/error.hpp"

namespace dionsim {

std::string canonical_json(const nlohmann::json& value) {
  // dump(): no indentation, no spaces; non-ASCII kept as UTF-8; invalid UTF-8 replaced (U+FFFD)
  // rather than throwing, so any config can be stored.
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ConfigMatch ConfigMatch::parse(std::string_view text) {
  const auto equals = text.find('=');
  if (equals == std::string_view::npos || equals == 0) {
    throw_bad_usage("--where", text, "key=value, e.g. world=2 or scope=global_capped");
  }
  return ConfigMatch{std::string(text.substr(0, equals)), std::string(text.substr(equals + 1))};
}

bool ConfigMatch::matches(const nlohmann::json& config) const {
  const nlohmann::json* node = &config;
  std::string_view rest = key;
  while (true) {
    const auto dot = rest.find('.');
    const std::string part(rest.substr(0, dot));
    if (!node->is_object()) return false;
    const auto it = node->find(part);
    if (it == node->end()) return false;
    node = &*it;
    if (dot == std::string_view::npos) break;
    rest.remove_prefix(dot + 1);
  }
  if (node->is_string()) return node->get_ref<const std::string&>() == value;
  if (node->is_number()) {
    double parsed = 0;
    const auto* end = value.data() + value.size();
    const auto result = std::from_chars(value.data(), end, parsed);
    return result.ec == std::errc() && result.ptr == end && parsed == node->get<double>();
  }
  if (node->is_boolean()) return value == (node->get<bool>() ? "true" : "false");
  if (node->is_null()) return value == "null";
  return canonical_json(*node) == value;
}

}  // namespace dionsim
