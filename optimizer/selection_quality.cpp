#include "optimizer/selection_quality.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>
#include <sstream>

#include "common/error.hpp"
#include "common/resources.hpp"
#include "optimizer/capped.hpp"
#include "optimizer/momentum_rows.hpp"

namespace dionsim::opt {

namespace {

std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Whole pools (destination d owns matrices [d*pool, (d+1)*pool)), evenly spread over the group,
// in ascending order (so a short last pool stays last), until the sample holds >= max_rows rows.
std::vector<std::int64_t> sample_matrices(std::int64_t N, std::int64_t pool, std::int64_t S, std::int64_t max_rows) {
  const std::int64_t pools = (N + pool - 1) / pool;
  const std::int64_t want = std::clamp<std::int64_t>((max_rows + pool * S - 1) / (pool * S), 1, pools);
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < want; ++i) {
    const std::int64_t d = i * pools / want;
    for (std::int64_t m = d * pool; m < std::min(N, (d + 1) * pool); ++m) out.push_back(m);
  }
  return out;
}

// Per (sampled) group: the counts every aggregate is built from.
struct GroupCounts {
  std::vector<std::int64_t> hits_per_step;  // [step], summed over sampled matrices
  std::int64_t hits = 0, applied = 0;
  double min_share = 1.0;
  double first_sum = 0.0, final_sum = 0.0;  // sums of per-matrix shares
  std::vector<std::int64_t> matrix_hits, matrix_applied;  // [matrix]
  std::vector<double> matrix_min, matrix_final;           // [matrix]
};

// One step's applied candidates of every sampled matrix ([n][S] flags), from the group's path.
void select_rows(const GroupPlan& g, std::int64_t w, std::int64_t n, const std::vector<float>& keys,
                 const MomentumRows& rows, std::vector<float>& gkeys, std::vector<std::uint8_t>& chosen,
                 std::vector<StepCounts>& counts, int threads) {
  const std::int64_t S = g.rows;
  std::fill(chosen.begin(), chosen.end(), std::uint8_t{0});
  auto mark = [&](std::int64_t m, std::int64_t row0, const std::vector<std::int64_t>& sel) {
    for (const std::int64_t i : sel) chosen[at(m * S + row0 + i)] = 1;
  };
  switch (g.path) {
    case Path::local:  // §3.1: every rank its own top-min(k, L_r), keys in the momentum dtype
      for (std::int64_t m = 0; m < n; ++m) {
        for (std::int64_t r = 0; r < w && shard_begin(S, w, r) < S; ++r) {
          const std::int64_t L = shard_rows(S, w, r), row0 = shard_begin(S, w, r);
          const std::span<const float> shard(keys.data() + m * S + row0, at(L));
          mark(m, row0, top_k_rows(shard, std::min(g.k, L)));
        }
      }
      return;
    case Path::global: {  // §3.2: top-k_tot of the assembled matrix on bf16 keys, lower row on ties
      rows.global_keys(gkeys, threads);
      for (std::int64_t m = 0; m < n; ++m) {
        mark(m, 0, top_k_rows(std::span<const float>(gkeys).subspan(at(m * S), at(S)), g.k_tot));
      }
      return;
    }
    case Path::capped_packed: {  // §4.3–4.4: exact winners, then the pooled pack keeps or defers
      const CappedWinners winners = select_winners(keys, w, n, S, g.pl, g.k_tot, threads);
      pack_all_ranks(keys, winners, S, g.pr, g.B, chosen, counts, threads);
      return;
    }
    case Path::ddp:
    case Path::single:  // §3.4: the whole matrix on every rank, k = k_tot
      for (std::int64_t m = 0; m < n; ++m) {
        mark(m, 0, top_k_rows(std::span<const float>(keys).subspan(at(m * S), at(S)), g.k));
      }
      return;
  }
}

// `n` matrices of group g held by `rows` (destination pools of g.pr matrices in order), `steps` steps.
GroupCounts simulate(const GroupPlan& g, std::int64_t w, std::int64_t n, MomentumRows& rows, std::int64_t steps,
                     int threads) {
  const std::int64_t S = g.rows;
  std::vector<float> keys(at(n * S)), gkeys(g.path == Path::global ? at(n * S) : 0);
  std::vector<std::uint8_t> truth(at(n * S)), chosen(at(n * S));
  std::vector<StepCounts> counts(at(w));
  GroupCounts out;
  out.hits_per_step.assign(at(steps), 0);
  out.matrix_hits.assign(at(n), 0);
  out.matrix_applied.assign(at(n), 0);
  out.matrix_min.assign(at(n), 1.0);
  out.matrix_final.assign(at(n), 0.0);
  const double kt = static_cast<double>(g.k_tot);
  for (std::int64_t t = 0; t < steps; ++t) {
    rows.accumulate(t, keys, threads);  // fp32 momentum: these keys are the fp32 L1 truth keys
    std::fill(truth.begin(), truth.end(), std::uint8_t{0});
    for (std::int64_t m = 0; m < n; ++m) {
      for (const std::int64_t i : top_k_rows(std::span<const float>(keys).subspan(at(m * S), at(S)), g.k_tot)) {
        truth[at(m * S + i)] = 1;
      }
    }
    select_rows(g, w, n, keys, rows, gkeys, chosen, counts, threads);
    for (std::int64_t m = 0; m < n; ++m) {
      std::int64_t hits = 0;
      for (std::int64_t i = 0; i < S; ++i) {
        if (chosen[at(m * S + i)] == 0 || !rows.decay(m, i)) continue;  // applied = kept and nonzero
        ++out.applied;
        ++out.matrix_applied[at(m)];
        hits += truth[at(m * S + i)];
      }
      const double share = static_cast<double>(hits) / kt;
      out.hits += hits;
      out.hits_per_step[at(t)] += hits;
      out.min_share = std::min(out.min_share, share);
      out.matrix_hits[at(m)] += hits;
      out.matrix_min[at(m)] = std::min(out.matrix_min[at(m)], share);
      if (t == 0) out.first_sum += share;
      if (t == steps - 1) {
        out.final_sum += share;
        out.matrix_final[at(m)] = share;
      }
    }
  }
  return out;
}

GroupQuality describe(const GroupPlan& g) {
  GroupQuality q;
  q.rows = g.rows;
  q.cols = g.cols;
  q.N = g.N;
  q.path = g.path;
  q.routed = g.routed;
  q.c = g.c;
  q.k_tot = g.k_tot;
  q.k = g.k;
  q.measured = g.select_rows;
  q.nominal_fraction = static_cast<double>(g.k_tot) / static_cast<double>(g.rows);
  return q;
}

void finish(GroupQuality& q, const GroupCounts& r, std::int64_t steps) {
  const auto n = static_cast<double>(q.sampled.size());
  const double kt = static_cast<double>(q.k_tot);
  q.truth_rows = static_cast<std::int64_t>(q.sampled.size()) * q.k_tot * steps;
  q.hit_rows = r.hits;
  q.applied_rows = r.applied;
  q.overlap_first = r.first_sum / n;
  q.overlap_final = r.final_sum / n;
  q.overlap_mean = static_cast<double>(r.hits) / static_cast<double>(q.truth_rows);
  q.overlap_min = r.min_share;
  q.overlap_per_step.clear();
  for (const std::int64_t h : r.hits_per_step) q.overlap_per_step.push_back(static_cast<double>(h) / (n * kt));
  q.precision = r.applied > 0 ? static_cast<double>(r.hits) / static_cast<double>(r.applied) : 0.0;
  q.effective_fraction = static_cast<double>(r.applied) / (n * static_cast<double>(q.rows) * static_cast<double>(steps));
  q.matrices.clear();
  for (std::size_t m = 0; m < q.sampled.size(); ++m) {
    const auto steps_d = static_cast<double>(steps);
    q.matrices.push_back({q.sampled[m], static_cast<double>(r.matrix_hits[m]) / (kt * steps_d), r.matrix_min[m],
                          r.matrix_final[m], static_cast<double>(r.matrix_applied[m]) / (static_cast<double>(q.rows) * steps_d)});
  }
}

}  // namespace

GroupQuality measure_group(const GroupPlan& g, std::int64_t world, const GradientFill& grad, std::int64_t steps,
                           double ef, int threads) {
  GroupQuality q = describe(g);
  if (!q.measured) return q;
  q.sampled.resize(at(g.N));
  std::iota(q.sampled.begin(), q.sampled.end(), std::int64_t{0});
  const auto rows = exact_rows(g.N, g.rows, g.cols, ef, Dtype::float32, grad);
  finish(q, simulate(g, world, g.N, *rows, steps, threads), steps);
  return q;
}

RowsMode parse_rows_mode(std::string_view text, std::string_view flag) {
  if (text == "exact") return RowsMode::exact;
  if (text == "reduced") return RowsMode::reduced;
  if (text == "auto") return RowsMode::automatic;
  throw_bad_usage(flag, text, "exact, reduced or auto");
}

std::string_view to_string(RowsMode m) {
  switch (m) {
    case RowsMode::exact: return "exact";
    case RowsMode::reduced: return "reduced";
    case RowsMode::automatic: return "auto";
  }
  return "?";
}

void validate(const SelectionQualityConfig& c) {
  validate(c.plan);
  if (c.plan.momentum_bytes != 4) {
    throw_bad_usage("--momentum-dtype", "bfloat16", "float32 (selection quality ranks on the fp32 L1 norm of fp32 momentum)");
  }
  if (!(c.ef >= 0.0 && c.ef <= 1.0)) throw_bad_usage("--ef", num(c.ef), "a number in [0, 1]");
  if (c.steps < 1 || c.steps > 100000) throw_bad_usage("--steps", std::to_string(c.steps), "an integer in [1, 100000]");
  if (c.max_sampled_rows < 1) {
    throw_bad_usage("--sampled-rows", std::to_string(c.max_sampled_rows), "an integer >= 1");
  }
  if (c.threads < 1) throw_bad_usage("--threads", std::to_string(c.threads), "an integer >= 1");
  if (c.stream.kind == StreamKind::replay && (!c.stream.replay || c.stream.replay->groups.empty())) {
    throw_bad_usage(c.stream_flag, c.stream.text, "replay:DB with gradient row statistics loaded from DB");
  }
  if (c.stream.kind == StreamKind::skew_rank && c.stream.rank >= c.plan.world) {
    throw_bad_usage(c.stream_flag, c.stream.text, "skew:rank=R with R < world (" + std::to_string(c.plan.world) + ")");
  }
}

SelectionQuality measure_selection_quality(const SelectionQualityConfig& c) {
  validate(c);
  const auto t0 = std::chrono::steady_clock::now();
  const Plan plan = make_plan(c.inventory, c.plan);
  SelectionQuality out;
  out.scope = c.plan.scope;
  out.capacity_factor = c.plan.capacity_factor;
  out.world = c.plan.world;
  out.fraction = c.plan.fraction;
  out.norms = c.stream.text;
  out.steps = c.steps;
  std::int64_t largest = 0, largest_rows = 0;
  for (const GroupPlan& g : plan.groups) {
    GroupQuality q = describe(g);
    if (q.measured) {
      q.sampled = sample_matrices(g.N, g.path == Path::capped_packed ? g.pr : 1, g.rows, c.max_sampled_rows);
      const auto n = static_cast<std::int64_t>(q.sampled.size());
      largest = std::max(largest, n * g.rows * g.cols);
      largest_rows = std::max(largest_rows, n * g.rows);
    }
    out.groups.push_back(std::move(q));
  }
  out.mode = c.mode != RowsMode::automatic ? c.mode : largest <= c.exact_max_elements ? RowsMode::exact : RowsMode::reduced;
  const bool exact = out.mode == RowsMode::exact;
  require_memory(exact ? 4.0 * static_cast<double>(largest) + 16.0 * static_cast<double>(largest_rows)
                       : 32.0 * static_cast<double>(largest_rows),
                 "--mode", to_string(out.mode), "the momentum of the sampled matrices");

  // Aggregates: a sampled matrix stands for N / n of its group's matrices.
  double truth_w = 0.0, hits_w = 0.0, applied_w = 0.0, rows_w = 0.0, first_w = 0.0, final_w = 0.0, mats_w = 0.0;
  std::vector<double> step_hits_w(at(c.steps), 0.0);
  double min_share = std::numeric_limits<double>::infinity();
  for (std::size_t gi = 0; gi < plan.groups.size(); ++gi) {
    GroupQuality& q = out.groups[gi];
    if (!q.measured) continue;
    const GroupPlan& g = plan.groups[gi];
    const auto n = static_cast<double>(q.sampled.size());
    const double steps = static_cast<double>(c.steps), kt = static_cast<double>(g.k_tot);
    auto rows = stream_momentum(stream_rows(c.stream, c.seed, 0, static_cast<std::int64_t>(gi), q.sampled, g.rows, g.cols,
                                            c.plan.world),
                                g.rows, g.cols, c.ef, Dtype::float32, exact);
    const GroupCounts r = simulate(g, c.plan.world, static_cast<std::int64_t>(q.sampled.size()), *rows, c.steps, c.threads);
    finish(q, r, c.steps);
    const double weight = static_cast<double>(g.N) / n;
    truth_w += weight * static_cast<double>(q.truth_rows);
    hits_w += weight * static_cast<double>(r.hits);
    applied_w += weight * static_cast<double>(r.applied);
    rows_w += weight * n * static_cast<double>(g.rows) * steps;
    first_w += weight * r.first_sum * kt;
    final_w += weight * r.final_sum * kt;
    mats_w += weight * n * kt;
    for (std::int64_t t = 0; t < c.steps; ++t) step_hits_w[at(t)] += weight * static_cast<double>(r.hits_per_step[at(t)]);
    min_share = std::min(min_share, r.min_share);
    out.sampled_matrices += static_cast<std::int64_t>(q.sampled.size());
    out.matrices += g.N;
  }
  if (truth_w > 0.0) {
    out.overlap_mean = hits_w / truth_w;
    out.overlap_first = first_w / mats_w;
    out.overlap_final = final_w / mats_w;
    out.overlap_min = min_share;
    for (const double h : step_hits_w) out.overlap_per_step.push_back(h / mats_w);
    out.precision = applied_w > 0.0 ? hits_w / applied_w : 0.0;
    out.effective_fraction = applied_w / rows_w;
    out.nominal_fraction = truth_w / rows_w;
  }
  out.sampled = out.sampled_matrices < out.matrices;
  out.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

std::vector<SelectionQuality> measure_scopes(const SelectionQualityConfig& config,
                                             const std::vector<std::optional<double>>& capacity_factors) {
  std::vector<SelectionQuality> out;
  SelectionQualityConfig c = config;
  for (const Scope s : {Scope::local, Scope::global}) {
    c.plan.scope = s;
    c.plan.capacity_factor.reset();
    out.push_back(measure_selection_quality(c));
  }
  c.plan.scope = Scope::global_capped;
  for (const auto& cf : capacity_factors) {
    c.plan.capacity_factor = cf;
    out.push_back(measure_selection_quality(c));
  }
  return out;
}

const SelectionQuality& SelectionQualityCache::get(const PlanConfig& plan) {
  std::ostringstream key;
  key << std::hexfloat << plan.world << ' ' << to_string(plan.scope) << ' ' << plan.fraction << ' '
      << (plan.capacity_factor ? *plan.capacity_factor : 0.0) << ' ' << to_string(plan.optimizer) << ' ' << plan.sharded
      << ' ' << plan.momentum_bytes;
  const auto it = done_.find(key.str());
  if (it != done_.end()) return it->second;
  SelectionQualityConfig c = base_;
  c.plan = plan;
  return done_.emplace(key.str(), measure_selection_quality(c)).first->second;
}

nlohmann::json to_json(const SelectionQuality& q) {
  nlohmann::json groups = nlohmann::json::array();
  for (const GroupQuality& g : q.groups) {
    nlohmann::json j = {{"rows", g.rows},
                        {"cols", g.cols},
                        {"N", g.N},
                        {"path", std::string(to_string(g.path))},
                        {"routed", g.routed},
                        {"c", g.c},
                        {"k", g.k},
                        {"k_tot", g.k_tot},
                        {"measured", g.measured},
                        {"sampled_matrices", static_cast<std::int64_t>(g.sampled.size())},
                        {"nominal_fraction", g.nominal_fraction}};
    if (g.measured) {
      j["overlap_first"] = g.overlap_first;
      j["overlap_mean"] = g.overlap_mean;
      j["overlap_min"] = g.overlap_min;
      j["overlap_final"] = g.overlap_final;
      j["precision"] = g.precision;
      j["effective_fraction"] = g.effective_fraction;
      nlohmann::json ms = nlohmann::json::array();
      for (const MatrixQuality& m : g.matrices) {
        ms.push_back({{"index", m.index},
                      {"overlap_mean", m.overlap_mean},
                      {"overlap_min", m.overlap_min},
                      {"overlap_final", m.overlap_final},
                      {"effective_fraction", m.effective_fraction}});
      }
      j["matrices"] = std::move(ms);
    }
    groups.push_back(std::move(j));
  }
  nlohmann::json out = {{"scope", std::string(to_string(q.scope))},
          {"capacity_factor", capacity_factor_text(q.capacity_factor)},
          {"world", q.world},
          {"fraction", q.fraction},
          {"norms", q.norms},
          {"steps", q.steps},
          {"mode", std::string(to_string(q.mode))},
          {"overlap_first", q.overlap_first},
          {"overlap_mean", q.overlap_mean},
          {"overlap_min", q.overlap_min},
          {"overlap_final", q.overlap_final},
          {"overlap_per_step", q.overlap_per_step},
          {"precision", q.precision},
          {"effective_fraction", q.effective_fraction},
          {"nominal_fraction", q.nominal_fraction},
          {"sampled", q.sampled},
          {"sampled_matrices", q.sampled_matrices},
          {"matrices", q.matrices},
          {"wall_ms", q.wall_ms},
          {"groups", std::move(groups)}};
  if (q.matrices == 0) {  // no row-selecting group (column selection only): nothing was measured
    for (const char* key : {"overlap_first", "overlap_mean", "overlap_min", "overlap_final", "precision",
                            "effective_fraction", "nominal_fraction"}) {
      out[key] = nullptr;
    }
  }
  return out;
}

}  // namespace dionsim::opt
