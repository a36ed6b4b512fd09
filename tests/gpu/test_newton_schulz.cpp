// Polar Express / quintic NS on cuBLASLt against the CPU reference with the same rounding sequence.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "kernels/ops.hpp"
#include "kernels/reference.hpp"
#include "tests/gpu/gpu_test_util.hpp"

using namespace dionsim::kernels;
using namespace dionsim::kernels::testing;

namespace {

// Runs `ns` on a random bf16 batch and returns the relative Frobenius error against the CPU
// reference with the same rounding sequence.
double ns_error_vs_reference(NewtonSchulz& ns, NsKind kind, int batch, std::int64_t rows, std::int64_t cols,
                             std::uint64_t seed) {
  const auto X = to_bf16(random_floats(batch * rows * cols, seed));
  DeviceArray<bf16_bits> dX(X);
  auto s = create_stream();
  ns.run(dX.data(), batch, rows, cols, s);
  synchronize(s);
  destroy_stream(s);
  auto want = X;
  ref::newton_schulz(want, batch, rows, cols, kind);
  return rel_frobenius(from_bf16(dX.download()), from_bf16(want));
}

}  // namespace

TEST_CASE("Newton-Schulz matches the bf16 reference (wide, tall, square, and both coefficient sets)", "[gpu][ns]") {
  const auto kind = GENERATE(NsKind::polar_express, NsKind::quintic);
  for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{{24, 40}, {40, 24}, {32, 32}, {8, 96}, {12, 96}, {13, 96}, {20, 64}, {96, 12}, {128, 512}}) {
    NewtonSchulz ns(kind);
    // Same rounding points; only the GEMMs' accumulation order differs (fp32 tensor cores vs double),
    // which flips an occasional bf16 rounding that 5 iterations then propagate. The spec measured
    // 0.2 % between implementations that follow the sequence (§2.6.1); 1e-2 is the bf16 bar.
    const double err = ns_error_vs_reference(ns, kind, 3, rows, cols, static_cast<std::uint64_t>(31 + rows));
    WARN("NS " << (kind == NsKind::polar_express ? "polar_express" : "quintic") << " [" << rows << "x" << cols
                << "] GPU vs reference relative Frobenius error " << err);
    // Large Grams: two exact-sum CPU implementations that differ only in GEMM accumulation order
    // (fp32 Eigen vs double) are already 1.9 % apart at 128 x 512, so accumulation order alone
    // reaches ~2 % there (§2.6.1 "several percent"); small shapes stay within the 1e-2 bf16 bar.
    CHECK(err < (std::min(rows, cols) >= 128 ? 3e-2 : 1e-2));
  }
}

TEST_CASE("Newton-Schulz single-matrix batches match the reference", "[gpu][ns]") {
  for (const auto& [batch, rows, cols] : std::vector<std::tuple<int, std::int64_t, std::int64_t>>{
           {1, 12, 96}, {2, 12, 96}, {1, 13, 96}, {1, 20, 96}, {1, 24, 96}, {1, 12, 64}, {1, 8, 96}, {1, 16, 96}}) {
    NewtonSchulz ns(NsKind::polar_express);
    const double err = ns_error_vs_reference(ns, NsKind::polar_express, batch, rows, cols,
                                             static_cast<std::uint64_t>(3 + rows * batch));
    WARN("NS batch " << batch << " [" << rows << "x" << cols << "] GPU vs reference relative Frobenius error " << err);
    CHECK(err < 1e-2);
  }
}

TEST_CASE("symmetric block-row Gram products match the reference (2 to 8 block rows, wide and tall)", "[gpu][ns]") {
  {
    NewtonSchulz ns(NsKind::polar_express);
    CHECK(ns.symmetric_blocks(5120) == 8);  // defaults: 8 block rows from m = 2048
    CHECK(ns.symmetric_blocks(1280) == 1);
    ns.set_symmetric_min(16);
    ns.set_symmetric_blocks(4);
    CHECK(ns.symmetric_blocks(48) == 3);  // 4 x 12 is not 16-byte aligned: 3 x 16
    CHECK(ns.symmetric_blocks(36) == 1);  // no aligned split
    CHECK_THROWS_AS(ns.set_symmetric_blocks(0), std::invalid_argument);
  }
  // m = 32, 64, 48, 40: block rows narrower than the 64 x 64 mirror tiles, and straddling them.
  for (const int blocks : {2, 4, 8})
    for (const auto& [rows, cols] :
         std::vector<std::pair<std::int64_t, std::int64_t>>{{32, 96}, {64, 160}, {160, 64}, {48, 48}, {40, 72}}) {
      NewtonSchulz ns(NsKind::polar_express);
      ns.set_symmetric_min(16);
      ns.set_symmetric_blocks(blocks);
      const std::int64_t m = std::min(rows, cols);
      if (ns.symmetric_blocks(m) == 1) continue;  // m = 40 splits only into 5 x 8
      const double err =
          ns_error_vs_reference(ns, NsKind::polar_express, 2, rows, cols, static_cast<std::uint64_t>(77 + rows));
      WARN("NS symmetric [" << rows << "x" << cols << "] " << ns.symmetric_blocks(m)
                            << " block rows: GPU vs reference relative Frobenius error " << err);
      CHECK(err < 1e-2);  // same bar as the plain path: only accumulation order differs
    }
}

namespace {
const char* kind_name(SymmetricLayout k) { return k == SymmetricLayout::tiles ? "tiles" : "block rows"; }
}  // namespace

TEST_CASE("symmetric-product layouts: which applies to which shape", "[gpu][ns]") {
  NewtonSchulz ns(NsKind::polar_express);
  CHECK(ns.layout(4, 5120, 5120).kind == kDefaultNsLayout.kind);
  ns.set_symmetric_layout({SymmetricLayout::tiles, 16});
  CHECK(ns.layout(2, 48, 96).kind == SymmetricLayout::tiles);
  CHECK(ns.layout(2, 48, 96).rows == 16);
  CHECK(ns.layout(2, 96, 48).kind == SymmetricLayout::tiles);        // tall too
  CHECK(ns.layout(2, 40, 96).kind == SymmetricLayout::block_rows);   // 16 does not divide 40
  CHECK(ns.layout(2, 16, 96).kind == SymmetricLayout::block_rows);   // one tile is no split
  CHECK_THROWS_AS(ns.set_symmetric_layout({SymmetricLayout::tiles, 12}), std::invalid_argument);
  CHECK_THROWS_AS(ns.set_symmetric_layout({SymmetricLayout::tiles, 0}), std::invalid_argument);
  ns.set_symmetric_layout({SymmetricLayout::block_rows, 0});  // rows unused
  ns.set_symmetric_min(16);
  ns.set_symmetric_blocks(4);
  CHECK(ns.layout(2, 64, 96).kind == SymmetricLayout::block_rows);
  CHECK(ns.layout(2, 64, 96).rows == 16);
}

TEST_CASE("symmetric products are within one bf16 rounding of exact, in every layout", "[gpu][ns]") {
  // Plain, block rows and tiles (the tile pointers, the mirror, AA's tiles): A = X Xᵀ (tall: Xᵀ X)
  // against the exact product rounded once to bf16, and A A against the exact square of the GPU's
  // own A — fp32 accumulation moves a result by at most one bf16 rounding plus the fp32 sum's own
  // error bound (which matters only where the terms nearly cancel).
  auto ulp = [](float v) { return std::ldexp(1.0F, std::ilogb(std::max(std::fabs(v), 1e-30F)) - 7); };
  struct Case { std::int64_t rows, cols; int blocks; NsLayout layout; };
  const NsLayout blocks{SymmetricLayout::block_rows, 0};
  for (const Case c : std::vector<Case>{{32, 96, 1, blocks}, {32, 96, 4, blocks}, {64, 160, 8, blocks},
                                        {32, 96, 1, {SymmetricLayout::tiles, 8}}, {32, 96, 1, {SymmetricLayout::tiles, 16}},
                                        {64, 160, 1, {SymmetricLayout::tiles, 32}}, {160, 64, 1, {SymmetricLayout::tiles, 16}},
                                        {48, 48, 1, {SymmetricLayout::tiles, 24}}, {40, 72, 1, {SymmetricLayout::tiles, 8}},
                                        {96, 40, 1, {SymmetricLayout::tiles, 8}}, {128, 136, 1, {SymmetricLayout::tiles, 16}},
                                        // the 64 x 64 mirror tiles: partial (136), whole tiles above or below
                                        // the block diagonal (blocks of 64) and blocks straddling them (8, 24)
                                        {136, 200, 1, {SymmetricLayout::tiles, 8}}, {128, 136, 1, {SymmetricLayout::tiles, 64}},
                                        {200, 192, 1, {SymmetricLayout::tiles, 24}}, {192, 200, 2, blocks}}) {
    const int batch = 3;
    const std::int64_t m = std::min(c.rows, c.cols), K = std::max(c.rows, c.cols);
    const bool tall = c.rows > c.cols;
    const auto X = to_bf16(random_floats(batch * c.rows * c.cols, static_cast<std::uint64_t>(500 + c.rows + c.layout.rows)));
    DeviceArray<bf16_bits> dX(X);
    NewtonSchulz ns(NsKind::polar_express);
    ns.set_symmetric_min(16);
    ns.set_symmetric_blocks(c.blocks);
    ns.set_symmetric_layout(c.layout);
    const NsLayout used = ns.layout(batch, c.rows, c.cols);
    INFO("[" << c.rows << "x" << c.cols << "] " << kind_name(used.kind) << " " << used.rows);
    REQUIRE(used.kind == c.layout.kind);
    REQUIRE(used.rows == (c.layout.kind == SymmetricLayout::block_rows ? m / c.blocks : c.layout.rows));
    auto s = create_stream();
    const auto [A, AA] = ns.symmetric_products(dX.data(), batch, c.rows, c.cols, s);
    destroy_stream(s);
    REQUIRE(dX.download() == X);  // the input is not modified
    std::int64_t bad_a = 0, bad_aa = 0;
    for (std::int64_t p = 0; p < batch; ++p)
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < m; ++j) {
          const auto x = [&](std::int64_t r, std::int64_t t) {  // X's row r of the Gram product, column t
            return static_cast<double>(from_bf16(tall ? X[(p * c.rows + t) * c.cols + r] : X[(p * c.rows + r) * c.cols + t]));
          };
          double a = 0, aa = 0, a_abs = 0, aa_abs = 0;
          for (std::int64_t k = 0; k < K; ++k) {
            a += x(i, k) * x(j, k);
            a_abs += std::fabs(x(i, k) * x(j, k));
          }
          for (std::int64_t k = 0; k < m; ++k) {
            const double t = static_cast<double>(from_bf16(A[(p * m + i) * m + k])) * from_bf16(A[(p * m + k) * m + j]);
            aa += t;
            aa_abs += std::fabs(t);
          }
          const float want_a = round_bf16(static_cast<float>(a)), want_aa = round_bf16(static_cast<float>(aa));
          // One bf16 rounding of an fp32 sum whose own error is at most K·2⁻²⁴·Σ|terms| (the
          // standard dot-product bound, any order): near-cancelling sums get that absolute slack.
          const auto bound = [&](float want, double abs_sum, std::int64_t k) {
            return ulp(want) + static_cast<double>(k) * std::ldexp(1.0, -24) * abs_sum;
          };
          bad_a += std::fabs(from_bf16(A[(p * m + i) * m + j]) - want_a) > bound(want_a, a_abs, K);
          bad_aa += std::fabs(from_bf16(AA[(p * m + i) * m + j]) - want_aa) > bound(want_aa, aa_abs, m);
        }
    CHECK(bad_a == 0);
    CHECK(bad_aa == 0);
  }
}

TEST_CASE("Newton-Schulz with tiled symmetric products matches the reference", "[gpu][ns]") {
  // Tiles narrower than, equal to and straddling the 64 x 64 mirror tiles; wide and tall; up to
  // 5 x 5 tiles (15 GEMMs per matrix); with autotuning too (which also picks the layout).
  for (const bool tuned : {false, true})
    for (const auto& [rows, cols, layout] : std::vector<std::tuple<std::int64_t, std::int64_t, NsLayout>>{
             {32, 96, {SymmetricLayout::tiles, 8}}, {32, 96, {SymmetricLayout::tiles, 16}},
             {64, 160, {SymmetricLayout::tiles, 32}}, {160, 64, {SymmetricLayout::tiles, 16}},
             {48, 48, {SymmetricLayout::tiles, 24}}, {40, 72, {SymmetricLayout::tiles, 8}},
             {96, 40, {SymmetricLayout::tiles, 8}}, {136, 200, {SymmetricLayout::tiles, 8}},
             {128, 136, {SymmetricLayout::tiles, 64}}}) {
      NewtonSchulz ns(NsKind::polar_express);
      ns.set_symmetric_layout(layout);
      ns.set_autotune(tuned);
      if (!tuned) REQUIRE(ns.layout(3, rows, cols).kind == layout.kind);
      const double err = ns_error_vs_reference(ns, NsKind::polar_express, 3, rows, cols,
                                               static_cast<std::uint64_t>(177 + rows + layout.rows));
      WARN("NS [" << rows << "x" << cols << "] " << kind_name(layout.kind) << " " << layout.rows
                  << (tuned ? " autotuned" : "") << ": GPU vs reference relative Frobenius error " << err);
      // The products themselves are within one bf16 rounding of exact (test above); which results
      // sit next to a rounding boundary depends on the GEMM kernel's accumulation order, and five
      // iterations amplify a flip: measured 0 for most shapes, 1.5 % / 1.9 % for [32x96] tiles of 8
      // and [64x160] tiles of 32 (H200, cuBLAS 13) — the 3e-2 bar of large Grams in the first test.
      CHECK(err < 3e-2);
    }
}

TEST_CASE("Newton-Schulz keeps zero matrices and zero rows exactly zero", "[gpu][ns]") {
  const std::int64_t rows = 16, cols = 48;
  auto X = to_bf16(random_floats(2 * rows * cols, 41));
  for (std::int64_t i = 0; i < rows * cols; ++i) X[i] = 0;  // matrix 0: all zero (a virtual matrix)
  for (std::int64_t r = 10; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) X[(rows + r) * cols + c] = 0;  // matrix 1: zero padding rows
  DeviceArray<bf16_bits> dX(X);
  NewtonSchulz ns(NsKind::polar_express);
  auto s = create_stream();
  ns.run(dX.data(), 2, rows, cols, s);
  synchronize(s);
  const auto got = dX.download();
  for (std::int64_t i = 0; i < rows * cols; ++i) REQUIRE(got[i] == 0);
  for (std::int64_t r = 10; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) REQUIRE((got[(rows + r) * cols + c] & 0x7fff) == 0);
  // Zero rows are transparent: in exact-sum arithmetic (the reference) padded == unpadded bit for
  // bit; on the GPU the real rows stay within bf16 tolerance of that reference.
  std::vector<bf16_bits> small(X.begin() + rows * cols, X.begin() + rows * cols + 10 * cols);
  std::vector<bf16_bits> padded(X.begin() + rows * cols, X.end());
  auto small_ref = small;
  ref::newton_schulz(small_ref, 1, 10, cols, NsKind::polar_express);
  ref::newton_schulz(padded, 1, rows, cols, NsKind::polar_express);
  CHECK(std::vector<bf16_bits>(padded.begin(), padded.begin() + 10 * cols) == small_ref);
  std::vector<bf16_bits> real(got.begin() + rows * cols, got.begin() + rows * cols + 10 * cols);
  const double err = rel_frobenius(from_bf16(real), from_bf16(small_ref));
  WARN("NS padded-vs-unpadded relative Frobenius error " << err);
  CHECK(err < 1e-2);
  destroy_stream(s);
}

TEST_CASE("NewtonSchulz::gemm is a correct batched row-major GEMM", "[gpu][ns]") {
  const std::int64_t m = 20, n = 12, k = 36;
  const auto A = to_bf16(random_floats(2 * m * k, 51)), B = to_bf16(random_floats(2 * k * n, 52));
  DeviceArray<bf16_bits> dA(A), dB(B), dC(2 * m * n);
  NewtonSchulz ns(NsKind::polar_express);
  auto s = create_stream();
  ns.gemm(dA.data(), dB.data(), dC.data(), 2, m, n, k, s);
  synchronize(s);
  const auto C = from_bf16(dC.download());
  std::vector<float> want(C.size());
  for (int b = 0; b < 2; ++b)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (std::int64_t t = 0; t < k; ++t) acc += static_cast<double>(from_bf16(A[(b * m + i) * k + t])) * from_bf16(B[(b * k + t) * n + j]);
        want[(b * m + i) * n + j] = static_cast<float>(acc);
      }
  CHECK(rel_frobenius(C, want) < 4e-3);  // one bf16 output rounding: <= 2^-9 relative per element
  destroy_stream(s);
}

TEST_CASE("Newton-Schulz with autotuned GEMM algorithms matches the reference", "[gpu][ns]") {
  for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{{64, 160}, {160, 64}, {12, 96}}) {
    const int batch = 2;
    const auto X = to_bf16(random_floats(batch * rows * cols, 91 + rows));
    DeviceArray<bf16_bits> dX(X);
    NewtonSchulz ns(NsKind::polar_express);
    ns.set_autotune(true);
    ns.set_symmetric_min(16);
    auto s = create_stream();
    ns.run(dX.data(), batch, rows, cols, s);  // tunes every GEMM shape on first use
    synchronize(s);
    auto want = X;
    ref::newton_schulz(want, batch, rows, cols, NsKind::polar_express);
    const double err = rel_frobenius(from_bf16(dX.download()), from_bf16(want));
    WARN("NS autotuned [" << rows << "x" << cols << "] GPU vs reference relative Frobenius error " << err);
    CHECK(err < 1e-2);
    destroy_stream(s);
  }
}
