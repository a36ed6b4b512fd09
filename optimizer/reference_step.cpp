#include "optimizer/reference_step.hpp"
#include "common/resources.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <map>
#include <stdexcept>
#include <thread>

#include "optimizer/bf16.hpp"
#include "optimizer/capped.hpp"
#include "optimizer/newton_schulz.hpp"

namespace dionsim::opt {

namespace {

std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

// Runs fn(i) for i in [0, n) on up to `threads` workers. Work items touch disjoint data, so the
// result does not depend on the thread count or the schedule.
void parallel_for(std::int64_t n, int threads, const std::function<void(std::int64_t)>& fn) {
  const int t = static_cast<int>(std::min<std::int64_t>(std::max(1, threads), n));
  if (t <= 1) {
    for (std::int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<std::int64_t> next{0};
  // run_threads: an exception in a worker (bad_alloc) reaches the caller instead of terminating.
  run_threads(t, [&](int) {
    for (std::int64_t i = next++; i < n; i = next++) fn(i);
  });
}

// One rank's copy of one parameter: rows [row0, row0 + rows) of the global matrix.
struct Shard {
  std::int64_t row0 = 0, rows = 0, cols = 0;
  std::vector<float> X, M, V;  // V: NorDion2 variance_neuron [rows] (param dtype)
};

using Bits = std::vector<std::uint16_t>;

}  // namespace

struct ReferenceOptimizer::Impl {
  StepConfig cfg;
  std::vector<ParamSpec> params;
  std::vector<std::vector<Shard>> rank_state;  // [rank][param]
  std::vector<std::vector<std::size_t>> group_members;
  std::vector<GroupPlan> plans;
  std::vector<std::vector<RankStepStats>> stats;  // [rank][step]
  std::vector<std::vector<std::int64_t>> applied;  // [param] last step
  SimTransport transport;
  bool fsdp = false;

  explicit Impl(const StepConfig& c) : cfg(c), transport(c.plan.world) {}

  [[nodiscard]] float round_p(float v) const { return cfg.dtype == Dtype::bfloat16 ? round_bf16(v) : v; }
  [[nodiscard]] std::int64_t W() const { return cfg.plan.world; }

  // fp32 constants as the reference's 0-dim fp32 tensors compute them (§2.7).
  [[nodiscard]] float decay_factor() const {
    return 1.0f - static_cast<float>(cfg.lr) * static_cast<float>(cfg.weight_decay);
  }
  [[nodiscard]] float adjusted_lr(const ParamSpec& p) const {
    const float lr = static_cast<float>(cfg.lr);
    const double R = static_cast<double>(p.rows), C = static_cast<double>(p.cols);
    switch (cfg.adjust_lr) {
      case AdjustLr::none: return lr;
      case AdjustLr::spectral_norm: return lr * static_cast<float>(std::sqrt(R / C));
      case AdjustLr::rms_norm: return lr * 0.2f * static_cast<float>(std::sqrt(std::max(R, C)));
    }
    return lr;
  }

  // L1 norm of a row of M in the momentum dtype (fp32 accumulation; bf16 momentum rounds the result).
  [[nodiscard]] float row_l1(const Shard& s, std::int64_t row) const {
    float acc = 0.0f;
    const float* m = s.M.data() + row * s.cols;
    for (std::int64_t j = 0; j < s.cols; ++j) acc += std::abs(m[j]);
    return round_p(acc);
  }

  void accumulate(std::size_t p, const std::vector<float>& grad) {
    for (std::int64_t r = 0; r < W(); ++r) {
      Shard& s = rank_state[at(r)][p];
      const float* g = grad.data() + s.row0 * s.cols;
      for (std::size_t e = 0; e < s.M.size(); ++e) s.M[e] = round_p(s.M[e] + round_p(g[e]));  // §2.1, §2.10.1
    }
  }

  // NorDion2 normalization (§2.8) of `rows` rows of O (fp32, row-major, cols wide); V_rows are the
  // matching variance entries, updated in place (param dtype) where `update[i]`.
  void normalize(std::vector<float>& O, std::int64_t rows, std::int64_t cols, std::vector<float*> V_rows,
                 const std::vector<bool>& update) const {
    double f0 = 0.0;
    for (float v : O) f0 += static_cast<double>(v) * v;
    const float F0 = static_cast<float>(std::sqrt(f0));
    const float w = 1.0f - static_cast<float>(cfg.muon_beta2);
    double f1 = 0.0;
    for (std::int64_t i = 0; i < rows; ++i) {
      float* o = O.data() + i * cols;
      double ss = 0.0;
      for (std::int64_t j = 0; j < cols; ++j) ss += static_cast<double>(o[j]) * o[j];
      const float nu = static_cast<float>(ss / static_cast<double>(cols));
      const float v_old = *V_rows[at(i)];
      const float v_new = v_old + w * (nu - v_old);  // torch.lerp
      if (update[at(i)]) *V_rows[at(i)] = round_p(v_new);
      const float denom = std::sqrt(v_new) + 1e-8f;
      for (std::int64_t j = 0; j < cols; ++j) {
        o[j] /= denom;
        f1 += static_cast<double>(o[j]) * o[j];
      }
    }
    const float scale = F0 / std::max(static_cast<float>(std::sqrt(f1)), 1e-8f);
    for (float& v : O) v *= scale;
  }

  // Masked post of global / global_capped (§2.5, §2.7, §2.8): U is the rank's [rows, C] shard of
  // bf16 values, zero except at applied rows.
  void masked_post(Shard& s, const ParamSpec& p, const std::vector<float>& U, std::vector<std::int64_t>& applied_rows) {
    const float a = decay_factor();
    const float neg_lr = -adjusted_lr(p);
    const float ef = round_p(static_cast<float>(cfg.ef));  // ef_decay.to(M.dtype)
    for (float& x : s.X) x = round_p(x * a);
    std::vector<bool> sel(at(s.rows), false);
    for (std::int64_t i = 0; i < s.rows; ++i) {
      for (std::int64_t j = 0; j < s.cols && !sel[at(i)]; ++j) sel[at(i)] = U[at(i * s.cols + j)] != 0.0f;
      if (!sel[at(i)]) continue;
      applied_rows.push_back(s.row0 + i);
      for (std::int64_t j = 0; j < s.cols; ++j) s.M[at(i * s.cols + j)] = round_p(s.M[at(i * s.cols + j)] * ef);
    }
    if (cfg.plan.optimizer == OptimizerKind::nordion2) {
      std::vector<float> O = U;  // fp32
      std::vector<float*> V_rows;
      for (std::int64_t i = 0; i < s.rows; ++i) V_rows.push_back(&s.V[at(i)]);
      normalize(O, s.rows, s.cols, V_rows, sel);
      for (std::size_t e = 0; e < O.size(); ++e) s.X[e] = round_p(s.X[e] + round_p(neg_lr * O[e]));
    } else {
      // (neg_lr * u) with u bf16 and neg_lr a 0-dim fp32 tensor stays bf16, then casts (§2.10.6).
      for (std::size_t e = 0; e < U.size(); ++e) s.X[e] = round_p(s.X[e] + round_bf16(neg_lr * U[e]));
    }
  }

  // Indexed post of local / unsharded paths (dion2_post_orthogonalize): weight decay everywhere,
  // then U (cast to param dtype, scaled) added into the selected slices. NorDion2 normalizes first.
  void indexed_post(Shard& s, const ParamSpec& p, std::vector<float> U, const std::vector<std::int64_t>& sel,
                    bool rows, std::vector<std::int64_t>& applied_rows) {
    const float a = decay_factor();
    const float neg_lr = -adjusted_lr(p);
    const std::int64_t k = static_cast<std::int64_t>(sel.size());
    if (cfg.plan.optimizer == OptimizerKind::nordion2 && k > 0) {
      std::vector<float*> V_rows;
      for (std::int64_t t = 0; t < k; ++t) V_rows.push_back(&s.V[at(sel[at(t)])]);
      normalize(U, k, s.cols, V_rows, std::vector<bool>(at(k), true));
    }
    for (float& x : s.X) x = round_p(x * a);
    for (std::int64_t t = 0; t < k; ++t) {
      const std::int64_t idx = sel[at(t)];
      applied_rows.push_back(rows ? s.row0 + idx : idx);
      if (rows) {
        for (std::int64_t j = 0; j < s.cols; ++j) {
          float& x = s.X[at(idx * s.cols + j)];
          x = round_p(x + round_p(neg_lr * round_p(U[at(t * s.cols + j)])));
        }
      } else {
        for (std::int64_t i = 0; i < s.rows; ++i) {  // U is [rows, k]
          float& x = s.X[at(i * s.cols + idx)];
          x = round_p(x + round_p(neg_lr * round_p(U[at(i * k + t)])));
        }
      }
    }
  }

  void orthogonalize(std::vector<float>& m, std::int64_t rows, std::int64_t cols) const {
    orthogonalize_bf16(m, rows, cols, cfg.plan.ns, static_cast<float>(cfg.epsilon));
  }

  // ---- local (sharded), §3.1 ----
  void run_local(std::int64_t gi) {
    const GroupPlan& g = plans[at(gi)];
    const auto& members = group_members[at(gi)];
    const std::int64_t C = g.cols, k = g.k, pr = g.pr, w = W();
    std::vector<std::vector<std::vector<std::int64_t>>> sel(at(w));  // [rank][j] selected local rows
    std::vector<std::vector<Bits>> send(at(w), std::vector<Bits>(at(w), Bits(at(pr * k * C), 0)));
    const float ef = static_cast<float>(cfg.ef);
    for (std::int64_t r = 0; r < w; ++r) {
      for (std::size_t j = 0; j < members.size(); ++j) {
        Shard& s = rank_state[at(r)][members[j]];
        std::vector<float> keys(at(s.rows));
        for (std::int64_t i = 0; i < s.rows; ++i) keys[at(i)] = row_l1(s, i);
        sel[at(r)].push_back(top_k_rows(keys, std::min(k, s.rows)));
        const std::int64_t m = static_cast<std::int64_t>(j);
        Bits& chunk = send[at(r)][at(m / pr)];
        const auto& rows = sel[at(r)].back();
        for (std::size_t t = 0; t < rows.size(); ++t) {
          float* mrow = s.M.data() + rows[t] * C;
          std::uint16_t* out = chunk.data() + ((m % pr) * k + static_cast<std::int64_t>(t)) * C;
          for (std::int64_t c = 0; c < C; ++c) {
            out[c] = to_bf16(mrow[c]);            // pre-decay copy as bf16
            mrow[c] = round_p(mrow[c] * ef);       // EF decay, fp32 product rounded once (§2.10.5)
          }
        }
      }
    }
    auto recv = transport.all_to_all("a2a_fwd", gi, send);
    send.clear();
    std::vector<std::vector<Bits>> back(at(w), std::vector<Bits>(at(w), Bits(at(pr * k * C), 0)));
    parallel_for(w * pr, cfg.threads, [&](std::int64_t item) {
      const std::int64_t d = item / pr, j = item % pr;
      std::vector<float> buf(at(g.kw * C));
      for (std::int64_t s = 0; s < w; ++s) {
        const std::uint16_t* in = recv[at(d)][at(s)].data() + j * k * C;
        for (std::int64_t e = 0; e < k * C; ++e) buf[at(s * k * C + e)] = from_bf16(in[e]);
      }
      orthogonalize(buf, g.kw, C);
      for (std::int64_t s = 0; s < w; ++s) {
        std::uint16_t* out = back[at(d)][at(s)].data() + j * k * C;
        for (std::int64_t e = 0; e < k * C; ++e) out[e] = to_bf16(buf[at(s * k * C + e)]);
      }
    });
    recv.clear();
    auto ret = transport.all_to_all("a2a_rev", gi, back);
    back.clear();
    parallel_for(static_cast<std::int64_t>(members.size()), cfg.threads, [&](std::int64_t m) {
      for (std::int64_t r = 0; r < w; ++r) {
        Shard& s = rank_state[at(r)][members[at(m)]];
        const auto& rows = sel[at(r)][at(m)];
        const std::uint16_t* in = ret[at(r)][at(m / pr)].data() + (m % pr) * k * C;
        std::vector<float> U(rows.size() * at(C));
        for (std::size_t e = 0; e < U.size(); ++e) U[e] = from_bf16(in[e]);  // first k_r rows
        indexed_post(s, params[members[at(m)]], std::move(U), rows, true, applied[members[at(m)]]);
      }
    });
  }

  // ---- global (sharded, incl. routed capped), §3.2 ----
  void run_global(std::int64_t gi) {
    const GroupPlan& g = plans[at(gi)];
    const auto& members = group_members[at(gi)];
    const std::int64_t C = g.cols, pl = g.pl, pr = g.pr, w = W();
    std::vector<std::vector<Bits>> send(at(w), std::vector<Bits>(at(w), Bits(at(pr * pl * C), 0)));
    for (std::int64_t r = 0; r < w; ++r) {
      for (std::size_t j = 0; j < members.size(); ++j) {
        const Shard& s = rank_state[at(r)][members[j]];
        const std::int64_t m = static_cast<std::int64_t>(j);
        std::uint16_t* out = send[at(r)][at(m / pr)].data() + (m % pr) * pl * C;
        for (std::size_t e = 0; e < s.M.size(); ++e) out[e] = to_bf16(s.M[e]);  // zero rows pad to pl
      }
    }
    auto recv = transport.all_to_all("a2a_fwd", gi, send);
    send.clear();
    std::vector<std::vector<Bits>> back(at(w), std::vector<Bits>(at(w), Bits(at(pr * pl * C), 0)));
    const std::int64_t N = static_cast<std::int64_t>(members.size());
    parallel_for(w * pr, cfg.threads, [&](std::int64_t item) {
      const std::int64_t d = item / pr, j = item % pr;
      if (d * pr + j >= N) return;  // virtual matrix: zeros in, zeros out
      const std::int64_t Sp = w * pl;
      std::vector<float> full(at(Sp * C));
      for (std::int64_t s = 0; s < w; ++s) {
        const std::uint16_t* in = recv[at(d)][at(s)].data() + j * pl * C;
        for (std::int64_t e = 0; e < pl * C; ++e) full[at(s * pl * C + e)] = from_bf16(in[e]);
      }
      // bf16 keys: L1 of the bf16 rows, rounded to bf16 (§2.2); ties -> lower assembled row (§9.1).
      std::vector<float> keys(at(Sp));
      for (std::int64_t i = 0; i < Sp; ++i) {
        keys[at(i)] = global_row_key(std::span<const float>(full).subspan(at(i * C), at(C)));
      }
      const auto rows = top_k_rows(keys, g.k_tot);
      std::vector<float> sub(rows.size() * at(C));
      for (std::size_t t = 0; t < rows.size(); ++t) {
        std::copy_n(full.begin() + rows[t] * C, C, sub.begin() + static_cast<std::ptrdiff_t>(t * at(C)));
      }
      orthogonalize(sub, static_cast<std::int64_t>(rows.size()), C);
      for (std::size_t t = 0; t < rows.size(); ++t) {
        const std::int64_t i = rows[t];
        std::uint16_t* out = back[at(d)][at(i / pl)].data() + (j * pl + i % pl) * C;
        for (std::int64_t c = 0; c < C; ++c) out[c] = to_bf16(sub[t * at(C) + at(c)]);
      }
    });
    recv.clear();
    auto ret = transport.all_to_all("a2a_rev", gi, back);
    back.clear();
    parallel_for(N, cfg.threads, [&](std::int64_t m) {
      for (std::int64_t r = 0; r < w; ++r) {
        Shard& s = rank_state[at(r)][members[at(m)]];
        const std::uint16_t* in = ret[at(r)][at(m / pr)].data() + (m % pr) * pl * C;
        std::vector<float> U(s.X.size());
        for (std::size_t e = 0; e < U.size(); ++e) U[e] = from_bf16(in[e]);  // first L_r rows
        masked_post(s, params[members[at(m)]], U, applied[members[at(m)]]);
      }
    });
  }

  // ---- global_capped packed, §4 ----
  void run_capped(std::int64_t gi, std::int64_t step_index) {
    const GroupPlan& g = plans[at(gi)];
    const auto& members = group_members[at(gi)];
    const std::int64_t C = g.cols, pl = g.pl, pr = g.pr, w = W(), B = g.B;
    const std::int64_t N = static_cast<std::int64_t>(members.size());
    // Phase A: norms [N, L_r] of the accumulated momentum, widened to fp32, padded with -1.
    std::vector<std::vector<float>> norms(at(w)), padded(at(w));
    for (std::int64_t r = 0; r < w; ++r) {
      const std::int64_t L = rank_state[at(r)][members[0]].rows;
      for (std::size_t pidx : members) {
        const Shard& s = rank_state[at(r)][pidx];
        for (std::int64_t i = 0; i < L; ++i) norms[at(r)].push_back(row_l1(s, i));
      }
      padded[at(r)] = pad_norms(norms[at(r)], N, L, pl);
    }
    const std::vector<float> gathered = transport.all_gather("norms_allgather", gi, padded);
    // Every rank computes the winners from identical bytes; one computation serves all.
    const CappedWinners winners = select_capped_winners(gathered, w, N, pl, g.k_tot);
    std::vector<CappedPack> packs;
    std::vector<std::vector<Bits>> send(at(w), std::vector<Bits>(at(w), Bits(at((1 + B) * C))));
    for (std::int64_t r = 0; r < w; ++r) {
      const std::int64_t L = rank_state[at(r)][members[0]].rows;
      packs.push_back(pack_capped(norms[at(r)], winners, r, L, pr, B));
      RankStepStats& st = stats[at(r)][at(step_index)];
      st.packed = true;
      st.winner_rows += packs.back().winner_rows;
      st.deferred_rows += packs.back().deferred_rows;
      for (std::int64_t d = 0; d < w; ++d) {
        write_capped_chunk(packs.back(), d, C, send[at(r)][at(d)], [&](std::int64_t m, std::int64_t row, std::uint16_t* out) {
          const Shard& s = rank_state[at(r)][members[at(m)]];
          for (std::int64_t c = 0; c < C; ++c) out[c] = to_bf16(s.M[at(row * C + c)]);
        });
      }
    }
    auto recv = transport.all_to_all("a2a_fwd", gi, send);
    send.clear();
    std::vector<std::vector<Bits>> back(at(w), std::vector<Bits>(at(w), Bits(at(B * C))));
    parallel_for(w, cfg.threads, [&](std::int64_t d) {
      std::vector<std::span<const std::uint16_t>> in;
      for (std::int64_t s = 0; s < w; ++s) in.emplace_back(recv[at(d)][at(s)]);
      Bits buffer(at(pr * g.kw * C));
      const CappedAssembly assembly = assemble_capped(in, pr, B, C, g.kw, buffer);
      std::vector<float> m(at(g.kw * C));
      for (std::int64_t j = 0; j < pr; ++j) {
        std::uint16_t* bj = buffer.data() + j * g.kw * C;
        for (std::size_t e = 0; e < m.size(); ++e) m[e] = from_bf16(bj[e]);
        orthogonalize(m, g.kw, C);
        for (std::size_t e = 0; e < m.size(); ++e) bj[e] = to_bf16(m[e]);
      }
      std::vector<std::span<std::uint16_t>> out;
      for (std::int64_t s = 0; s < w; ++s) out.emplace_back(back[at(d)][at(s)]);
      repack_capped(assembly, buffer, B, C, out);
    });
    recv.clear();
    auto ret = transport.all_to_all("a2a_rev", gi, back);
    back.clear();
    // Unpack on every rank (sender side), then the masked post per matrix.
    std::vector<std::vector<std::vector<float>>> U(at(w), std::vector<std::vector<float>>(at(N)));
    for (std::int64_t r = 0; r < w; ++r) {
      for (std::int64_t m = 0; m < N; ++m) U[at(r)][at(m)].assign(rank_state[at(r)][members[at(m)]].X.size(), 0.0f);
      std::vector<std::span<const std::uint16_t>> in;
      for (std::int64_t d = 0; d < w; ++d) in.emplace_back(ret[at(r)][at(d)]);
      unpack_capped(packs[at(r)], in, C, [&](std::int64_t m, std::int64_t row, std::span<const std::uint16_t> words) {
        for (std::int64_t c = 0; c < C; ++c) U[at(r)][at(m)][at(row * C + c)] = from_bf16(words[at(c)]);
      });
    }
    ret.clear();
    parallel_for(N, cfg.threads, [&](std::int64_t m) {
      for (std::int64_t r = 0; r < w; ++r) {
        masked_post(rank_state[at(r)][members[at(m)]], params[members[at(m)]], U[at(r)][at(m)], applied[members[at(m)]]);
      }
    });
  }

  // ---- unsharded: DDP (all-gather of orthogonalized results) or single (no collective), §3.4 ----
  void run_unsharded(std::int64_t gi) {
    const GroupPlan& g = plans[at(gi)];
    const auto& members = group_members[at(gi)];
    const std::int64_t w = W(), N = static_cast<std::int64_t>(members.size()), k = g.k;
    const std::int64_t R = g.rows, C = g.cols;
    const std::int64_t sub_n = g.ns_rows * g.ns_cols;
    const float ef = static_cast<float>(cfg.ef);
    // Every rank selects on its replica and decays M (indexed EF), then orthogonalizes its own
    // matrices (DDP) or all of them (single).
    std::vector<std::vector<std::vector<std::int64_t>>> sel(at(w), std::vector<std::vector<std::int64_t>>(at(N)));
    std::vector<std::vector<std::vector<float>>> subs(at(w), std::vector<std::vector<float>>(at(N)));
    for (std::int64_t r = 0; r < w; ++r) {
      for (std::int64_t m = 0; m < N; ++m) {
        Shard& s = rank_state[at(r)][members[at(m)]];
        std::vector<float> keys(at(g.select_rows ? R : C), 0.0f);
        for (std::int64_t i = 0; i < R; ++i) {
          for (std::int64_t c = 0; c < C; ++c) keys[at(g.select_rows ? i : c)] += std::abs(s.M[at(i * C + c)]);
        }
        for (float& v : keys) v = round_p(v);
        sel[at(r)][at(m)] = top_k_rows(keys, k);
        auto& sub = subs[at(r)][at(m)];
        sub.resize(at(sub_n));
        const auto& idx = sel[at(r)][at(m)];
        for (std::int64_t t = 0; t < k; ++t) {
          if (g.select_rows) {
            for (std::int64_t c = 0; c < C; ++c) {
              float& mv = s.M[at(idx[at(t)] * C + c)];
              sub[at(t * C + c)] = round_bf16(mv);
              mv = round_p(mv * ef);
            }
          } else {
            for (std::int64_t i = 0; i < R; ++i) {
              float& mv = s.M[at(i * C + idx[at(t)])];
              sub[at(i * k + t)] = round_bf16(mv);
              mv = round_p(mv * ef);
            }
          }
        }
      }
    }
    const bool ddp = g.path == Path::ddp;
    const std::int64_t pr = g.pr;
    std::vector<std::vector<float>> results;  // [rank][pr * sub_n] (DDP) ; unused for single
    if (ddp) {
      std::vector<std::vector<std::uint16_t>> inputs(at(w), std::vector<std::uint16_t>(at(pr * sub_n), 0));
      parallel_for(w * pr, cfg.threads, [&](std::int64_t item) {
        const std::int64_t r = item / pr, j = item % pr, m = r * pr + j;
        if (m >= N) return;  // virtual
        std::vector<float> x = subs[at(r)][at(m)];
        orthogonalize(x, g.ns_rows, g.ns_cols);
        for (std::int64_t e = 0; e < sub_n; ++e) inputs[at(r)][at(j * sub_n + e)] = to_bf16(x[at(e)]);
      });
      const auto gathered = transport.all_gather("ddp_allgather", gi, inputs);
      for (std::int64_t r = 0; r < w; ++r) {
        for (std::int64_t m = 0; m < N; ++m) {
          auto& x = subs[at(r)][at(m)];
          for (std::int64_t e = 0; e < sub_n; ++e) x[at(e)] = from_bf16(gathered[at(m * sub_n + e)]);
        }
      }
    } else {
      parallel_for(w * N, cfg.threads, [&](std::int64_t item) {
        orthogonalize(subs[at(item / N)][at(item % N)], g.ns_rows, g.ns_cols);
      });
    }
    parallel_for(N, cfg.threads, [&](std::int64_t m) {
      for (std::int64_t r = 0; r < w; ++r) {
        std::vector<std::int64_t> rows;
        indexed_post(rank_state[at(r)][members[at(m)]], params[members[at(m)]], subs[at(r)][at(m)],
                     sel[at(r)][at(m)], g.select_rows, r == 0 ? applied[members[at(m)]] : rows);
      }
    });
  }
};

PlanConfig StepConfig::plan_config() const {
  PlanConfig pc = plan;
  pc.momentum_bytes = pc.param_bytes = dtype == Dtype::float32 ? 4 : 2;
  return pc;
}

ReferenceOptimizer::ReferenceOptimizer(const StepConfig& config, std::vector<ParamSpec> params,
                                       const std::vector<std::vector<float>>& initial)
    : impl_(std::make_unique<Impl>(config)) {
  Impl& s = *impl_;
  const PlanConfig pc = config.plan_config();
  validate(pc);
  if (initial.size() != params.size()) throw std::invalid_argument("one initial matrix per parameter");
  s.params = std::move(params);
  s.fsdp = config.plan.sharded && config.plan.world > 1;
  // Shape groups in first-occurrence order (§1.3).
  std::map<std::pair<std::int64_t, std::int64_t>, std::size_t> index;
  for (std::size_t i = 0; i < s.params.size(); ++i) {
    const auto key = std::make_pair(s.params[i].rows, s.params[i].cols);
    auto it = index.find(key);
    if (it == index.end()) {
      index.emplace(key, s.group_members.size());
      s.group_members.push_back({i});
    } else {
      s.group_members[it->second].push_back(i);
    }
  }
  for (const auto& members : s.group_members) {
    const ParamSpec& p = s.params[members[0]];
    s.plans.push_back(plan_group(p.rows, p.cols, static_cast<std::int64_t>(members.size()), pc));
  }
  s.rank_state.assign(at(config.plan.world), std::vector<Shard>(s.params.size()));
  for (std::int64_t r = 0; r < config.plan.world; ++r) {
    for (std::size_t i = 0; i < s.params.size(); ++i) {
      const ParamSpec& p = s.params[i];
      if (static_cast<std::int64_t>(initial[i].size()) != p.rows * p.cols) {
        throw std::invalid_argument("initial matrix of " + p.name + " has the wrong size");
      }
      Shard& sh = s.rank_state[at(r)][i];
      sh.cols = p.cols;
      sh.row0 = s.fsdp ? shard_begin(p.rows, config.plan.world, r) : 0;
      sh.rows = s.fsdp ? shard_rows(p.rows, config.plan.world, r) : p.rows;
      sh.X.assign(initial[i].begin() + sh.row0 * p.cols, initial[i].begin() + (sh.row0 + sh.rows) * p.cols);
      for (float& x : sh.X) x = s.round_p(x);
      sh.M.assign(sh.X.size(), 0.0f);
      if (config.plan.optimizer == OptimizerKind::nordion2) sh.V.assign(at(sh.rows), 0.0f);
    }
  }
  s.stats.assign(at(config.plan.world), {});
}

ReferenceOptimizer::~ReferenceOptimizer() = default;

void ReferenceOptimizer::step(const std::vector<std::vector<float>>& grads) {
  Impl& s = *impl_;
  if (grads.size() != s.params.size()) throw std::invalid_argument("one gradient per parameter");
  s.transport.clear();
  s.applied.assign(s.params.size(), {});
  const std::int64_t step_index = static_cast<std::int64_t>(s.stats[0].size());
  for (auto& per_rank : s.stats) per_rank.emplace_back();
  for (std::size_t i = 0; i < s.params.size(); ++i) s.accumulate(i, grads[i]);
  for (std::int64_t gi = 0; gi < static_cast<std::int64_t>(s.plans.size()); ++gi) {
    switch (s.plans[at(gi)].path) {
      case Path::local: s.run_local(gi); break;
      case Path::global: s.run_global(gi); break;
      case Path::capped_packed: s.run_capped(gi, step_index); break;
      case Path::ddp:
      case Path::single: s.run_unsharded(gi); break;
    }
  }
  for (auto& rows : s.applied) std::sort(rows.begin(), rows.end());
}

std::vector<float> ReferenceOptimizer::weight(std::size_t param) const {
  const Impl& s = *impl_;
  if (!s.fsdp) return s.rank_state[0][param].X;
  std::vector<float> out;
  for (const auto& rank : s.rank_state) out.insert(out.end(), rank[param].X.begin(), rank[param].X.end());
  return out;
}

std::vector<float> ReferenceOptimizer::momentum(std::size_t param) const {
  const Impl& s = *impl_;
  if (!s.fsdp) return s.rank_state[0][param].M;
  std::vector<float> out;
  for (const auto& rank : s.rank_state) out.insert(out.end(), rank[param].M.begin(), rank[param].M.end());
  return out;
}

const std::vector<std::vector<RankStepStats>>& ReferenceOptimizer::stats() const { return impl_->stats; }
const std::vector<CollectiveRecord>& ReferenceOptimizer::last_collectives() const { return impl_->transport.records(); }
const std::vector<GroupPlan>& ReferenceOptimizer::groups() const { return impl_->plans; }
const std::vector<std::vector<std::size_t>>& ReferenceOptimizer::group_params() const { return impl_->group_members; }
const std::vector<std::vector<std::int64_t>>& ReferenceOptimizer::last_applied_rows() const { return impl_->applied; }

}  // namespace dionsim::opt
