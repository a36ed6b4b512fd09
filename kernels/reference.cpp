#include "kernels/reference.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

#include "optimizer/newton_schulz_coefficients.hpp"

namespace dionsim::kernels::ref {

namespace {
float store(float v, MomentumDtype d) { return d == MomentumDtype::bf16 ? round_bf16(v) : v; }
}  // namespace

void accumulate_row_l1(const std::vector<float>& G, std::vector<float>& M, MomentumDtype dtype, std::int64_t rows,
                       std::int64_t cols, std::vector<float>& keys) {
  keys.assign(static_cast<std::size_t>(rows), 0.0F);
  for (std::int64_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (std::int64_t j = 0; j < cols; ++j) {
      const auto i = static_cast<std::size_t>(r * cols + j);
      M[i] = store(M[i] + store(G[i], dtype), dtype);
      acc += std::fabs(M[i]);
    }
    keys[static_cast<std::size_t>(r)] = store(static_cast<float>(acc), dtype);
  }
}

std::vector<float> row_l1_bf16(const std::vector<bf16_bits>& X, std::int64_t rows, std::int64_t cols) {
  std::vector<float> keys(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (std::int64_t j = 0; j < cols; ++j) acc += std::fabs(from_bf16(X[static_cast<std::size_t>(r * cols + j)]));
    keys[static_cast<std::size_t>(r)] = round_bf16(static_cast<float>(acc));
  }
  return keys;
}

void stable_topk_mask(const std::vector<float>& keys, int segments, std::int64_t len, std::int64_t count,
                      std::vector<std::uint8_t>& mask, std::vector<float>& kth) {
  mask.assign(static_cast<std::size_t>(segments * len), 0);
  kth.assign(static_cast<std::size_t>(segments), 0.0F);
  std::vector<std::int64_t> order(static_cast<std::size_t>(len));
  for (int s = 0; s < segments; ++s) {
    const float* k = keys.data() + s * len;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return k[a] > k[b]; });
    const std::int64_t n = std::min(count, len);
    for (std::int64_t t = 0; t < n; ++t) mask[static_cast<std::size_t>(s * len + order[static_cast<std::size_t>(t)])] = 1;
    if (n > 0) kth[static_cast<std::size_t>(s)] = k[order[static_cast<std::size_t>(n - 1)]];
  }
}

CappedPackResult capped_pack(const CappedShape& sh, const std::vector<float>& M, MomentumDtype dtype,
                             const std::vector<float>& norms, const std::vector<std::uint8_t>& winners,
                             const std::vector<float>& thresh) {
  (void)dtype;  // M already holds momentum-dtype values
  CappedPackResult out;
  out.send.assign(static_cast<std::size_t>(sh.w * (1 + sh.B) * sh.C), 0);
  out.slot_src.assign(static_cast<std::size_t>(sh.w * sh.B), -1);
  for (int d = 0; d < sh.w; ++d) {
    struct Cand { float prio; std::int64_t q; };
    std::vector<Cand> cands;
    for (std::int64_t j = 0; j < sh.pr; ++j) {
      const std::int64_t m = d * sh.pr + j;
      if (m >= sh.N) continue;
      for (std::int64_t row = 0; row < sh.L; ++row) {
        if (!winners[static_cast<std::size_t>(m * sh.w * sh.pl + sh.rank * sh.pl + row)]) continue;
        const float prio = norms[static_cast<std::size_t>(m * sh.L + row)] / std::max(thresh[static_cast<std::size_t>(m)], 1e-12F);
        cands.push_back({prio, j * sh.L + row});
      }
    }
    std::stable_sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) { return a.prio > b.prio; });
    const auto keep_n = static_cast<std::size_t>(std::min<std::int64_t>(sh.B, static_cast<std::int64_t>(cands.size())));
    std::vector<std::int64_t> kept;
    for (std::size_t t = 0; t < keep_n; ++t) kept.push_back(cands[t].q);
    std::sort(kept.begin(), kept.end());  // position-preserving layout: matrix order, then ascending row
    out.winners += static_cast<long long>(cands.size());
    out.deferred += static_cast<long long>(cands.size() - keep_n);
    std::vector<std::int32_t> counts(static_cast<std::size_t>(sh.pr), 0);
    bf16_bits* chunk = out.send.data() + d * (1 + sh.B) * sh.C;
    for (std::size_t t = 0; t < kept.size(); ++t) {
      const std::int64_t j = kept[t] / sh.L, row = kept[t] % sh.L, m = d * sh.pr + j;
      ++counts[static_cast<std::size_t>(j)];
      for (std::int64_t c = 0; c < sh.C; ++c)
        chunk[(1 + static_cast<std::int64_t>(t)) * sh.C + c] = to_bf16(M[static_cast<std::size_t>((m * sh.L + row) * sh.C + c)]);
      out.slot_src[static_cast<std::size_t>(d * sh.B + static_cast<std::int64_t>(t))] = static_cast<std::int32_t>(m * sh.L + row);
    }
    for (std::int64_t j = 0; j < sh.pr; ++j) {
      const auto bits = static_cast<std::uint32_t>(counts[static_cast<std::size_t>(j)]);
      chunk[2 * j] = static_cast<bf16_bits>(bits & 0xffffu);
      chunk[2 * j + 1] = static_cast<bf16_bits>(bits >> 16);
    }
  }
  return out;
}

void capped_assemble(const CappedShape& sh, const std::vector<bf16_bits>& recv, std::vector<bf16_bits>& buf,
                     std::vector<std::int32_t>& route) {
  buf.assign(static_cast<std::size_t>(sh.pr * sh.kw * sh.C), 0);
  route.assign(static_cast<std::size_t>(sh.w * sh.B), -1);
  std::vector<std::int32_t> cnt(static_cast<std::size_t>(sh.w * sh.pr));
  for (int s = 0; s < sh.w; ++s) decode_header_counts(recv.data() + s * (1 + sh.B) * sh.C, sh.pr, cnt.data() + s * sh.pr);
  for (std::int64_t j = 0; j < sh.pr; ++j) {
    std::int64_t dst = 0;
    for (int s = 0; s < sh.w; ++s) {
      std::int64_t src_off = 0;
      for (std::int64_t j2 = 0; j2 < j; ++j2) src_off += cnt[static_cast<std::size_t>(s * sh.pr + j2)];
      for (std::int64_t t = 0; t < cnt[static_cast<std::size_t>(s * sh.pr + j)]; ++t, ++dst) {
        const std::int64_t slot = src_off + t;
        if (dst >= sh.kw || slot >= sh.B) continue;  // receiver clip
        route[static_cast<std::size_t>(s * sh.B + slot)] = static_cast<std::int32_t>(j * sh.kw + dst);
        for (std::int64_t c = 0; c < sh.C; ++c)
          buf[static_cast<std::size_t>((j * sh.kw + dst) * sh.C + c)] = recv[static_cast<std::size_t>((s * (1 + sh.B) + 1 + slot) * sh.C + c)];
      }
    }
  }
}

void masked_post(std::vector<float>& W, std::vector<float>& M, MomentumDtype dtype, const std::vector<bf16_bits>& U,
                 const std::vector<float>* row_scale, int N, std::int64_t L, std::int64_t u_rows, std::int64_t cols,
                 const PostParams& p) {
  const float decay = 1.0F - p.lr * p.weight_decay;
  const float ef = dtype == MomentumDtype::bf16 ? round_bf16(p.ef) : p.ef;
  for (std::int64_t m = 0; m < N; ++m)
    for (std::int64_t r = 0; r < L; ++r) {
      const bf16_bits* u = U.data() + (m * u_rows + r) * cols;
      const bool applied = std::any_of(u, u + cols, [](bf16_bits b) { return (b & 0x7fffu) != 0; });
      const float scale = row_scale ? (*row_scale)[static_cast<std::size_t>(m * L + r)] : 1.0F;
      for (std::int64_t j = 0; j < cols; ++j) {
        const auto i = static_cast<std::size_t>((m * L + r) * cols + j);
        float w = W[i] * decay;
        if (p.param_bf16) w = round_bf16(w);
        if (applied) {
          const float uj = from_bf16(u[j]);
          float upd;
          if (row_scale) upd = -p.adjusted_lr * (uj * scale);
          else upd = p.round_update_bf16 ? round_bf16(uj * -p.adjusted_lr) : uj * -p.adjusted_lr;
          if (p.param_bf16) upd = round_bf16(upd);
          w += upd;
          if (p.param_bf16) w = round_bf16(w);
          M[i] = store(M[i] * ef, dtype);
        }
        W[i] = w;
      }
    }
}

void nordion2_row_scale(const std::vector<bf16_bits>& U, int N, std::int64_t L, std::int64_t u_rows,
                        std::int64_t cols, std::vector<float>& V, float muon_beta2, std::vector<float>& row_scale) {
  row_scale.assign(static_cast<std::size_t>(N * L), 0.0F);
  for (std::int64_t m = 0; m < N; ++m) {
    double f0sq = 0, ohatsq = 0;
    std::vector<double> ss(static_cast<std::size_t>(L), -1.0);
    for (std::int64_t r = 0; r < L; ++r) {
      const bf16_bits* u = U.data() + (m * u_rows + r) * cols;
      if (!std::any_of(u, u + cols, [](bf16_bits b) { return (b & 0x7fffu) != 0; })) continue;
      double acc = 0;
      for (std::int64_t j = 0; j < cols; ++j) acc += static_cast<double>(from_bf16(u[j])) * from_bf16(u[j]);
      ss[static_cast<std::size_t>(r)] = acc;
      float& v = V[static_cast<std::size_t>(m * L + r)];
      const float nu = static_cast<float>(acc / static_cast<double>(cols));
      v = v + (1.0F - muon_beta2) * (nu - v);
      const double inv = 1.0 / (std::sqrt(static_cast<double>(v)) + 1e-8);
      f0sq += acc;
      ohatsq += acc * inv * inv;
    }
    const double g = std::sqrt(f0sq) / std::max(std::sqrt(ohatsq), 1e-8);
    for (std::int64_t r = 0; r < L; ++r)
      if (ss[static_cast<std::size_t>(r)] >= 0)
        row_scale[static_cast<std::size_t>(m * L + r)] =
            static_cast<float>(g / (std::sqrt(static_cast<double>(V[static_cast<std::size_t>(m * L + r)])) + 1e-8));
  }
}

void newton_schulz(std::vector<bf16_bits>& X, int batch, std::int64_t rows, std::int64_t cols, NsKind kind, float eps) {
  const bool tall = rows > cols;
  const std::int64_t m = tall ? cols : rows, n = tall ? rows : cols;
  // Work on the wide form Z [m][n] (tall: Z = Xᵀ); XᵀX and X B are the transposes of Z Zᵀ and B Z.
  for (int b = 0; b < batch; ++b) {
    bf16_bits* x = X.data() + b * rows * cols;
    std::vector<float> Z(static_cast<std::size_t>(m * n));
    auto zi = [&](std::int64_t i, std::int64_t j) { return static_cast<std::size_t>(tall ? j * cols + i : i * cols + j); };
    double ss = 0;
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        Z[static_cast<std::size_t>(i * n + j)] = from_bf16(x[zi(i, j)]);
        ss += static_cast<double>(Z[static_cast<std::size_t>(i * n + j)]) * Z[static_cast<std::size_t>(i * n + j)];
      }
    const float nrm = round_bf16(static_cast<float>(std::sqrt(ss)));
    const float scaled = kind == NsKind::polar_express ? round_bf16(nrm * 1.02F) : nrm;
    const float d = round_bf16(scaled + eps);
    for (auto& z : Z) z = round_bf16(z / d);
    std::vector<float> A(static_cast<std::size_t>(m * m)), AA(A.size()), Bm(A.size()), BZ(Z.size());
    for (const auto& abc : kind == NsKind::polar_express ? ns_coefficients::kPolarExpress : ns_coefficients::kQuintic) {
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < m; ++j) {
          double acc = 0;
          for (std::int64_t t = 0; t < n; ++t) acc += static_cast<double>(Z[static_cast<std::size_t>(i * n + t)]) * Z[static_cast<std::size_t>(j * n + t)];
          A[static_cast<std::size_t>(i * m + j)] = round_bf16(static_cast<float>(acc));
        }
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < m; ++j) {
          double acc = 0;
          for (std::int64_t t = 0; t < m; ++t) acc += static_cast<double>(A[static_cast<std::size_t>(i * m + t)]) * A[static_cast<std::size_t>(t * m + j)];
          AA[static_cast<std::size_t>(i * m + j)] = round_bf16(static_cast<float>(acc));
        }
      for (std::size_t i = 0; i < A.size(); ++i)
        Bm[i] = round_bf16(round_bf16(static_cast<float>(abc.b) * A[i]) + round_bf16(static_cast<float>(abc.c) * AA[i]));
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (std::int64_t t = 0; t < m; ++t) acc += static_cast<double>(Bm[static_cast<std::size_t>(i * m + t)]) * Z[static_cast<std::size_t>(t * n + j)];
          BZ[static_cast<std::size_t>(i * n + j)] = round_bf16(static_cast<float>(acc));
        }
      for (std::size_t i = 0; i < Z.size(); ++i) Z[i] = round_bf16(round_bf16(static_cast<float>(abc.a) * Z[i]) + BZ[i]);
    }
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) x[zi(i, j)] = to_bf16(Z[static_cast<std::size_t>(i * n + j)]);
  }
}

}  // namespace dionsim::kernels::ref
