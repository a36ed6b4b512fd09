#include "optimizer/deferral.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <numbers>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "common/error.hpp"
#include "common/resources.hpp"
#include "optimizer/bf16.hpp"
#include "optimizer/capped.hpp"
#include "optimizer/momentum_rows.hpp"

namespace dionsim::opt {

namespace {

std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

// The step loop shared by both representations: norms -> all-gather layout -> the optimizer's
// select_capped_winners -> pack_capped_into per rank -> EF decay of applied rows, waiting times.
GroupRun run_group(const GroupPlan& g, std::int64_t steps, MomentumRows& rows, int threads) {
  const std::int64_t w = g.Np / g.pr, N = g.N, S = g.rows, pl = g.pl, pr = g.pr, B = g.B;
  GroupRun run;
  run.per_step_rank.assign(at(steps), std::vector<StepCounts>(at(w)));
  std::vector<float> keys(at(N * S));
  std::vector<std::uint8_t> kept(at(N * S));
  std::vector<std::int32_t> wait(at(N * S), 0);
  const int workers = std::max(1, threads);
  std::vector<WaitStats> waits(at(workers));
  std::vector<std::int64_t> applied(at(workers), 0);
  for (std::int64_t t = 0; t < steps; ++t) {
    rows.accumulate(t, keys, threads);
    const CappedWinners winners = select_winners(keys, w, N, S, pl, g.k_tot, threads);
    pack_all_ranks(keys, winners, S, pr, B, kept, run.per_step_rank[at(t)], threads);
    parallel_chunks(N, threads, [&](std::int64_t b, std::int64_t e, int worker) {
      WaitStats& ws = waits[at(worker)];
      for (std::int64_t m = b; m < e; ++m) {
        for (std::int64_t i = 0; i < S; ++i) {
          const std::int64_t r = i / pl;
          const bool winner = winners.is_winner(r, m, i - r * pl);
          std::int32_t& wt = wait[at(m * S + i)];
          if (kept[at(m * S + i)] != 0) {
            if (rows.decay(m, i)) ++applied[at(worker)];
            if (wt > 0) ++ws.hist[at(std::min<std::int64_t>(wt, kMaxWait))];
            wt = 0;
          } else if (winner) {
            ++wt;  // deferred: no decay, keeps accumulating
          } else if (wt > 0) {
            ++ws.abandoned;
            wt = 0;
          }
        }
      }
    });
  }
  for (const auto& ws : waits) run.waits.merge(ws);
  for (std::int64_t a : applied) run.applied_rows += a;
  run.waits.censored += std::count_if(wait.begin(), wait.end(), [](std::int32_t v) { return v > 0; });
  return run;
}

// Shortest round-trip text of a number for error messages ("1.5", not "1.500000").
std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

double normal_pdf(double z) { return std::exp(-0.5 * z * z) / std::sqrt(2.0 * std::numbers::pi); }
double normal_sf(double z) { return 0.5 * std::erfc(z / std::numbers::sqrt2); }

std::int64_t a2a_bytes(const DeferralConfig& c, std::optional<double> capacity) {
  PlanConfig pc = c.plan;
  pc.capacity_factor = capacity;
  return make_plan(c.inventory, pc).a2a_payload_bytes;
}

Plan capped_plan(const DeferralConfig& c) { return make_plan(c.inventory, c.plan); }

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  // Nearest rank: the smallest value with at least q of the sample at or below it.
  const auto idx = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(idx, 1, v.size()) - 1];
}

}  // namespace

DeferralMode parse_deferral_mode(std::string_view text, std::string_view flag) {
  if (text == "exact") return DeferralMode::exact;
  if (text == "reduced") return DeferralMode::reduced;
  if (text == "auto") return DeferralMode::automatic;
  throw_bad_usage(flag, text, "exact, reduced or auto");
}

std::string_view to_string(DeferralMode m) {
  switch (m) {
    case DeferralMode::exact: return "exact";
    case DeferralMode::reduced: return "reduced";
    case DeferralMode::automatic: return "auto";
  }
  return "?";
}

void WaitStats::merge(const WaitStats& other) {
  for (std::size_t i = 0; i < hist.size(); ++i) hist[i] += other.hist[i];
  censored += other.censored;
  abandoned += other.abandoned;
}

PlanConfig DeferralConfig::capped_plan_defaults() {
  PlanConfig pc;
  pc.world = 2;
  pc.scope = Scope::global_capped;
  return pc;
}

void validate(const DeferralConfig& c) {
  if (c.plan.scope != Scope::global_capped) throw std::invalid_argument("deferral: the plan's scope must be global_capped");
  if (c.plan.world < 2) throw_bad_usage("--world", std::to_string(c.plan.world), "an integer >= 2 (world 1 has no capped path)");
  check_fraction(c.plan.fraction, "--fraction");
  check_capacity_factor(c.plan.capacity_factor, "--capacity-factor");
  if (!(c.ef >= 0.0 && c.ef <= 1.0)) throw_bad_usage("--ef", num(c.ef), "a number in [0, 1]");
  if (c.plan.world > (1 << 20)) throw_bad_usage("--world", std::to_string(c.plan.world), "an integer in [2, 1048576]");
  if (c.steps < 1 || c.steps > 1000000) throw_bad_usage("--steps", std::to_string(c.steps), "an integer in [1, 1000000]");
  if (c.trials < 1 || c.trials > 10000) throw_bad_usage("--trials", std::to_string(c.trials), "an integer in [1, 10000]");
  if (c.stream.kind == StreamKind::replay && (!c.stream.replay || c.stream.replay->groups.empty())) {
    throw_bad_usage("--norms", c.stream.text, "replay:DB with gradient row statistics loaded from DB");
  }
  if (c.stream.kind == StreamKind::skew_rank && c.stream.rank >= c.plan.world) {
    throw_bad_usage("--norms", c.stream.text, "skew:rank=R with R < world (" + std::to_string(c.plan.world) + ")");
  }
}

GroupRun simulate_group_exact(const GroupPlan& g, double ef, Dtype momentum_dtype, std::int64_t steps,
                              const GradientFill& grad, int threads) {
  if (g.path != Path::capped_packed) throw std::invalid_argument("simulate_group_exact: group is not capped_packed");
  const auto rows = exact_rows(g.N, g.rows, g.cols, ef, momentum_dtype, grad);
  return run_group(g, steps, *rows, threads);
}

GroupRun simulate_group(const GroupPlan& g, std::int64_t group_index, const DeferralConfig& c, std::int64_t trial,
                        DeferralMode mode, int threads) {
  std::vector<std::int64_t> matrices(at(g.N));
  std::iota(matrices.begin(), matrices.end(), std::int64_t{0});
  const auto rows = stream_momentum(stream_rows(c.stream, c.seed, trial, group_index, matrices, g.rows, g.cols, c.plan.world),
                                    g.rows, g.cols, c.ef, c.momentum_dtype, mode != DeferralMode::reduced);
  return run_group(g, c.steps, *rows, threads);
}

double analytic_deferred_rows(const GroupPlan& g, std::int64_t world) {
  const std::int64_t S = g.rows;
  const double kt = static_cast<double>(g.k_tot);
  const double fpc = S > 1 ? (static_cast<double>(S) - kt) / (static_cast<double>(S) - 1.0) : 0.0;
  double deferred = 0.0;
  for (std::int64_t r = 0; r < world; ++r) {
    const std::int64_t L = shard_rows(S, world, r);
    const double p = static_cast<double>(L) / static_cast<double>(S);
    const double cap = static_cast<double>(std::min(g.B, g.pr * L));
    for (std::int64_t d = 0; d < world; ++d) {
      const double n = static_cast<double>(std::clamp<std::int64_t>(g.N - d * g.pr, 0, g.pr));
      if (n == 0.0 || L == 0) continue;
      const double mu = n * kt * p;
      const double sigma = std::sqrt(n * kt * p * (1.0 - p) * fpc);
      if (sigma <= 0.0) {
        deferred += std::max(0.0, mu - cap);
        continue;
      }
      const double z = (cap - mu) / sigma;
      deferred += sigma * normal_pdf(z) - (cap - mu) * normal_sf(z);
    }
  }
  return deferred;
}

PlanDeferral analytic_deferral(const Plan& plan) {
  PlanDeferral out;
  for (const GroupPlan& g : plan.groups) {
    if (g.path != Path::capped_packed) continue;
    ++out.packed_groups;
    out.deferred_rows += analytic_deferred_rows(g, plan.config.world);
    out.winner_rows += g.N * g.k_tot;
  }
  return out;
}

DeferralSummary run_deferral(const DeferralConfig& c) {
  validate(c);
  const auto t0 = std::chrono::steady_clock::now();
  const Plan plan = capped_plan(c);
  DeferralSummary out;
  std::vector<std::int64_t> packed;
  std::int64_t elements = 0;
  for (std::size_t i = 0; i < plan.groups.size(); ++i) {
    const GroupPlan& g = plan.groups[i];
    if (g.path != Path::capped_packed) {
      ++out.routed_groups;
      continue;
    }
    packed.push_back(static_cast<std::int64_t>(i));
    elements += g.N * g.rows * g.cols;
    out.packed_rows += g.N * g.rows;
    out.group_c.push_back(g.c);
  }
  out.packed_groups = static_cast<std::int64_t>(packed.size());
  out.mode = c.mode != DeferralMode::automatic ? c.mode
             : elements <= c.exact_max_elements ? DeferralMode::exact
                                                : DeferralMode::reduced;
  {
    // What the run will hold at once, refused by name before it is allocated: the momentum of
    // every concurrently simulated group (exact: full rows; reduced: a few floats per row) and
    // the per-step, per-rank counters of every trial.
    std::int64_t largest = 0, largest_rows = 0;
    for (const std::int64_t gi : packed) {
      const GroupPlan& g = plan.groups[at(gi)];
      largest = std::max(largest, g.N * g.rows * g.cols);
      largest_rows = std::max(largest_rows, g.N * g.rows);
    }
    const double concurrent = static_cast<double>(std::max<std::int64_t>(1, std::min<std::int64_t>(c.threads, c.trials * out.packed_groups)));
    const double group_bytes = out.mode == DeferralMode::exact ? 8.0 * static_cast<double>(largest) + 16.0 * static_cast<double>(largest_rows)
                                                               : 24.0 * static_cast<double>(largest_rows);
    require_memory(concurrent * group_bytes, "--mode", to_string(out.mode), "the momentum of the groups simulated at once");
    require_memory(static_cast<double>(c.trials) * static_cast<double>(c.steps) * static_cast<double>(c.plan.world) *
                       2.0 * sizeof(StepCounts),
                   "--steps", std::to_string(c.steps), "the per-step counters of every trial and rank");
  }
  // Tasks = (trial, group); with fewer tasks than threads the threads go inside the group.
  const std::int64_t tasks = c.trials * out.packed_groups;
  const int outer = static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(c.threads, tasks)));
  const int inner = std::max(1, c.threads / outer);
  std::vector<GroupRun> runs(at(tasks));
  std::atomic<std::int64_t> next{0};
  auto worker = [&] {
    for (std::int64_t t = next++; t < tasks; t = next++) {
      const std::int64_t trial = t / out.packed_groups, gi = packed[at(t % out.packed_groups)];
      runs[at(t)] = simulate_group(plan.groups[at(gi)], gi, c, trial, out.mode, inner);
    }
  };
  run_threads(outer, [&](int) { worker(); });

  std::vector<double> step_fraction;
  out.per_step_mean.assign(at(c.steps), 0.0);
  std::int64_t any = 0;
  out.counters.assign(at(c.trials), std::vector<std::vector<StepCounts>>(at(c.steps), std::vector<StepCounts>(at(c.plan.world))));
  for (std::int64_t trial = 0; trial < c.trials; ++trial) {
    for (std::int64_t s = 0; s < c.steps; ++s) {
      StepCounts sum;
      auto& ranks = out.counters[at(trial)][at(s)];
      for (std::int64_t gi = 0; gi < out.packed_groups; ++gi) {
        const auto& rcs = runs[at(trial * out.packed_groups + gi)].per_step_rank[at(s)];
        for (std::size_t r = 0; r < rcs.size(); ++r) {
          sum.winner_rows += rcs[r].winner_rows;
          sum.deferred_rows += rcs[r].deferred_rows;
          ranks[r].winner_rows += rcs[r].winner_rows;
          ranks[r].deferred_rows += rcs[r].deferred_rows;
        }
      }
      out.winner_rows += sum.winner_rows;
      out.deferred_rows += sum.deferred_rows;
      const double f = sum.winner_rows > 0 ? static_cast<double>(sum.deferred_rows) / static_cast<double>(sum.winner_rows) : 0.0;
      step_fraction.push_back(f);
      out.per_step_mean[at(s)] += f / static_cast<double>(c.trials);
      any += sum.deferred_rows > 0 ? 1 : 0;
    }
  }
  for (const GroupRun& r : runs) {
    out.waits.merge(r.waits);
    out.applied_rows += r.applied_rows;
  }
  const double row_steps = static_cast<double>(out.packed_rows) * static_cast<double>(c.steps * c.trials);
  if (out.winner_rows > 0) {
    out.deferred_fraction = static_cast<double>(out.deferred_rows) / static_cast<double>(out.winner_rows);
    out.nominal_fraction = static_cast<double>(out.winner_rows) / row_steps;
    out.effective_fraction = static_cast<double>(out.applied_rows) / row_steps;
  }
  out.analytic_deferred_fraction = analytic_deferral(plan).fraction();
  out.step_p50 = quantile(step_fraction, 0.50);
  out.step_p99 = quantile(step_fraction, 0.99);
  out.step_max = step_fraction.empty() ? 0.0 : *std::max_element(step_fraction.begin(), step_fraction.end());
  out.steps_with_deferral = static_cast<double>(any) / static_cast<double>(c.steps * c.trials);
  out.a2a_payload_bytes = plan.a2a_payload_bytes;
  out.a2a_payload_bytes_c1 = a2a_bytes(c, 1.0);
  out.extra_bytes = out.a2a_payload_bytes - out.a2a_payload_bytes_c1;
  out.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

std::int64_t recommend_max_evaluations(double c_max, double resolution) {
  std::int64_t n = 2;
  for (double a = 1.0, b = c_max; b - a > resolution; b = 0.5 * (a + b)) ++n;  // the widths of the bisection
  return n;
}

Recommendation recommend_capacity(const DeferralConfig& config, double target, double c_max, double resolution,
                                  const EvaluationHook& before_each) {
  Recommendation rec;
  rec.world = config.plan.world;
  DeferralConfig c = config;
  auto eval = [&](double cf) {
    if (before_each) before_each(cf);
    c.plan.capacity_factor = cf;
    ++rec.evaluations;
    return run_deferral(c);
  };
  DeferralSummary hi = eval(c_max);
  if (hi.deferred_fraction > target) {
    rec.deferred_fraction = hi.deferred_fraction;
    return rec;
  }
  DeferralSummary lo = eval(1.0);
  if (lo.deferred_fraction <= target) {
    rec.capacity_factor = 1.0;
    rec.deferred_fraction = lo.deferred_fraction;
    rec.extra_bytes = lo.extra_bytes;
    return rec;
  }
  double a = 1.0, b = c_max;  // deferral(a) > target >= deferral(b)
  while (b - a > resolution) {
    const double mid = 0.5 * (a + b);
    DeferralSummary s = eval(mid);
    if (s.deferred_fraction <= target) {
      b = mid;
      hi = s;
    } else {
      a = mid;
    }
  }
  rec.capacity_factor = b;
  rec.deferred_fraction = hi.deferred_fraction;
  rec.extra_bytes = hi.extra_bytes;
  return rec;
}

}  // namespace dionsim::opt
