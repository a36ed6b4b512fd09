#include "optimizer/momentum_rows.hpp"

#include <cmath>
#include <numbers>

#include "optimizer/bf16.hpp"

namespace dionsim::opt {

namespace {

std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }

// Full rows in the momentum dtype, the CPU reference's arithmetic (reference_step.cpp: accumulate,
// row_l1, masked_post): bf16 rounds M + bf16(G), the fp32-accumulated L1 key, and M * bf16(ef).
class ExactRows final : public MomentumRows {
 public:
  ExactRows(std::int64_t N, std::int64_t S, std::int64_t C, double ef, Dtype dtype, GradientFill grad)
      : N_(N), S_(S), C_(C), bf16_(dtype == Dtype::bfloat16),
        ef_(bf16_ ? round_bf16(static_cast<float>(ef)) : static_cast<float>(ef)),  // ef_decay.to(M.dtype)
        grad_(std::move(grad)), M_(at(N * S * C), 0.0f) {}
  void accumulate(std::int64_t step, std::span<float> keys, int threads) override {
    parallel_chunks(N_, threads, [&](std::int64_t b, std::int64_t e, int) {
      std::vector<float> G(at(S_ * C_));
      for (std::int64_t m = b; m < e; ++m) {
        grad_(step, m, G);
        float* M = M_.data() + m * S_ * C_;
        for (std::int64_t i = 0; i < S_; ++i) {
          float acc = 0.0f;
          for (std::int64_t j = 0; j < C_; ++j) {
            float& v = M[i * C_ + j];
            v = bf16_ ? round_bf16(v + round_bf16(G[at(i * C_ + j)])) : v + G[at(i * C_ + j)];
            acc += std::abs(v);
          }
          keys[at(m * S_ + i)] = bf16_ ? round_bf16(acc) : acc;
        }
      }
    });
  }
  void global_keys(std::span<float> keys, int threads) const override {
    parallel_chunks(N_ * S_, threads, [&](std::int64_t b, std::int64_t e, int) {
      for (std::int64_t i = b; i < e; ++i) {
        keys[at(i)] = global_row_key(std::span<const float>(M_).subspan(at(i * C_), at(C_)));
      }
    });
  }
  bool decay(std::int64_t m, std::int64_t row) override {
    float* r = M_.data() + (m * S_ + row) * C_;
    if (std::all_of(r, r + C_, [](float v) { return v == 0.0f; })) return false;
    for (std::int64_t j = 0; j < C_; ++j) r[j] = bf16_ ? round_bf16(r[j] * ef_) : r[j] * ef_;
    return true;
  }

 private:
  std::int64_t N_, S_, C_;
  bool bf16_;
  float ef_;
  GradientFill grad_;
  std::vector<float> M_;
};

// One number per row: E = |M_i|_2^2. For G_i = s_i * N(0, I_C), rotation invariance gives the exact
// law of the next energy: the component of G_i along M_i is s_i z ~ N(0, s_i^2) and the rest is
// s_i^2 chi2_{C-1}, so E' = (sqrt(E) + s_i z)^2 + s_i^2 chi2_{C-1}. chi2 by Wilson-Hilferty.
// Ranks by sqrt(E) (the L2 norm) where the optimizer ranks by L1 — the one approximation.
class EnergyRows final : public MomentumRows {
 public:
  EnergyRows(std::int64_t N, std::int64_t S, std::int64_t C, double ef, Dtype dtype, std::vector<std::uint64_t> keys,
             std::vector<float> scales)
      : N_(N), S_(S), nu_(static_cast<double>(C - 1)), l1_per_l2_(std::sqrt(2.0 * static_cast<double>(C) / std::numbers::pi)),
        bf16_(dtype == Dtype::bfloat16),
        ef2_(bf16_ ? std::pow(static_cast<double>(round_bf16(static_cast<float>(ef))), 2) : ef * ef),
        keys_(std::move(keys)), scales_(std::move(scales)), E_(at(N * S), 0.0) {}
  void accumulate(std::int64_t step, std::span<float> keys, int threads) override {
    const double a = nu_ > 0 ? 2.0 / (9.0 * nu_) : 0.0, sqrt_a = std::sqrt(a);
    parallel_chunks(N_, threads, [&](std::int64_t b, std::int64_t e, int) {
      for (std::int64_t m = b; m < e; ++m) {
        for (std::int64_t i = 0; i < S_; ++i) {
          double z = 0.0, z2 = 0.0;
          normal_pair(keys_[at(m)], static_cast<std::uint64_t>(step * S_ + i), z, z2);
          const double s = scales_[at(m * S_ + i)];
          const double wh = std::max(0.0, 1.0 - a + z2 * sqrt_a);
          const double chi2 = nu_ * wh * wh * wh;
          double& E = E_[at(m * S_ + i)];
          const double r = std::sqrt(E) + s * z;
          E = r * r + s * s * chi2;
          const auto key = static_cast<float>(std::sqrt(E));
          keys[at(m * S_ + i)] = bf16_ ? round_bf16(key) : key;
        }
      }
    });
  }
  void global_keys(std::span<float> keys, int threads) const override {
    parallel_chunks(N_ * S_, threads, [&](std::int64_t b, std::int64_t e, int) {
      for (std::int64_t i = b; i < e; ++i) keys[at(i)] = round_bf16(static_cast<float>(std::sqrt(E_[at(i)]) * l1_per_l2_));
    });
  }
  bool decay(std::int64_t m, std::int64_t row) override {
    double& E = E_[at(m * S_ + row)];
    if (E == 0.0) return false;
    E *= ef2_;
    return true;
  }

 private:
  std::int64_t N_, S_;
  double nu_, l1_per_l2_;
  bool bf16_;
  double ef2_;
  std::vector<std::uint64_t> keys_;
  std::vector<float> scales_;
  std::vector<double> E_;
};

}  // namespace

std::unique_ptr<MomentumRows> exact_rows(std::int64_t N, std::int64_t S, std::int64_t C, double ef, Dtype dtype,
                                         GradientFill grad) {
  return std::make_unique<ExactRows>(N, S, C, ef, dtype, std::move(grad));
}

std::unique_ptr<MomentumRows> reduced_rows(std::int64_t N, std::int64_t S, std::int64_t C, double ef, Dtype dtype,
                                           std::vector<std::uint64_t> keys, std::vector<float> scales) {
  return std::make_unique<EnergyRows>(N, S, C, ef, dtype, std::move(keys), std::move(scales));
}

StreamRows stream_rows(const NormStream& stream, std::uint64_t seed, std::int64_t trial, std::int64_t group,
                       std::span<const std::int64_t> matrices, std::int64_t S, std::int64_t C, std::int64_t world) {
  const auto n = static_cast<std::int64_t>(matrices.size());
  StreamRows out;
  out.keys.resize(at(n));
  out.scales.resize(at(n * S));
  for (std::int64_t m = 0; m < n; ++m) {
    out.keys[at(m)] = stream_key(seed, static_cast<std::uint64_t>(trial), static_cast<std::uint64_t>(group),
                                 static_cast<std::uint64_t>(matrices[at(m)]));
    for (std::int64_t i = 0; i < S; ++i) {
      out.scales[at(m * S + i)] = static_cast<float>(row_scale(stream, out.keys[at(m)], i, S, C, world));
    }
  }
  return out;
}

GradientFill stream_gradients(const StreamRows& rows, std::int64_t S, std::int64_t C) {
  const std::int64_t half = (C + 1) / 2;
  return [keys = rows.keys, scales = rows.scales, S, C, half](std::int64_t step, std::int64_t m, std::span<float> G) {
    for (std::int64_t i = 0; i < S; ++i) {
      const float s = scales[at(m * S + i)];
      const std::uint64_t base = static_cast<std::uint64_t>((step * S + i) * half);
      for (std::int64_t p = 0; p < half; ++p) {
        double z0 = 0.0, z1 = 0.0;
        normal_pair(keys[at(m)], base + static_cast<std::uint64_t>(p), z0, z1);
        G[at(i * C + 2 * p)] = s * static_cast<float>(z0);
        if (2 * p + 1 < C) G[at(i * C + 2 * p + 1)] = s * static_cast<float>(z1);
      }
    }
  };
}

std::unique_ptr<MomentumRows> stream_momentum(StreamRows rows, std::int64_t S, std::int64_t C, double ef, Dtype dtype,
                                              bool exact) {
  const auto N = static_cast<std::int64_t>(rows.keys.size());
  if (exact) return exact_rows(N, S, C, ef, dtype, stream_gradients(rows, S, C));
  return reduced_rows(N, S, C, ef, dtype, std::move(rows.keys), std::move(rows.scales));
}

CappedWinners select_winners(const std::vector<float>& keys, std::int64_t w, std::int64_t N, std::int64_t S,
                             std::int64_t pl, std::int64_t k_tot, int threads) {
  auto select_range = [&](std::int64_t m0, std::int64_t n) {
    std::vector<float> gathered(at(w * n * pl), -1.0f);
    for (std::int64_t r = 0; r < w; ++r) {
      const std::int64_t L = shard_rows(S, w, r), row0 = shard_begin(S, w, r);
      for (std::int64_t i = 0; i < n; ++i) {
        std::copy_n(keys.begin() + (m0 + i) * S + row0, L, gathered.begin() + (r * n + i) * pl);
      }
    }
    return select_capped_winners(gathered, w, n, pl, k_tot);
  };
  const std::int64_t parts = std::max<std::int64_t>(1, std::min<std::int64_t>(threads, N));
  if (parts == 1) return select_range(0, N);
  std::vector<CappedWinners> sub(at(parts));
  parallel_chunks(N, static_cast<int>(parts), [&](std::int64_t b, std::int64_t e, int i) { sub[at(i)] = select_range(b, e - b); });
  CappedWinners all;
  all.world = w;
  all.N = N;
  all.pl = pl;
  all.thresh.resize(at(N));
  all.mask.resize(at(w * N * pl));
  for (std::int64_t i = 0, m0 = 0; i < parts; m0 += sub[at(i)].N, ++i) {
    const CappedWinners& p = sub[at(i)];
    std::copy(p.thresh.begin(), p.thresh.end(), all.thresh.begin() + m0);
    for (std::int64_t r = 0; r < w; ++r) {
      std::copy_n(p.mask.begin() + r * p.N * pl, p.N * pl, all.mask.begin() + (r * N + m0) * pl);
    }
  }
  return all;
}

void pack_all_ranks(const std::vector<float>& keys, const CappedWinners& winners, std::int64_t S, std::int64_t pr,
                    std::int64_t B, std::span<std::uint8_t> kept, std::span<StepCounts> counts, int threads) {
  const std::int64_t w = winners.world, N = winners.N, pl = winners.pl;
  // A rank's pack reads the thresholds, its own slice of the mask and the destinations that own
  // matrices. Each rank is packed against a view holding just that (its slice as rank 0, one
  // destination per pool of pr matrices): the same pack, in O(destinations with matrices) instead
  // of O(world) per rank — at world 8192 the difference between 10^4 and 10^8 operations a step.
  const std::int64_t owners = std::min(w, (N + pr - 1) / pr);
  parallel_chunks(w, threads, [&](std::int64_t b, std::int64_t e, int) {
    CappedPack pack;
    CappedWinners view;
    view.world = owners;
    view.N = N;
    view.pl = pl;
    view.thresh = winners.thresh;
    view.mask.assign(at(owners * N * pl), 0);
    std::vector<float> norms;
    for (std::int64_t r = b; r < e; ++r) {
      const std::int64_t L = shard_rows(S, w, r), row0 = shard_begin(S, w, r);
      if (L == 0) continue;  // an empty shard holds no winners: counts stay {0, 0}, nothing kept
      std::copy_n(winners.mask.begin() + r * N * pl, N * pl, view.mask.begin());
      norms.resize(at(N * L));
      for (std::int64_t m = 0; m < N; ++m) std::copy_n(keys.begin() + m * S + row0, L, norms.begin() + m * L);
      pack_capped_into(norms, view, 0, L, pr, B, pack);
      counts[at(r)] = {pack.winner_rows, pack.deferred_rows};
      for (std::int64_t m = 0; m < N; ++m) std::copy_n(pack.kept.begin() + m * L, L, kept.begin() + m * S + row0);
    }
  });
}

}  // namespace dionsim::opt
