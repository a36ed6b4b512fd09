// Multi-step deferral under iid N(0,1) gradients against the PyTorch reference measured on two
// H200s (issue 7): tests/deferral/data/reference_deferral_w2_iid.csv holds, per trial of 20 steps,
// the reference's CAPPED_STATS (microsoft/dion jcl/dion-capped-pooled, Dion2 global_capped,
// f = 0.25, ef_decay 0.95 and 0.5, world 2, FSDP2 row shards) summed over ranks: winner rows and
// deferred rows of steps 0-9 and 10-19 (provenance: data/README.md, docs/deferral.md).
//
// The engine's gradients are another random stream, so the comparison is of distributions: the
// mean per-trial deferred rows of K engine trials against the mean of the reference's T trials,
// |z| <= 3 with z = (mean_sim - mean_ref) / (sd_ref * sqrt(1/T + 1/K)) (sd_ref: the reference's
// per-trial standard deviation; same dynamics => same per-trial law). The same bound on the
// per-trial drift (deferred rows of steps 0-9 minus steps 10-19) checks the shape over the steps.
// Winner rows are deterministic (k_tot per matrix per step) and must match exactly.
//
// That the bound can fail: at ef_decay 0.5 two broken dynamics fall outside it (the [slow] case):
// no EF decay (ef = 1, the engine's own knob) and "deferred winners are decayed too" (a mutant loop
// below that differs from the engine's update in that one rule; with the right rule it passes the
// same bound). At ef_decay 0.95 neither is distinguishable in 20 steps (measured, docs/deferral.md):
// the decay is too weak there to move deferral by more than a few percent.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "optimizer/capped.hpp"
#include "optimizer/deferral.hpp"
#include "optimizer/inventory.hpp"
#include "optimizer/plan.hpp"

using namespace dionsim;
using namespace dionsim::opt;

namespace {

struct TrialCounts {
  std::int64_t winners = 0, first = 0, second = 0;  // deferred rows of steps 0-9 and 10-19
};

// key: "gpt-512x4/0.95/1.0" or "gpt-512x4/0.95/auto" (model/ef/capacity_factor)
std::map<std::string, std::vector<TrialCounts>> load_reference() {
  const std::string path = std::string(DIONSIM_SOURCE_DIR) + "/tests/deferral/data/reference_deferral_w2_iid.csv";
  std::ifstream in(path);
  REQUIRE(in.good());
  std::map<std::string, std::vector<TrialCounts>> out;
  std::string line;
  std::getline(in, line);
  REQUIRE(line == "model,ef,capacity_factor,trial,winner_rows,deferred_rows_steps_0_9,deferred_rows_steps_10_19");
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream ss(line);
    std::string model, ef, c, trial, w, a, b;
    std::getline(ss, model, ',');
    std::getline(ss, ef, ',');
    std::getline(ss, c, ',');
    std::getline(ss, trial, ',');
    std::getline(ss, w, ',');
    std::getline(ss, a, ',');
    std::getline(ss, b, ',');
    out[model + "/" + ef + "/" + c].push_back({std::stoll(w), std::stoll(a), std::stoll(b)});
  }
  return out;
}

struct Moments {
  double mean = 0.0, sd = 0.0;
};
template <class F>
Moments moments(const std::vector<TrialCounts>& v, F f) {
  double s = 0.0, s2 = 0.0;
  for (const auto& t : v) s += f(t);
  const double n = static_cast<double>(v.size()), mean = s / n;
  for (const auto& t : v) s2 += (f(t) - mean) * (f(t) - mean);
  return {mean, v.size() > 1 ? std::sqrt(s2 / (n - 1.0)) : 0.0};
}
double total(const TrialCounts& t) { return static_cast<double>(t.first + t.second); }
double drift(const TrialCounts& t) { return static_cast<double>(t.first - t.second); }

struct Verdict {
  double z_total = 0.0, z_drift = 0.0;
  bool winners_equal = true;
};
Verdict compare(const std::vector<TrialCounts>& ref, const std::vector<TrialCounts>& sim) {
  REQUIRE(ref.size() >= 100);
  REQUIRE(!sim.empty());
  Verdict v;
  for (const auto& t : sim) v.winners_equal = v.winners_equal && t.winners == ref.front().winners;
  const double T = static_cast<double>(ref.size()), K = static_cast<double>(sim.size());
  const Moments rt = moments(ref, total), st = moments(sim, total);
  const Moments rd = moments(ref, drift), sd = moments(sim, drift);
  v.z_total = (st.mean - rt.mean) / (rt.sd * std::sqrt(1.0 / T + 1.0 / K));
  v.z_drift = (sd.mean - rd.mean) / (rd.sd * std::sqrt(1.0 / T + 1.0 / K));
  UNSCOPED_INFO("reference: " << ref.size() << " trials, deferred/trial " << rt.mean << " (sd " << rt.sd
                              << "), drift " << rd.mean << " (sd " << rd.sd << ")");
  UNSCOPED_INFO("simulated: " << sim.size() << " trials, deferred/trial " << st.mean << ", drift " << sd.mean
                              << "; z_total " << v.z_total << ", z_drift " << v.z_drift);
  return v;
}

std::vector<TrialCounts> from_summary(const DeferralSummary& s) {
  std::vector<TrialCounts> out;
  for (const auto& trial : s.counters) {
    TrialCounts t;
    for (std::size_t step = 0; step < trial.size(); ++step) {
      for (const StepCounts& c : trial[step]) {
        t.winners += c.winner_rows;
        (step < 10 ? t.first : t.second) += c.deferred_rows;
      }
    }
    out.push_back(t);
  }
  return out;
}

DeferralConfig config(std::int64_t hidden, std::int64_t layers, std::optional<double> c, std::int64_t trials,
                      double ef = 0.95) {
  DeferralConfig cfg;
  cfg.inventory = gpt_layout(hidden, layers);
  cfg.plan.world = 2;
  cfg.plan.fraction = 0.25;
  cfg.plan.capacity_factor = c;
  cfg.ef = ef;
  cfg.steps = 20;
  cfg.trials = trials;
  cfg.seed = 20261130;
  cfg.mode = DeferralMode::exact;
  return cfg;
}

std::string key(std::int64_t hidden, std::int64_t layers, const char* ef, std::optional<double> c) {
  return "gpt-" + std::to_string(hidden) + "x" + std::to_string(layers) + "/" + ef + "/" + (c ? "1.0" : "auto");
}

// A second update loop on full fp32 rows, built from the optimizer's select_and_pack_capped: M += G,
// sequential fp32 L1 keys, winners and pooled pack, then EF decay of the kept winners, or (the
// mutant) of every winner, deferred ones included. Gradients: N(0,1) from mt19937.
std::vector<TrialCounts> loop_trials(const DeferralConfig& cfg, bool decay_deferred_too) {
  const Plan plan = make_plan(cfg.inventory, cfg.plan);
  const auto ef = static_cast<float>(cfg.ef);
  std::vector<TrialCounts> out;
  for (std::int64_t trial = 0; trial < cfg.trials; ++trial) {
    TrialCounts tc;
    std::mt19937 rng(static_cast<std::uint32_t>(cfg.seed + 977 * trial));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (const GroupPlan& g : plan.groups) {
      if (g.path != Path::capped_packed) continue;
      const std::int64_t N = g.N, S = g.rows, C = g.cols, w = cfg.plan.world;
      std::vector<float> M(static_cast<std::size_t>(N * S * C), 0.0f), keys(static_cast<std::size_t>(N * S));
      for (std::int64_t step = 0; step < cfg.steps; ++step) {
        for (std::int64_t row = 0; row < N * S; ++row) {
          float acc = 0.0f;
          for (std::int64_t j = 0; j < C; ++j) {
            float& v = M[static_cast<std::size_t>(row * C + j)];
            v += normal(rng);
            acc += std::abs(v);
          }
          keys[static_cast<std::size_t>(row)] = acc;
        }
        std::vector<std::vector<float>> norms(static_cast<std::size_t>(w));
        for (std::int64_t r = 0; r < w; ++r) {
          const std::int64_t L = shard_rows(S, w, r), b = shard_begin(S, w, r);
          for (std::int64_t m = 0; m < N; ++m) {
            for (std::int64_t i = 0; i < L; ++i) norms[static_cast<std::size_t>(r)].push_back(keys[static_cast<std::size_t>(m * S + b + i)]);
          }
        }
        const CappedSelection sel = select_and_pack_capped(norms, S, N, g.k_tot, g.pr, g.B);
        for (std::int64_t r = 0; r < w; ++r) {
          const CappedPack& p = sel.packs[static_cast<std::size_t>(r)];
          tc.winners += p.winner_rows;
          (step < 10 ? tc.first : tc.second) += p.deferred_rows;
          const std::int64_t L = shard_rows(S, w, r), b = shard_begin(S, w, r);
          for (std::int64_t m = 0; m < N; ++m) {
            for (std::int64_t i = 0; i < L; ++i) {
              const bool kept = p.kept[static_cast<std::size_t>(m * L + i)] != 0;
              if (!(kept || (decay_deferred_too && sel.winners.is_winner(r, m, i)))) continue;
              float* row = M.data() + (m * S + b + i) * C;
              for (std::int64_t j = 0; j < C; ++j) row[j] *= ef;
            }
          }
        }
      }
    }
    out.push_back(tc);
  }
  return out;
}

void check_inside(const Verdict& v) {
  CHECK(v.winners_equal);
  CHECK(std::abs(v.z_total) <= 3.0);
  CHECK(std::abs(v.z_drift) <= 3.0);
}

}  // namespace

TEST_CASE("multi-step iid deferral matches the PyTorch reference on 2 GPUs: gpt-512x4 at pinned and auto c",
          "[deferral][gpu-reference]") {
  const auto ref = load_reference();
  SECTION("ef_decay 0.95, c = 1") {
    check_inside(compare(ref.at(key(512, 4, "0.95", 1.0)), from_summary(run_deferral(config(512, 4, 1.0, 3)))));
  }
  SECTION("ef_decay 0.95, auto c") {
    check_inside(compare(ref.at(key(512, 4, "0.95", {})), from_summary(run_deferral(config(512, 4, {}, 3)))));
  }
  SECTION("ef_decay 0.5, c = 1") {
    check_inside(compare(ref.at(key(512, 4, "0.5", 1.0)), from_summary(run_deferral(config(512, 4, 1.0, 3, 0.5)))));
  }
}

TEST_CASE("multi-step iid deferral matches the PyTorch reference on 2 GPUs: gpt-1024x2 at pinned and auto c",
          "[deferral][gpu-reference][slow]") {
  const auto ref = load_reference();
  SECTION("ef_decay 0.95, c = 1") {
    check_inside(compare(ref.at(key(1024, 2, "0.95", 1.0)), from_summary(run_deferral(config(1024, 2, 1.0, 4)))));
  }
  SECTION("ef_decay 0.95, auto c") {
    check_inside(compare(ref.at(key(1024, 2, "0.95", {})), from_summary(run_deferral(config(1024, 2, {}, 4)))));
  }
  SECTION("ef_decay 0.5, c = 1") {
    check_inside(compare(ref.at(key(1024, 2, "0.5", 1.0)), from_summary(run_deferral(config(1024, 2, 1.0, 4, 0.5)))));
  }
}

TEST_CASE("broken dynamics fall outside the reference bound (gpt-512x4 at ef_decay 0.5 and c = 1)",
          "[deferral][gpu-reference][slow]") {
  const auto ref = load_reference().at(key(512, 4, "0.5", 1.0));
  SECTION("the second loop with the engine's rule (decay kept winners only) is inside the bound") {
    check_inside(compare(ref, loop_trials(config(512, 4, 1.0, 3, 0.5), false)));
  }
  SECTION("no EF decay (ef = 1): outside") {
    const Verdict v = compare(ref, from_summary(run_deferral(config(512, 4, 1.0, 3, 1.0))));
    CHECK(std::max(std::abs(v.z_total), std::abs(v.z_drift)) > 3.0);
  }
  SECTION("deferred winners decayed too: outside") {
    const Verdict v = compare(ref, loop_trials(config(512, 4, 1.0, 3, 0.5), true));
    CHECK(std::max(std::abs(v.z_total), std::abs(v.z_drift)) > 3.0);
  }
}
