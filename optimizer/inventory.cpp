#include "optimizer/inventory.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/json_input.hpp"
#include <cstdio>

namespace dionsim::opt {

Inventory seed_5120x8() {
  // Spec §7: the only inventory that reproduces the thread's payloads at w = 4, 8, 16.
  return {"seed-5120x8", {{"square", 5120, 5120, 33}, {"mlp", 20480, 5120, 16}}};
}

Inventory gpt_layout(std::int64_t hidden, std::int64_t layers) {
  // Per layer q, k, v, o, fc, proj in parameter order; the plan buckets by first occurrence, so the
  // groups come out as (h,h) x 4L, (4h,h) x L, (h,4h) x L (spec §6.1).
  Inventory inv{"gpt-" + std::to_string(hidden) + "x" + std::to_string(layers), {}, layers};
  for (std::int64_t l = 0; l < layers; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    for (const char* n : {"attn.c_q", "attn.c_k", "attn.c_v", "attn.c_proj"}) {
      inv.entries.push_back({p + n, hidden, hidden, 1});
    }
    inv.entries.push_back({p + "mlp.c_fc", 4 * hidden, hidden, 1});
    inv.entries.push_back({p + "mlp.c_proj", hidden, 4 * hidden, 1});
  }
  return inv;
}

Inventory gpt_swiglu(const std::string& name, std::int64_t hidden, std::int64_t inter, std::int64_t layers) {
  Inventory inv{name, {}, layers};
  for (std::int64_t l = 0; l < layers; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    for (const char* n : {"attn.q", "attn.k", "attn.v", "attn.o"}) {
      inv.entries.push_back({p + n, hidden, hidden, 1});
    }
    inv.entries.push_back({p + "mlp.gate", inter, hidden, 1});
    inv.entries.push_back({p + "mlp.up", inter, hidden, 1});
    inv.entries.push_back({p + "mlp.down", hidden, inter, 1});
  }
  return inv;
}

void check_inventory_size(const Inventory& inv, const std::string& where) {
  // rows, cols <= 2^24 and count <= 2^20 keep every product below 2^63; the total bounds what a
  // plan or a what-if may be asked to lay out.
  double elements = 0;
  for (const MatrixSpec& m : inv.entries) {
    elements += static_cast<double>(m.rows) * static_cast<double>(m.cols) * static_cast<double>(m.count);
  }
  if (elements > static_cast<double>(kMaxInventoryElements)) {
    char got[64];
    std::snprintf(got, sizeof got, "%.3g parameters", elements);
    throw_bad_input(where, "(inventory)", got, "at most 2^44 (1.8e13) matrix parameters in total");
  }
}

Inventory parse_inventory_json(const std::string& text, const std::string& where) {
  nlohmann::json doc = parse_json_input(text, where);
  std::int64_t layers = 0;
  if (doc.is_object()) {  // {"layers": L, "matrices": [...]}
    for (const auto& [key, value] : doc.items()) {
      if (key != "layers" && key != "matrices") {
        throw_bad_input(where, key, json_excerpt(value), "only the keys layers, matrices (or a plain list)");
      }
    }
    // At most 10^5 layers: the per-layer FSDP schedule simulates every one.
    if (!doc.contains("layers") || !doc["layers"].is_number_integer() || doc["layers"].get<std::int64_t>() < 1 ||
        doc["layers"].get<std::int64_t>() > kMaxLayers) {
      throw_bad_input(where, "layers", doc.contains("layers") ? json_excerpt(doc["layers"]) : "(missing)",
                      "an integer in [1, 100000]");
    }
    layers = doc["layers"].get<std::int64_t>();
    doc = doc.contains("matrices") ? doc["matrices"] : nlohmann::json();
  }
  if (!doc.is_array() || doc.empty()) {
    throw_bad_input(where, "(document)", json_excerpt(doc), "a non-empty JSON list of {name, rows, cols, count}");
  }
  if (doc.size() > kMaxInventoryEntries) {
    throw_bad_input(where, "(document)", std::to_string(doc.size()) + " entries",
                    "at most " + std::to_string(kMaxInventoryEntries) + " entries");
  }
  Inventory inv{where, {}, layers};
  for (std::size_t i = 0; i < doc.size(); ++i) {
    const auto& e = doc[i];
    const std::string at = std::string("[") + std::to_string(i) + "]";
    if (!e.is_object()) {
      throw_bad_input(where, at, json_excerpt(e), "an object {name, rows, cols, count}");
    }
    for (const auto& [key, value] : e.items()) {
      if (key != "name" && key != "rows" && key != "cols" && key != "count") {
        throw_bad_input(where, at + "." + key, json_excerpt(value), "only the keys name, rows, cols, count");
      }
    }
    MatrixSpec m;
    if (!e.contains("name") || !e["name"].is_string()) {
      throw_bad_input(where, at + ".name", json_excerpt(e.value("name", nlohmann::json())), "a string");
    }
    m.name = e["name"].get<std::string>();
    for (const char* key : {"rows", "cols", "count"}) {
      if (std::string(key) == "count" && !e.contains("count")) {
        continue;  // count defaults to 1
      }
      if (!e.contains(key)) throw_bad_input(where, at + "." + key, "(missing)", "an integer >= 1");
    }
    m.rows = json_integer(e["rows"], where, at + ".rows", 1, kMaxMatrixDimension);
    m.cols = json_integer(e["cols"], where, at + ".cols", 1, kMaxMatrixDimension);
    m.count = e.contains("count") ? json_integer(e["count"], where, at + ".count", 1, kMaxMatrixCount) : 1;
    inv.entries.push_back(m);
  }
  check_inventory_size(inv, where);
  return inv;
}

Inventory load_inventory(const std::string& model) {
  if (model == "seed-5120x8") {
    return seed_5120x8();
  }
  if (model == "gpt-1b") {
    return gpt_swiglu("gpt-1b", 1536, 6656, 24);
  }
  if (model == "gpt-14b") {
    return gpt_swiglu("gpt-14b", 5120, 17920, 40);
  }
  static const std::regex gpt(R"(gpt-([0-9]{1,6})x([0-9]{1,4}))");
  std::smatch m;
  if (std::regex_match(model, m, gpt)) {
    // At most 6 and 4 digits: the layout stays inside the inventory limits checked below.
    const std::int64_t h = std::stoll(m[1]);
    const std::int64_t l = std::stoll(m[2]);
    if (h < 1 || l < 1) {
      throw_bad_usage("--model", model, "gpt-<hidden>x<layers> with both >= 1");
    }
    Inventory inv = gpt_layout(h, l);
    check_inventory_size(inv, "--model " + model);
    return inv;
  }
  if (model.ends_with(".json")) {
    require_regular_file(model, "a JSON inventory file");  // missing: exit 3, as before
    return parse_inventory_json(read_input_file(model, "a JSON inventory file", 64 << 20), model);
  }
  throw_bad_usage("--model", model, "seed-5120x8, gpt-<h>x<L>, gpt-1b, gpt-14b or a .json inventory file");
}

}  // namespace dionsim::opt
