// Masked post and NorDion2 normalization against the CPU reference.
#include <catch2/catch.hpp>

#include "kernels/ops.hpp"
#include "kernels/reference.hpp"
#include "tests/gpu/gpu_test_util.hpp"

using namespace dionsim::kernels;
using namespace dionsim::kernels::testing;

namespace {
// U [N][u_rows][C] bf16 with every third row (and all rows >= L) zero: the "not applied" rows.
std::vector<bf16_bits> sparse_update(int N, std::int64_t u_rows, std::int64_t C, std::uint64_t seed) {
  auto U = to_bf16(random_floats(N * u_rows * C, seed));
  for (int m = 0; m < N; ++m)
    for (std::int64_t r = 0; r < u_rows; ++r)
      if (r % 3 == 1)
        for (std::int64_t c = 0; c < C; ++c) U[(m * u_rows + r) * C + c] = (c == 0 ? 0x8000 : 0);  // -0 counts as zero
  return U;
}
}  // namespace

TEST_CASE("masked_post matches the reference bit for bit (Dion2, fp32 and bf16 momentum)", "[gpu][post]") {
  const auto dtype = GENERATE(MomentumDtype::fp32, MomentumDtype::bf16);
  const int N = 3;
  const std::int64_t L = 7, u_rows = 9, C = 300;
  auto W = random_floats(N * L * C, 11);
  auto M = random_floats(N * L * C, 12);
  if (dtype == MomentumDtype::bf16) M = from_bf16(to_bf16(M));
  const auto U = sparse_update(N, u_rows, C, 13);
  PostParams p;
  p.lr = 0.02F;
  p.weight_decay = 0.1F;
  p.adjusted_lr = 0.04F;
  p.ef = 0.95F;
  DeviceArray<float> dW(W);
  DeviceMomentum dM(M, dtype);
  DeviceArray<bf16_bits> dU(U);
  auto s = create_stream();
  masked_post(dW.data(), dM.data(), dtype, dU.data(), nullptr, N, L, u_rows, C, p, s);
  synchronize(s);
  ref::masked_post(W, M, dtype, U, nullptr, N, L, u_rows, C, p);
  // Same operations in the same order with single roundings (no FMA on either side): exact.
  CHECK(dW.download() == W);
  CHECK(dM.download() == M);
  destroy_stream(s);
}

TEST_CASE("nordion2_row_scale matches the reference; masked post applies O' = O * scale", "[gpu][post]") {
  const int N = 2;
  const std::int64_t L = 11, u_rows = 11, C = 256;
  const auto U = sparse_update(N, u_rows, C, 21);
  std::vector<float> V(N * L);
  for (std::size_t i = 0; i < V.size(); ++i) V[i] = 0.01F * static_cast<float>(i % 5);
  DeviceArray<bf16_bits> dU(U);
  DeviceArray<float> dV(V), dscale(N * L);
  auto s = create_stream();
  nordion2_row_scale(dU.data(), N, L, u_rows, C, dV.data(), 0.95F, dscale.data(), s);
  synchronize(s);
  std::vector<float> scale;
  ref::nordion2_row_scale(U, N, L, u_rows, C, V, 0.95F, scale);
  const auto gv = dV.download(), gs = dscale.download();
  for (std::size_t i = 0; i < V.size(); ++i) {
    // fp32 sums of 256 squares vs double: relative error well under 1e-5.
    CHECK(std::abs(gv[i] - V[i]) <= 1e-5F * std::abs(V[i]) + 1e-12F);
    CHECK(std::abs(gs[i] - scale[i]) <= 1e-5F * std::abs(scale[i]));
    if (i % static_cast<std::size_t>(L) % 3 == 1) CHECK(gs[i] == 0.0F);  // rows not applied: no update, V untouched
  }
  // Frobenius preservation per matrix: |O'|_F == |O|_F over the applied rows (§2.8).
  for (int m = 0; m < N; ++m) {
    double o = 0, o2 = 0;
    for (std::int64_t r = 0; r < L; ++r)
      for (std::int64_t c = 0; c < C; ++c) {
        const double u = from_bf16(U[(m * u_rows + r) * C + c]);
        o += u * u;
        o2 += u * u * gs[m * L + r] * gs[m * L + r];
      }
    CHECK(std::sqrt(o2) == Approx(std::sqrt(o)).epsilon(1e-5));
  }
  destroy_stream(s);
}
