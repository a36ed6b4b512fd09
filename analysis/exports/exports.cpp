#include "analysis/exports/exports.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "common/config_match.hpp"
#include "common/error.hpp"

namespace dionsim::analysis {

namespace {

using nlohmann::json;
using Leaves = std::vector<std::pair<std::string, json>>;

// The columns export writes itself; a configuration key of the same name becomes config.<key>.
const std::set<std::string>& fixed_columns() {
  static const std::set<std::string> names{"run_id", "kind",   "mode", "seed", "metric", "value",
                                           "unit",   "rank",   "step", "a",    "b",      "diff",
                                           "diff_pct", "a_lo", "a_hi", "b_lo", "b_hi",   "overlap",
                                           "run_a",  "run_b"};
  return names;
}

std::string column_of(const std::string& key) { return fixed_columns().count(key) ? "config." + key : key; }

// Whether `path` (dotted) names a member of `config`, a leaf or an object.
bool has_path(const json& config, const std::string& path) {
  const json* node = &config;
  std::size_t start = 0;
  while (true) {
    const auto dot = path.find('.', start);
    if (!node->is_object()) return false;
    const auto it = node->find(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (it == node->end()) return false;
    node = &*it;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

std::string joined(const std::set<std::string>& names, std::size_t at_most = 40) {
  std::string out;
  std::size_t n = 0;
  for (const auto& name : names) {
    if (n++ == at_most) return out + ", … (" + std::to_string(names.size()) + " in all)";
    out += (out.empty() ? "" : ", ") + name;
  }
  return out.empty() ? "none" : out;
}

std::set<std::string> config_keys(const std::vector<StoredRun>& runs) {
  std::set<std::string> keys;
  for (const auto& run : runs)
    for (const auto& [key, value] : flatten_object(run.record.config)) keys.insert(key);
  return keys;
}

// A metric's identity within a run: name, rank, step and labels.
std::string metric_id(const std::string& name, const MetricRow& m) {
  return name + '\n' + (m.rank ? std::to_string(*m.rank) : "") + '\n' + (m.step ? std::to_string(*m.step) : "") +
         '\n' + canonical_json(m.labels);
}

json optional_int(const std::optional<std::int64_t>& v) { return v ? json(*v) : json(); }

// The metrics of the selected runs, by run id (names filter as selected).
std::map<std::int64_t, std::vector<MetricRow>> metrics_by_run(const Database& db, const RunSelection& selection,
                                                             const std::vector<StoredRun>& runs) {
  std::map<std::int64_t, std::vector<MetricRow>> out;
  for (const auto& run : runs) out[run.id];
  RunQuery query;
  query.kind = selection.kind;
  for (auto& m : db.metrics(query, selection.metrics)) {
    const auto it = out.find(m.run_id);
    if (it != out.end()) it->second.push_back(std::move(m.metric));
  }
  return out;
}

}  // namespace

std::vector<StoredRun> select_runs(const Database& db, const RunSelection& selection, const std::string& flag) {
  RunQuery query;
  query.kind = selection.kind;
  auto runs = db.find_runs(query);
  if (selection.kind && runs.empty()) {
    std::set<std::string> kinds;
    for (const auto& run : db.find_runs({})) kinds.insert(run.record.kind);
    throw_bad_usage("--kind", *selection.kind, "a kind of run stored in " + db.path() + " (" + joined(kinds) + ")");
  }
  // One key's values are alternatives, different keys must all match (as calibrate --where).
  std::map<std::string, std::vector<ConfigMatch>> by_key;
  const std::set<std::string> keys = config_keys(runs);
  for (const auto& text : selection.where) {
    ConfigMatch match;
    try {
      match = ConfigMatch::parse(text);
    } catch (const UsageError&) {
      throw_bad_usage(flag, text, "key=value, e.g. world=16 or scope=global_capped");
    }
    const bool known = std::any_of(runs.begin(), runs.end(), [&](const StoredRun& r) { return has_path(r.record.config, match.key); });
    if (!known) {
      throw_bad_usage(flag, text, "a configuration key of the " + (selection.kind ? *selection.kind + " " : std::string()) +
                                      "runs in " + db.path() + " (" + joined(keys) + ")");
    }
    by_key[match.key].push_back(std::move(match));
  }
  std::erase_if(runs, [&](const StoredRun& run) {
    return !std::all_of(by_key.begin(), by_key.end(), [&](const auto& entry) {
      return std::any_of(entry.second.begin(), entry.second.end(),
                         [&](const ConfigMatch& m) { return m.matches(run.record.config); });
    });
  });
  if (!selection.metrics.empty()) {
    std::set<std::string> stored;
    RunQuery all;
    all.kind = selection.kind;
    for (const auto& m : db.metrics(all)) stored.insert(m.metric.name);
    for (const auto& name : selection.metrics) {
      if (!stored.count(name)) throw_bad_usage("--metric", name, "a metric stored in " + db.path() + " (" + joined(stored) + ")");
    }
  }
  return runs;
}

Table export_table(const Database& db, const RunSelection& selection) {
  const auto runs = select_runs(db, selection);
  const auto metrics = metrics_by_run(db, selection, runs);
  std::set<std::string> config_columns, label_columns;
  std::map<std::int64_t, Leaves> leaves;
  for (const auto& run : runs) {
    leaves[run.id] = flatten_object(run.record.config);
    for (const auto& [key, value] : leaves[run.id]) config_columns.insert(column_of(key));
    for (const auto& m : metrics.at(run.id))
      for (const auto& [key, value] : flatten_object(m.labels)) label_columns.insert("label." + key);
  }
  Table t;
  t.columns = {"run_id", "kind", "mode", "seed"};
  t.columns.insert(t.columns.end(), config_columns.begin(), config_columns.end());
  for (const char* c : {"metric", "value", "unit", "rank", "step"}) t.columns.emplace_back(c);
  t.columns.insert(t.columns.end(), label_columns.begin(), label_columns.end());
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < t.columns.size(); ++i) index[t.columns[i]] = i;
  for (const auto& run : runs) {
    std::vector<json> base(t.columns.size());
    base[0] = run.id;
    base[1] = run.record.kind;
    base[2] = std::string(to_string(run.record.mode));
    base[3] = run.record.seed;
    for (const auto& [key, value] : leaves.at(run.id)) base[index.at(column_of(key))] = value;
    for (const auto& m : metrics.at(run.id)) {
      auto row = base;
      row[index.at("metric")] = m.name;
      row[index.at("value")] = m.value;
      row[index.at("unit")] = m.unit;
      row[index.at("rank")] = optional_int(m.rank);
      row[index.at("step")] = optional_int(m.step);
      for (const auto& [key, value] : flatten_object(m.labels)) row[index.at("label." + key)] = value;
      t.rows.push_back(std::move(row));
    }
  }
  return t;
}

namespace {

struct Side {
  std::vector<StoredRun> runs;  // the newest run of each configuration
  std::map<std::int64_t, std::vector<MetricRow>> metrics;
  std::map<std::string, std::size_t> by_key;  // match key -> index into runs
  int superseded = 0;
};

// Pairs the runs of one side by kind and configuration without the `ignore` leaves of that kind.
Side index_side(const CompareSide& side, std::vector<StoredRun> runs,
                const std::map<std::string, std::set<std::string>>& ignore) {
  Side out;
  static const std::set<std::string> none;
  for (auto& run : runs) {
    // The configuration as flat leaves without the set-aside ones: what pairs and what is shown.
    const auto of_kind = ignore.find(run.record.kind);
    const auto& skip = of_kind == ignore.end() ? none : of_kind->second;
    json stripped = json::object();
    for (auto& [leaf, value] : flatten_object(run.record.config))
      if (!skip.count(leaf)) stripped[leaf] = std::move(value);
    const std::string key = run.record.kind + '\n' + canonical_json(stripped);
    run.record.config = std::move(stripped);
    const auto [it, inserted] = out.by_key.emplace(key, out.runs.size());
    if (inserted) {
      out.runs.push_back(std::move(run));
    } else {
      ++out.superseded;  // oldest first: a later run of the same configuration replaces it
      out.runs[it->second] = std::move(run);
    }
  }
  // --metric m also loads m_lo and m_hi: its interval, folded into m's row.
  RunSelection loading = side.selection;
  for (const auto& m : side.selection.metrics) {
    loading.metrics.push_back(m + "_lo");
    loading.metrics.push_back(m + "_hi");
  }
  out.metrics = metrics_by_run(*side.db, loading, out.runs);
  return out;
}

struct Value {
  double value = 0;
  std::optional<double> lo, hi;
  std::string unit;
};

// Each configuration leaf's values over `runs` (canonical JSON; "" for a run that lacks it).
std::map<std::string, std::set<std::string>> leaf_values(const std::vector<StoredRun>& runs) {
  std::map<std::string, std::set<std::string>> values;
  for (const auto& run : runs)
    for (const auto& [k, v] : flatten_object(run.record.config)) values[k];
  for (const auto& run : runs) {
    std::map<std::string, std::string> leaves;
    for (const auto& [k, v] : flatten_object(run.record.config)) leaves[k] = canonical_json(v);
    for (auto& [k, set] : values) set.insert(leaves.count(k) ? leaves[k] : "");
  }
  return values;
}

// The metrics of one run by identity, intervals folded into their metric.
std::map<std::string, Value> values_of(const std::vector<MetricRow>& rows, std::vector<std::string>& order) {
  std::map<std::string, const MetricRow*> all;
  for (const auto& m : rows) all.emplace(metric_id(m.name, m), &m);
  std::map<std::string, Value> out;
  for (const auto& m : rows) {
    const auto strip = [&](std::string_view suffix) -> std::optional<std::string> {
      if (m.name.size() <= suffix.size() || !m.name.ends_with(suffix)) return std::nullopt;
      return m.name.substr(0, m.name.size() - suffix.size());
    };
    const auto base = strip("_lo") ? strip("_lo") : strip("_hi");
    if (base && all.count(metric_id(*base, m))) continue;  // folded into its metric below
    const std::string id = metric_id(m.name, m);
    Value v{m.value, std::nullopt, std::nullopt, m.unit};
    if (const auto lo = all.find(metric_id(m.name + "_lo", m)); lo != all.end()) v.lo = lo->second->value;
    if (const auto hi = all.find(metric_id(m.name + "_hi", m)); hi != all.end()) v.hi = hi->second->value;
    if (out.emplace(id, v).second) order.push_back(id);
  }
  return out;
}

json maybe(const std::optional<double>& v) { return v ? json(*v) : json(); }

}  // namespace

Comparison compare_runs(const CompareSide& a, const CompareSide& b, const std::vector<std::string>& ignore) {
  for (const auto& key : ignore) {
    bool known = false;
    for (const CompareSide* side : {&a, &b}) {
      RunQuery query;
      query.kind = side->selection.kind;
      for (const auto& run : side->db->find_runs(query)) known = known || has_path(run.record.config, key);
    }
    if (!known) throw_bad_usage("--ignore", key, "a configuration key of the compared runs");
  }
  auto runs_a = select_runs(*a.db, a.selection, "--where");
  auto runs_b = select_runs(*b.db, b.selection, a.db == b.db ? "--vs" : "--where");
  Comparison result;
  // A key with one value on each side, a different one on each, can pair nothing: it is what the
  // sides are (fabric=A vs fabric=B and what the fabric implies, another calibration): set aside.
  // Per kind: a whatif and a deferral run never pair, and share few keys.
  std::map<std::string, std::set<std::string>> skip;  // kind -> leaves
  std::set<std::string> kinds;
  for (const auto& r : runs_a) kinds.insert(r.record.kind);
  for (const auto& kind : kinds) {
    const auto of_kind = [&kind](const std::vector<StoredRun>& runs) {
      std::vector<StoredRun> out;
      for (const auto& r : runs)
        if (r.record.kind == kind) out.push_back(r);
      return out;
    };
    const auto ka = of_kind(runs_a), kb = of_kind(runs_b);
    if (kb.empty()) continue;
    const auto values_a = leaf_values(ka), values_b = leaf_values(kb);
    std::set<std::string> leaves;
    for (const auto& [k, v] : values_a) leaves.insert(k);
    for (const auto& [k, v] : values_b) leaves.insert(k);
    for (const auto& k : leaves) {
      const auto ia = values_a.find(k), ib = values_b.find(k);
      const std::string va = ia == values_a.end() ? "" : ia->second.size() == 1 ? *ia->second.begin() : "\n";
      const std::string vb = ib == values_b.end() ? "" : ib->second.size() == 1 ? *ib->second.begin() : "\n";
      if (va != "\n" && vb != "\n" && va != vb) {
        skip[kind].insert(k);
        // Shown as written: a string without its JSON quotes, an absent key as "-".
        const auto shown = [](const std::string& v) {
          return v.empty() ? std::string("-") : v.front() == '"' ? json::parse(v).get<std::string>() : v;
        };
        const bool listed = std::any_of(result.side_keys.begin(), result.side_keys.end(),
                                        [&](const Comparison::SideKey& s) { return s.key == k; });
        if (!listed) result.side_keys.push_back({k, shown(va), shown(vb)});
      }
    }
    for (const auto& k : ignore)
      for (const auto& leaf : leaves)
        if (leaf == k || leaf.starts_with(k + ".")) skip[kind].insert(leaf);
  }
  const Side sa = index_side(a, std::move(runs_a), skip);
  const Side sb = index_side(b, std::move(runs_b), skip);
  result.superseded = sa.superseded + sb.superseded;

  std::vector<std::pair<const StoredRun*, const StoredRun*>> pairs;
  for (const auto& [key, i] : sa.by_key) {
    const auto it = sb.by_key.find(key);
    if (it == sb.by_key.end()) {
      ++result.only_a;
    } else {
      pairs.emplace_back(&sa.runs[i], &sb.runs[it->second]);
    }
  }
  std::sort(pairs.begin(), pairs.end(), [](const auto& x, const auto& y) { return x.first->id < y.first->id; });
  result.matched = static_cast<int>(pairs.size());
  result.only_b = static_cast<int>(sb.runs.size()) - result.matched;

  if (pairs.empty()) {
    // Among the kinds both sides have (none in common: the kind is what differs).
    std::set<std::string> kinds_b, common;
    for (const auto& r : sb.runs) kinds_b.insert(r.record.kind);
    for (const auto& k : kinds) if (kinds_b.count(k)) common.insert(k);
    std::vector<StoredRun> ra, rb;
    for (const auto& r : sa.runs) if (common.count(r.record.kind)) ra.push_back(r);
    for (const auto& r : sb.runs) if (common.count(r.record.kind)) rb.push_back(r);
    if (common.empty() && !sa.runs.empty() && !sb.runs.empty()) result.differing_keys.emplace_back("kind");
    auto xa = leaf_values(ra), xb = leaf_values(rb);
    std::set<std::string> leaves;
    for (const auto& [k, v] : xa) leaves.insert(k);
    for (const auto& [k, v] : xb) leaves.insert(k);
    for (const auto& k : leaves) {
      const auto& x = xa[k];
      const auto& y = xb[k];
      if (std::none_of(x.begin(), x.end(), [&](const std::string& v) { return y.count(v) > 0; }))
        result.differing_keys.push_back(k);
    }
  }

  std::set<std::string> config_columns, label_columns;
  for (const auto& [ra, rb] : pairs) {
    for (const auto& [key, value] : flatten_object(ra->record.config)) config_columns.insert(column_of(key));
    for (const auto* run : {ra, rb})
      for (const auto& m : (run == ra ? sa : sb).metrics.at(run->id))
        for (const auto& [key, value] : flatten_object(m.labels)) label_columns.insert("label." + key);
  }
  Table& t = result.table;
  t.columns = {"kind"};
  t.columns.insert(t.columns.end(), config_columns.begin(), config_columns.end());
  for (const char* c : {"metric", "unit", "rank", "step"}) t.columns.emplace_back(c);
  t.columns.insert(t.columns.end(), label_columns.begin(), label_columns.end());
  for (const char* c : {"a", "b", "diff", "diff_pct", "a_lo", "a_hi", "b_lo", "b_hi", "overlap", "run_a", "run_b"})
    t.columns.emplace_back(c);
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < t.columns.size(); ++i) index[t.columns[i]] = i;

  std::map<std::string, std::set<std::string>> seen_values;  // per config column, for varying_keys
  for (const auto& [ra, rb] : pairs) {
    std::vector<json> base(t.columns.size());
    base[0] = ra->record.kind;
    for (const auto& [key, value] : flatten_object(ra->record.config)) {
      base[index.at(column_of(key))] = value;
      seen_values[column_of(key)].insert(canonical_json(value));
    }
    base[index.at("run_a")] = ra->id;
    base[index.at("run_b")] = rb->id;
    std::vector<std::string> order_a, order_b;
    const auto va = values_of(sa.metrics.at(ra->id), order_a);
    const auto vb = values_of(sb.metrics.at(rb->id), order_b);
    for (const auto& id : order_b)
      if (!va.count(id)) order_a.push_back(id);
    // Metric rows of either side, A's order first; the identity gives back name, rank, step, labels.
    std::map<std::string, const MetricRow*> rows;
    for (const auto& m : sa.metrics.at(ra->id)) rows.emplace(metric_id(m.name, m), &m);
    for (const auto& m : sb.metrics.at(rb->id)) rows.emplace(metric_id(m.name, m), &m);
    for (const auto& id : order_a) {
      const MetricRow& m = *rows.at(id);
      auto row = base;
      row[index.at("metric")] = m.name;
      row[index.at("rank")] = optional_int(m.rank);
      row[index.at("step")] = optional_int(m.step);
      for (const auto& [key, value] : flatten_object(m.labels)) row[index.at("label." + key)] = value;
      const auto ia = va.find(id);
      const auto ib = vb.find(id);
      row[index.at("unit")] = ia != va.end() ? ia->second.unit : ib->second.unit;
      if (ia != va.end()) {
        row[index.at("a")] = ia->second.value;
        row[index.at("a_lo")] = maybe(ia->second.lo);
        row[index.at("a_hi")] = maybe(ia->second.hi);
      }
      if (ib != vb.end()) {
        row[index.at("b")] = ib->second.value;
        row[index.at("b_lo")] = maybe(ib->second.lo);
        row[index.at("b_hi")] = maybe(ib->second.hi);
      }
      if (ia != va.end() && ib != vb.end()) {
        const Value& x = ia->second;
        const Value& y = ib->second;
        row[index.at("diff")] = y.value - x.value;
        if (x.value != 0) row[index.at("diff_pct")] = 100.0 * (y.value - x.value) / std::fabs(x.value);
        // An interval needs both ends; a side without one is its point.
        const bool xi = x.lo && x.hi, yi = y.lo && y.hi;
        if (xi || yi) {
          const double xl = xi ? *x.lo : x.value, xh = xi ? *x.hi : x.value;
          const double yl = yi ? *y.lo : y.value, yh = yi ? *y.hi : y.value;
          row[index.at("overlap")] = xl <= yh && yl <= xh;
        }
      }
      t.rows.push_back(std::move(row));
    }
  }
  for (const auto& [column, values] : seen_values)
    if (values.size() > 1) result.varying_keys.push_back(column);
  return result;
}

}  // namespace dionsim::analysis
