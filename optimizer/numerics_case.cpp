#include "optimizer/numerics_case.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/json_input.hpp"
#include "common/parse.hpp"
#include <limits>
#include "optimizer/npy.hpp"

namespace dionsim::opt {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::int64_t kMaxCaseInteger = std::int64_t{1} << 31;

const std::set<std::string> kKeys{"optimizer", "scope",   "world",      "fraction", "steps",  "lr",
                                  "ef_decay",  "weight_decay", "adjust_lr", "capacity_factor", "mu",
                                  "muon_beta2", "params", "sharding",   "dtype",    "ns",     "epsilon"};

struct Reader {
  std::string where;
  const json& doc;
  const json* get(const std::string& key, bool required) const {
    if (!doc.contains(key)) {
      if (required) throw_bad_input(where, key, "(missing)", "a value");
      return nullptr;
    }
    return &doc[key];
  }
  double number(const std::string& key, double fallback, bool required = false) const {
    const json* v = get(key, required);
    if (v == nullptr || v->is_null()) return fallback;
    if (!v->is_number()) throw_bad_input(where, key, json_excerpt(*v), "a number");
    return check_number(v->get<double>(), where, key);
  }
  std::int64_t integer(const std::string& key) const {
    const json* v = get(key, true);
    // Bounded so that world * rows and steps * params cannot overflow or ask for absurd memory.
    return json_integer(*v, where, key, std::numeric_limits<std::int32_t>::min(), kMaxCaseInteger);
  }
  std::string text(const std::string& key, const std::string& fallback, bool required = false) const {
    const json* v = get(key, required);
    if (v == nullptr || v->is_null()) return fallback;
    if (!v->is_string()) throw_bad_input(where, key, json_excerpt(*v), "a string");
    return v->get<std::string>();
  }
};

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string out = "(";
  for (std::size_t i = 0; i < s.size(); ++i) out += std::to_string(s[i]) + (i + 1 < s.size() ? ", " : "");
  return out + ")";
}

std::vector<float> load_matrix(const fs::path& path, const ParamSpec& p) {
  NpyArray a = read_npy(path.string());
  if (a.shape != std::vector<std::int64_t>{p.rows, p.cols}) {
    throw_bad_input(path.string(), "shape", shape_text(a.shape), shape_text({p.rows, p.cols}) + " from case.json params");
  }
  // A NaN or infinite weight or gradient would run and write NaN everywhere (scripts/fuzz_cli.py).
  for (std::size_t i = 0; i < a.data.size(); ++i) {
    if (!std::isfinite(a.data[i])) {
      const auto cols = static_cast<std::size_t>(p.cols);
      throw_bad_input(path.string(), "data[" + std::to_string(i / cols) + "][" + std::to_string(i % cols) + "]",
                      std::isnan(a.data[i]) ? "nan" : "inf", "finite float32 values");
    }
  }
  return std::move(a.data);
}

}  // namespace

NumericsCase load_numerics_case(const std::string& dir) {
  const fs::path root(dir);
  const std::string where = (root / "case.json").string();
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    throw_bad_input(dir, "(folder)", fs::exists(root, ec) ? "not a folder" : "missing", "a numerics case folder");
  }
  const json doc = read_json_file(where, "a case.json in the case folder");
  if (!doc.is_object()) throw_bad_input(where, "(document)", json_excerpt(doc), "a JSON object");
  for (const auto& [key, value] : doc.items()) {
    if (kKeys.count(key) == 0) throw_bad_input(where, key, json_excerpt(value), "no unknown keys (see DESIGN.md case.json)");
  }
  const Reader r{where, doc};
  NumericsCase c;
  c.dir = dir;
  StepConfig& cfg = c.config;
  const std::string opt = r.text("optimizer", "", true);
  if (opt != "dion2" && opt != "nordion2") throw_bad_input(where, "optimizer", opt, "dion2 or nordion2");
  cfg.plan.optimizer = opt == "dion2" ? OptimizerKind::dion2 : OptimizerKind::nordion2;
  const std::string scope = r.text("scope", "", true);
  if (scope != "local" && scope != "global" && scope != "global_capped") {
    throw_bad_input(where, "scope", scope, "local, global or global_capped");
  }
  cfg.plan.scope = parse_scope(scope, "scope");
  cfg.plan.world = r.integer("world");
  if (cfg.plan.world < 1 || cfg.plan.world > 65536) throw_bad_input(where, "world", std::to_string(cfg.plan.world), "an integer in [1, 65536]");
  cfg.plan.fraction = r.number("fraction", 0.0, true);
  if (!is_valid_fraction(cfg.plan.fraction)) throw_bad_input(where, "fraction", doc["fraction"].dump(), "a number in (0, 1]");
  c.steps = r.integer("steps");
  if (c.steps < 1 || c.steps > 100000) throw_bad_input(where, "steps", std::to_string(c.steps), "an integer in [1, 100000]");
  cfg.lr = r.number("lr", 0.0, true);
  cfg.weight_decay = r.number("weight_decay", 0.01);
  if (doc.contains("capacity_factor") && !doc["capacity_factor"].is_null()) {
    cfg.plan.capacity_factor = r.number("capacity_factor", 1.0);
    if (!is_valid_capacity_factor(*cfg.plan.capacity_factor)) throw_bad_input(where, "capacity_factor", doc["capacity_factor"].dump(), "null (auto) or a number in [1, 1e6]");
  }
  // Dion2's EF decay is ef_decay; NorDion2's is mu (§1.1), default 0.95 when null.
  cfg.ef = cfg.plan.optimizer == OptimizerKind::dion2 ? r.number("ef_decay", 0.95) : r.number("mu", 0.95);
  if (!(cfg.ef >= 0.0 && cfg.ef <= 1.0)) throw_bad_input(where, cfg.plan.optimizer == OptimizerKind::dion2 ? "ef_decay" : "mu", std::to_string(cfg.ef), "a number in [0, 1]");
  cfg.muon_beta2 = r.number("muon_beta2", 0.95);
  cfg.epsilon = r.number("epsilon", 1e-8);
  const std::string adjust = r.text("adjust_lr", "none");
  if (adjust == "spectral_norm") cfg.adjust_lr = AdjustLr::spectral_norm;
  else if (adjust == "rms_norm") cfg.adjust_lr = AdjustLr::rms_norm;
  else if (adjust == "none") cfg.adjust_lr = AdjustLr::none;
  else throw_bad_input(where, "adjust_lr", adjust, "spectral_norm, rms_norm or null");
  const std::string sharding = r.text("sharding", "rows");
  if (sharding != "rows" && sharding != "none") throw_bad_input(where, "sharding", sharding, "rows (FSDP2) or none (DDP)");
  cfg.plan.sharded = sharding == "rows";
  const std::string dtype = r.text("dtype", "float32");
  if (dtype != "float32" && dtype != "bfloat16") throw_bad_input(where, "dtype", dtype, "float32 or bfloat16");
  cfg.dtype = dtype == "float32" ? Dtype::float32 : Dtype::bfloat16;
  const std::string ns = r.text("ns", "polar_express");
  if (ns != "polar_express" && ns != "newton_schulz5" && ns != "gram")
    throw_bad_input(where, "ns", ns, "polar_express, newton_schulz5 or gram");
  cfg.plan.ns = parse_ns(ns, "ns");
  const json* params = r.get("params", true);
  if (!params->is_array() || params->empty()) throw_bad_input(where, "params", json_excerpt(*params), "a non-empty list of {name, shape}");
  std::set<std::string> names;
  for (std::size_t i = 0; i < params->size(); ++i) {
    const json& p = (*params)[i];
    const std::string at = "params[" + std::to_string(i) + "]";
    if (!p.is_object()) throw_bad_input(where, at, json_excerpt(p), "an object {name, shape}");
    for (const auto& [key, value] : p.items()) {
      if (key != "name" && key != "shape") throw_bad_input(where, at + "." + key, json_excerpt(value), "only name and shape");
    }
    if (!p.contains("name") || !p["name"].is_string() || p["name"].get<std::string>().empty() ||
        p["name"].get<std::string>().find('/') != std::string::npos) {
      throw_bad_input(where, at + ".name", p.value("name", json()).dump(), "a non-empty file-name-safe string");
    }
    const std::string name = p["name"];
    if (!names.insert(name).second) throw_bad_input(where, at + ".name", name, "a unique name");
    const json& shape = p.value("shape", json());
    if (!shape.is_array() || shape.size() != 2 || !shape[0].is_number_integer() || !shape[1].is_number_integer() ||
        shape[0].get<std::int64_t>() < 1 || shape[1].get<std::int64_t>() < 1 ||
        shape[0].get<std::int64_t>() > kMaxNpyDimension || shape[1].get<std::int64_t>() > kMaxNpyDimension) {
      throw_bad_input(where, at + ".shape", json_excerpt(shape), "[rows, cols] with both in [1, 2^31] (2-D weights only)");
    }
    c.params.push_back({name, shape[0].get<std::int64_t>(), shape[1].get<std::int64_t>()});
  }
  // All inputs are read now so that a bad file fails before any step runs.
  for (const ParamSpec& p : c.params) c.initial.push_back(load_matrix(root / ("W0_" + p.name + ".npy"), p));
  for (std::int64_t t = 0; t < c.steps; ++t) {
    c.grads.emplace_back();
    for (const ParamSpec& p : c.params) {
      c.grads.back().push_back(load_matrix(root / (std::string("G") + std::to_string(t) + "_" + p.name + ".npy"), p));
    }
  }
  return c;
}

std::unique_ptr<ReferenceOptimizer> run_numerics_case(const NumericsCase& c, int threads) {
  StepConfig cfg = c.config;
  cfg.threads = threads;
  auto opt = std::make_unique<ReferenceOptimizer>(cfg, c.params, c.initial);
  for (const auto& g : c.grads) opt->step(g);
  return opt;
}

nlohmann::json stats_to_json(const ReferenceOptimizer& opt) {
  json per_rank = json::array();
  for (const auto& steps : opt.stats()) {
    json list = json::array();
    for (const RankStepStats& s : steps) list.push_back({{"deferred_rows", s.deferred_rows}, {"winner_rows", s.winner_rows}});
    per_rank.push_back(list);
  }
  return {{"per_rank", per_rank}};
}

void write_numerics_outputs(const std::string& out_dir, const NumericsCase& c, const ReferenceOptimizer& opt) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw IoError(out_dir + ": cannot create the output folder: " + ec.message());
  for (std::size_t i = 0; i < c.params.size(); ++i) {
    const std::vector<std::int64_t> shape{c.params[i].rows, c.params[i].cols};
    write_npy((fs::path(out_dir) / ("W_" + c.params[i].name + ".npy")).string(), shape, opt.weight(i));
  }
  const std::string path = (fs::path(out_dir) / "stats.json").string();
  write_file_atomically(path, stats_to_json(opt).dump(1) + "\n");
}

}  // namespace dionsim::opt
