// GPU description files (TOML) for `--hardware FILE`: a GPU the presets do not have. Keys carry
// their units; unknown keys and bad values are errors naming file:line (kernel_model.hpp).
#include <cmath>
#include <set>
#include <toml++/toml.h>

#include "common/error.hpp"
#include "common/files.hpp"
#include "sim/kernel_model.hpp"
#include "topologies/toml_values.hpp"

namespace dionsim::sim {

Hardware parse_hardware(const std::string& text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw InputError(source + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
  Hardware hw;
  const bool has_base = root.get("base") != nullptr;
  if (has_base) {
    const toml::node& n = *root.get("base");
    const auto* name = n.as_string();
    try {
      if (name == nullptr) throw UsageError("not a string");
      hw = hardware_preset(name->get(), "base");
    } catch (const UsageError&) {
      throw_bad_input(topo::toml_where(source, n), "base", topo::toml_text(n), "one of " + hardware_preset_list());
    }
  } else {
    // The two parameters no datasheet gives: the H200's measured values (kernel_model.cpp).
    hw.hbm_efficiency = 0.907;
    hw.launch_gap_us = 0.93;
  }
  std::set<std::string> given;
  for (const auto& [k, node] : root) {
    const std::string key(k.str());
    const toml::node& n = node;
    given.insert(key);
    // A value is checked where it is read, so that the error has its line.
    const auto positive = [&](double& field) {
      const double v = topo::toml_number(source, key, n);
      if (!(v > 0.0)) throw_bad_input(topo::toml_where(source, n), key, topo::toml_text(n), "a positive number");
      field = v;
    };
    const auto nonnegative = [&](double& field) {
      const double v = topo::toml_number(source, key, n);
      if (!(v >= 0.0)) throw_bad_input(topo::toml_where(source, n), key, topo::toml_text(n), "a number >= 0");
      field = v;
    };
    if (key == "base") {
      continue;
    } else if (key == "name") {
      const auto* v = n.as_string();
      if (v == nullptr || v->get().empty()) throw_bad_input(topo::toml_where(source, n), key, topo::toml_text(n), "a non-empty string");
      hw.name = v->get();
    } else if (key == "peak_bf16_TFLOPs") {
      positive(hw.peak_bf16_TFLOPs);
    } else if (key == "hbm_GBps") {
      positive(hw.hbm_GBps);
    } else if (key == "hbm_GB") {
      positive(hw.hbm_GB);
    } else if (key == "hbm_efficiency") {
      const double v = topo::toml_number(source, key, n);
      if (!(v > 0.0 && v <= 1.0)) throw_bad_input(topo::toml_where(source, n), key, topo::toml_text(n), "a number in (0, 1]");
      hw.hbm_efficiency = v;
    } else if (key == "launch_gap_us") {
      nonnegative(hw.launch_gap_us);
    } else if (key == "nvlink_GBps") {
      nonnegative(hw.nvlink_GBps);
    } else if (key == "power_W") {
      nonnegative(hw.power_W);
    } else if (key == "nvlink_generation") {
      const auto* v = n.as_integer();
      if (v == nullptr || v->get() < 0 || v->get() > 9) {
        throw_bad_input(topo::toml_where(source, n), key, topo::toml_text(n), "0 (none) or an integer in [1, 9]");
      }
      hw.nvlink_generation = static_cast<int>(v->get());
    } else {
      throw_bad_input(topo::toml_where(source, n), key, topo::toml_text(n),
                      "no such key (known: base, name, peak_bf16_TFLOPs, hbm_GBps, hbm_GB, hbm_efficiency, "
                      "launch_gap_us, nvlink_generation, nvlink_GBps, power_W)");
    }
  }
  if (!has_base) {
    for (const char* key : {"name", "peak_bf16_TFLOPs", "hbm_GBps", "hbm_GB"}) {
      if (given.count(key) == 0) throw_bad_input(source, key, "(missing)", "a value (or a 'base' preset)");
    }
  } else if (given.count("name") == 0) {
    hw.name = source;  // a modified preset is not the preset
  }
  validate(hw, source);
  return hw;
}

Hardware resolve_hardware(const std::string& preset_or_file, std::string_view flag) {
  const bool is_file = preset_or_file.find('/') != std::string::npos || preset_or_file.ends_with(".toml");
  if (!is_file) return hardware_preset(preset_or_file, flag);
  // Through common/files: a folder, FIFO or device (/dev/zero read forever) is refused by name
  // (exit 3); a missing file stays an I/O error (exit 4).
  const std::string what = "a GPU TOML file (" + std::string(flag) + ")";
  return parse_hardware(read_input_file(preset_or_file, what, std::size_t{1} << 20), preset_or_file);
}

}  // namespace dionsim::sim
