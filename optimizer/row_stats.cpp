#include "optimizer/row_stats.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <utility>

#include "common/error.hpp"
#include "optimizer/capped.hpp"

namespace dionsim::opt {

namespace {

std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

std::vector<double> quantiles_of(std::vector<double>& values) {
  std::sort(values.begin(), values.end());
  std::vector<double> q(kRowQuantiles);
  const double last = static_cast<double>(values.size() - 1);
  for (int i = 0; i < kRowQuantiles; ++i) {
    const double pos = last * i / (kRowQuantiles - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const std::size_t hi = std::min(lo + 1, values.size() - 1);
    q[at(i)] = values[lo] + (pos - static_cast<double>(lo)) * (values[hi] - values[lo]);
  }
  return q;
}

// Squared coefficient of variation of the L1 norm of a row of C iid N(0, s^2) entries:
// Var|z| / E|z|^2 / C = (1 - 2/pi) / (2/pi) / C.
double gaussian_l1_cv2(std::int64_t C) { return (std::numbers::pi / 2.0 - 1.0) / static_cast<double>(C); }

// Variance of the distribution given by a quantile vector (mean of squares minus square of mean,
// trapezoid rule over the probabilities).
std::pair<double, double> mean_var(std::span<const double> q) {
  double m = 0.0, m2 = 0.0;
  const double n = static_cast<double>(q.size() - 1);
  for (std::size_t i = 0; i + 1 < q.size(); ++i) {
    m += (q[i] + q[i + 1]) / 2.0 / n;
    m2 += (q[i] * q[i] + q[i + 1] * q[i + 1]) / 2.0 / n;
  }
  return {m, std::max(0.0, m2 - m * m)};
}

}  // namespace

std::vector<RowNormStats> gradient_row_stats(std::span<const ParamSpec> params,
                                             const std::vector<std::vector<std::vector<float>>>& grads,
                                             std::int64_t world) {
  std::vector<std::pair<std::int64_t, std::int64_t>> shapes;  // first-occurrence order
  for (const ParamSpec& p : params) {
    if (std::find(shapes.begin(), shapes.end(), std::pair{p.rows, p.cols}) == shapes.end()) {
      shapes.emplace_back(p.rows, p.cols);
    }
  }
  std::vector<RowNormStats> out;
  for (std::size_t step = 0; step < grads.size(); ++step) {
    for (const auto& [S, C] : shapes) {
      const std::int64_t pl = padded_local_rows(S, world);
      for (std::int64_t r = 0; r < world; ++r) {
        const std::int64_t begin = std::min(S, r * pl), end = std::min(S, (r + 1) * pl);
        if (begin == end) continue;
        std::vector<double> l1;
        for (std::size_t p = 0; p < params.size(); ++p) {
          if (params[p].rows != S || params[p].cols != C) continue;
          const std::vector<float>& g = grads[step][p];
          for (std::int64_t i = begin; i < end; ++i) {
            double sum = 0.0;
            for (std::int64_t j = 0; j < C; ++j) sum += std::fabs(static_cast<double>(g[at(i * C + j)]));
            l1.push_back(sum);
          }
        }
        double mean = 0.0;
        for (const double v : l1) mean += v;
        mean /= static_cast<double>(l1.size());
        for (double& v : l1) v = mean > 0.0 ? v / mean : 1.0;
        out.push_back({static_cast<std::int64_t>(step), S, C, world, r, static_cast<std::int64_t>(l1.size()), mean,
                       quantiles_of(l1)});
      }
    }
  }
  return out;
}

double quantile_at(std::span<const double> q, double u) {
  const double pos = std::clamp(u, 0.0, 1.0) * static_cast<double>(q.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, q.size() - 1);
  return q[lo] + (pos - static_cast<double>(lo)) * (q[hi] - q[lo]);
}

double ReplayStats::row_scale(std::int64_t row, std::int64_t S, std::int64_t C, double u) const {
  const ReplayGroup* g = &groups.front();
  for (const ReplayGroup& candidate : groups) {
    if (candidate.rows == S && candidate.cols == C) {
      g = &candidate;
      break;
    }
    if (candidate.rows > g->rows) g = &candidate;
  }
  // The row at the same relative position of the recorded group, and the shard holding it.
  const std::int64_t recorded_row = g->rows == S ? row : row * g->rows / S;
  const std::int64_t shard = std::min(recorded_row / padded_local_rows(g->rows, g->world), g->world - 1);
  const auto& q = g->shard_quantiles[at(shard)];
  return g->shard_factor[at(shard)] * (q.empty() ? 1.0 : quantile_at(q, u));
}

ReplayStats make_replay(std::span<const RowNormStats> stats, const std::string& where) {
  if (stats.empty()) {
    throw_bad_input(where, "gradient row statistics", "none", "a run recorded by 'dionsim step --db' (or measure)");
  }
  // (rows, cols) -> step -> entries
  std::map<std::pair<std::int64_t, std::int64_t>, std::map<std::int64_t, std::vector<const RowNormStats*>>> by_group;
  std::vector<std::pair<std::int64_t, std::int64_t>> order;
  for (const RowNormStats& s : stats) {
    if (s.world < 1 || s.rank < 0 || s.rank >= s.world || s.row_count < 1 || s.quantiles.size() < 2) {
      throw_bad_input(where, "gradient row statistics",
                      "rank " + std::to_string(s.rank) + " of world " + std::to_string(s.world) + ", " +
                          std::to_string(s.quantiles.size()) + " quantiles",
                      "0 <= rank < world, >= 2 quantiles");
    }
    const auto key = std::pair{s.rows, s.cols};
    if (by_group.count(key) == 0) order.push_back(key);
    by_group[key][s.step].push_back(&s);
  }
  ReplayStats out;
  out.source = where;
  for (const auto& key : order) {
    const auto& steps = by_group[key];
    const std::int64_t world = steps.begin()->second.front()->world;
    ReplayGroup g{key.first, key.second, world, std::vector<double>(at(world), 0.0),
                  std::vector<std::vector<double>>(at(world))};
    std::vector<std::int64_t> seen(at(world), 0);
    for (const auto& [step, entries] : steps) {
      double total = 0.0;
      std::int64_t rows = 0;
      for (const RowNormStats* e : entries) {
        if (e->world != world) {
          throw_bad_input(where, "world", std::to_string(e->world),
                          "one world per shape group (" + std::to_string(world) + ")");
        }
        total += e->mean_l1 * static_cast<double>(e->row_count);
        rows += e->row_count;
      }
      const double group_mean = total / static_cast<double>(rows);
      for (const RowNormStats* e : entries) {
        auto& q = g.shard_quantiles[at(e->rank)];
        if (q.empty()) q.assign(e->quantiles.size(), 0.0);
        if (q.size() != e->quantiles.size()) {
          throw_bad_input(where, "quantiles", std::to_string(e->quantiles.size()) + " values",
                          std::to_string(q.size()) + " as in the other steps");
        }
        for (std::size_t i = 0; i < q.size(); ++i) q[i] += e->quantiles[i];
        g.shard_factor[at(e->rank)] += group_mean > 0.0 ? e->mean_l1 / group_mean : 1.0;
        ++seen[at(e->rank)];
      }
    }
    const double noise = gaussian_l1_cv2(g.cols);
    for (std::int64_t r = 0; r < world; ++r) {
      auto& q = g.shard_quantiles[at(r)];
      if (seen[at(r)] == 0) {
        g.shard_factor[at(r)] = 1.0;
        continue;
      }
      g.shard_factor[at(r)] /= static_cast<double>(seen[at(r)]);
      for (double& v : q) v /= static_cast<double>(seen[at(r)]);
      // Take out the spread Gaussian rows add by themselves: shrink around the mean so that the
      // variance of the scales is the recorded variance minus that of iid rows (never below 0).
      const auto [m, var] = mean_var(q);
      const double keep = var > 0.0 ? std::sqrt(std::max(0.0, 1.0 - noise * m * m / var)) : 0.0;
      for (double& v : q) v = std::max(0.0, m + (v - m) * keep);
    }
    out.groups.push_back(std::move(g));
  }
  return out;
}

}  // namespace dionsim::opt
