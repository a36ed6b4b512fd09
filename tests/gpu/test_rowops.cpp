// Row kernels against their CPU references.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "common/error.hpp"
#include "kernels/ops.hpp"
#include "kernels/reference.hpp"
#include "tests/gpu/gpu_test_util.hpp"

using namespace dionsim::kernels;
using namespace dionsim::kernels::testing;

TEST_CASE("accumulate_row_l1 matches the reference (fp32 and bf16 momentum)", "[gpu][rowops]") {
  const auto dtype = GENERATE(MomentumDtype::fp32, MomentumDtype::bf16);
  const std::int64_t rows = 37, cols = 1000;
  auto M0 = random_floats(rows * cols, 1, 0.5F);
  if (dtype == MomentumDtype::bf16) M0 = from_bf16(to_bf16(M0));
  const auto G = random_floats(rows * cols, 2, 0.1F);
  DeviceMomentum dM(M0, dtype);
  DeviceArray<float> dG(G), dkeys(rows);
  auto s = create_stream();
  accumulate_row_l1(dG.data(), dM.data(), dtype, rows, cols, dkeys.data(), s);
  synchronize(s);
  std::vector<float> M = M0, keys;
  ref::accumulate_row_l1(G, M, dtype, rows, cols, keys);
  // M += G is one add (one rounding to the momentum dtype) on both sides: bit-identical.
  CHECK(dM.download() == M);
  const auto got = dkeys.download();
  for (std::int64_t r = 0; r < rows; ++r) {
    // fp32: the device sums 1000 positive terms in a different order than the double reference;
    // the fp32 summation error bound ~ log2(1000) * 2^-24 relative ~ 6e-7, so 1e-5 has margin.
    // bf16: both sides round the sum to bf16; an order difference can flip one rounding: 1 ulp = 2^-8.
    const double tol = dtype == MomentumDtype::fp32 ? 1e-5 : 1.0 / 128;
    CHECK(std::abs(got[r] - keys[r]) <= tol * keys[r]);
  }
  destroy_stream(s);
}

TEST_CASE("row_l1_bf16 gives bf16-rounded keys (global scope)", "[gpu][rowops]") {
  const std::int64_t rows = 19, cols = 777;
  const auto X = to_bf16(random_floats(rows * cols, 3));
  DeviceArray<bf16_bits> dX(X);
  DeviceArray<float> dk(rows);
  auto s = create_stream();
  row_l1_bf16(dX.data(), rows, cols, dk.data(), s);
  synchronize(s);
  const auto got = dk.download(), want = ref::row_l1_bf16(X, rows, cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    CHECK(round_bf16(got[r]) == got[r]);                        // representable in bf16
    CHECK(std::abs(got[r] - want[r]) <= want[r] / 128.0);       // at most one bf16 ulp apart
  }
  destroy_stream(s);
}

TEST_CASE("gather, scatter, EF scale and (de)interleave are exact row moves", "[gpu][rowops]") {
  const int segs = 3;
  const std::int64_t rows = 10, cols = 24, slots = 4;
  const auto M = random_floats(segs * rows * cols, 4);
  std::vector<std::int32_t> index(segs * rows, 0), count = {4, 2, 0};
  const std::vector<std::vector<int>> picks = {{1, 3, 4, 9}, {0, 7}, {}};
  for (int sgm = 0; sgm < segs; ++sgm)
    for (std::size_t t = 0; t < picks[sgm].size(); ++t) index[sgm * rows + t] = picks[sgm][t];
  DeviceArray<float> dM(M);
  DeviceArray<std::int32_t> di(index), dc(count);
  DeviceArray<bf16_bits> out(segs * slots * cols), back(segs * rows * cols);
  auto s = create_stream();
  gather_rows_bf16(dM.data(), MomentumDtype::fp32, di.data(), dc.data(), segs, rows, slots, cols, out.data(), s);
  scatter_rows_bf16(out.data(), di.data(), dc.data(), segs, slots, rows, cols, back.data(), s);
  scale_rows(dM.data(), MomentumDtype::fp32, di.data(), dc.data(), segs, rows, cols, 0.5F, s);
  synchronize(s);
  const auto o = out.download(), b = back.download();
  const auto m2 = dM.download();
  for (int sgm = 0; sgm < segs; ++sgm)
    for (std::int64_t r = 0; r < rows; ++r) {
      const bool picked = std::find(picks[sgm].begin(), picks[sgm].end(), r) != picks[sgm].end();
      for (std::int64_t c = 0; c < cols; ++c) {
        const auto i = (sgm * rows + r) * cols + c;
        CHECK(b[i] == (picked ? to_bf16(M[i]) : bf16_bits{0}));
        CHECK(m2[i] == (picked ? M[i] * 0.5F : M[i]));
      }
    }
  for (int sgm = 0; sgm < segs; ++sgm)
    for (std::int64_t t = static_cast<std::int64_t>(picks[sgm].size()); t < slots; ++t)
      for (std::int64_t c = 0; c < cols; ++c) CHECK(o[(sgm * slots + t) * cols + c] == 0);

  // interleave: [w][pr][rows][C] -> [pr][w*rows][C] and back
  const int w = 3, pr = 2;
  const auto X = to_bf16(random_floats(w * pr * 5 * 16, 5));
  DeviceArray<bf16_bits> dX(X), dY(X.size()), dZ(X.size());
  interleave_blocks(dX.data(), w, pr, 5, 16, dY.data(), s);
  deinterleave_blocks(dY.data(), w, pr, 5, 16, dZ.data(), s);
  synchronize(s);
  const auto Y = dY.download();
  CHECK(dZ.download() == X);
  for (int src = 0; src < w; ++src)
    for (int j = 0; j < pr; ++j)
      for (int t = 0; t < 5; ++t) CHECK(Y[((j * w + src) * 5 + t) * 16 + 3] == X[((src * pr + j) * 5 + t) * 16 + 3]);
  destroy_stream(s);
}

TEST_CASE("pad_shards_bf16 and pad_norms pad with zero rows / -1 keys", "[gpu][rowops]") {
  const int N = 2, Np = 3;
  const std::int64_t L = 3, pl = 5, C = 8;
  const auto M = random_floats(N * L * C, 6);
  DeviceArray<float> dM(M), norms(std::vector<float>{1, 2, 3, 4, 5, 6}), pn(N * pl);
  DeviceArray<bf16_bits> out(Np * pl * C);
  auto s = create_stream();
  pad_shards_bf16(dM.data(), MomentumDtype::fp32, N, Np, L, pl, C, out.data(), s);
  pad_norms(norms.data(), N, L, pl, pn.data(), s);
  synchronize(s);
  const auto o = out.download();
  for (int m = 0; m < Np; ++m)
    for (std::int64_t r = 0; r < pl; ++r)
      for (std::int64_t c = 0; c < C; ++c)
        CHECK(o[(m * pl + r) * C + c] == (m < N && r < L ? to_bf16(M[(m * L + r) * C + c]) : bf16_bits{0}));
  CHECK(pn.download() == std::vector<float>{1, 2, 3, -1, -1, 4, 5, 6, -1, -1});
  CHECK_THROWS_AS(pad_norms(norms.data(), N, 6, pl, pn.data(), s), std::invalid_argument);  // L > pl (§4.3)
  destroy_stream(s);
}

TEST_CASE("CUDA failures become DeviceError naming the call and the rank", "[gpu][errors]") {
  set_error_rank(3);
  try {
    (void)device_alloc(std::size_t{1} << 52, "huge test buffer");
    FAIL("allocation of 4 PB succeeded");
  } catch (const dionsim::DeviceError& e) {
    const std::string what = e.what();
    CHECK(what.find("cudaMalloc") != std::string::npos);
    CHECK(what.find("rank 3") != std::string::npos);
    CHECK(what.find("huge test buffer") != std::string::npos);
    CHECK(e.code() == dionsim::ExitCode::device);
  }
  set_error_rank(-1);
}

// The `global` owner's row moves in the received blocked layout [w][pr][pl][C] (assembled row p
// of matrix j = received row ((p/pl)*pr + j)*pl + p%pl), and the reverse payload kept zero between
// steps: scatter without the full memset, then clear the same rows (src = nullptr).
TEST_CASE("blocked gather/scatter: exact row moves, and clearing restores an all-zero payload", "[gpu][rowops]") {
  const int w = 2, pr = 2;
  const std::int64_t pl = 5, C = 24, Sp = w * pl, slots = 4;
  const auto recv = to_bf16(random_floats(w * pr * pl * C, 31));
  std::vector<std::int32_t> index(pr * Sp, 0), count = {4, 1};
  const std::vector<std::vector<std::int32_t>> picks = {{0, 4, 6, 9}, {5}};
  for (int j = 0; j < pr; ++j)
    for (std::size_t t = 0; t < picks[j].size(); ++t) index[j * Sp + static_cast<std::int64_t>(t)] = picks[j][t];
  auto blocked = [&](std::int64_t p, std::int64_t j) { return ((p / pl) * pr + j) * pl + p % pl; };
  DeviceArray<bf16_bits> drecv(recv), out(pr * slots * C), rev(recv.size()), full(recv);
  DeviceArray<std::int32_t> di(index), dc(count);
  auto s = create_stream();
  memset_device(rev.data(), 0, rev.bytes(), s);
  gather_rows_blocked(drecv.data(), di.data(), dc.data(), w, pr, pl, slots, C, out.data(), s);
  scatter_rows_blocked(out.data(), di.data(), dc.data(), w, pr, pl, slots, C, rev.data(), s, /*zero_first=*/false);
  scatter_rows_blocked(out.data(), di.data(), dc.data(), w, pr, pl, slots, C, full.data(), s);  // memset first
  synchronize(s);
  const auto o = out.download(), r = rev.download();
  CHECK(full.download() == r);
  for (int j = 0; j < pr; ++j) {
    for (std::int64_t t = 0; t < slots; ++t)
      for (std::int64_t c = 0; c < C; ++c) {
        const bool have = t < count[j];
        CHECK(o[(j * slots + t) * C + c] == (have ? recv[blocked(picks[j][t], j) * C + c] : bf16_bits{0}));
      }
    for (std::int64_t p = 0; p < Sp; ++p) {
      const bool picked = std::find(picks[j].begin(), picks[j].end(), p) != picks[j].end();
      for (std::int64_t c = 0; c < C; ++c)
        CHECK(r[blocked(p, j) * C + c] == (picked ? recv[blocked(p, j) * C + c] : bf16_bits{0}));
    }
  }
  scatter_rows_blocked(nullptr, di.data(), dc.data(), w, pr, pl, slots, C, rev.data(), s, /*zero_first=*/false);
  synchronize(s);
  CHECK(rev.download() == std::vector<bf16_bits>(recv.size(), 0));
  destroy_stream(s);
}
