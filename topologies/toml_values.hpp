#pragma once
// Reading values out of a TOML file with errors that name file:line, the key, the value as
// written and what was expected — shared by the topology files (topologies/) and the GPU files
// (sim/hardware_file.cpp). Numbers follow the one number rule of common/parse.hpp (finite, 0 or
// 1e-15..1e15 in magnitude): TOML's inf/nan, 1e308 and 1e-320 are refused here.
#include <sstream>
#include <string>
#include <toml++/toml.h>

#include "common/error.hpp"
#include "common/parse.hpp"

namespace dionsim::topo {

[[nodiscard]] inline std::string toml_where(const std::string& source, const toml::node& node) {
  return source + ":" + std::to_string(node.source().begin.line);
}

[[nodiscard]] inline std::string toml_text(const toml::node& node) {
  std::ostringstream s;
  if (const auto* str = node.as_string()) {
    s << str->get();
  } else {
    node.visit([&s](const auto& v) { s << v; });
  }
  return s.str();
}

[[nodiscard]] inline double toml_number(const std::string& source, const std::string& key, const toml::node& node) {
  if (const auto* v = node.as_floating_point()) return check_number(v->get(), toml_where(source, node), key);
  if (const auto* v = node.as_integer()) return check_number(static_cast<double>(v->get()), toml_where(source, node), key);
  throw_bad_input(toml_where(source, node), key, toml_text(node), "a number");
}

}  // namespace dionsim::topo
