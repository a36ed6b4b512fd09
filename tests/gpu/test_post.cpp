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

TEST_CASE("nordion2_row_scale matches the reference, and masked post applies O' = O * scale", "[gpu][post]") {
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

// The `local` and `global_capped` posts read each row's update from the reverse payload through a
// row map instead of a scattered dense U: identical results bit for bit, maps as specified.
TEST_CASE("row-mapped posts equal the dense-U posts, and row maps from an index and from capped slots", "[gpu][post]") {
  const auto dtype = GENERATE(MomentumDtype::fp32, MomentumDtype::bf16);
  const int N = 3;
  const std::int64_t L = 10, k = 4, C = 132;
  // local-style selection: matrix m selects count[m] <= k rows, index = ascending positions.
  const std::vector<std::int32_t> count{4, 2, 0};
  std::vector<std::int32_t> index(N * L, 0);
  const std::vector<std::vector<std::int32_t>> picks{{0, 3, 4, 9}, {5, 7}, {}};
  for (int m = 0; m < N; ++m)
    for (std::size_t t = 0; t < picks[m].size(); ++t) index[m * L + static_cast<std::int64_t>(t)] = picks[m][t];
  // reverse payload [N][k][C]; the selected row t of matrix m is row m*k + t (one left all zero:
  // a selected row with a zero update is not applied, as with a dense U).
  auto recv = to_bf16(random_floats(N * k * C, 41));
  for (std::int64_t c = 0; c < C; ++c) recv[(1 * k + 1) * C + c] = 0;
  std::vector<bf16_bits> U(N * L * C, 0);  // what the scatter pass built
  std::vector<std::int32_t> want_map(N * L, -1);
  for (int m = 0; m < N; ++m)
    for (std::int32_t t = 0; t < count[m]; ++t) {
      const std::int64_t r = index[m * L + t];
      want_map[m * L + r] = static_cast<std::int32_t>(m * k + t);
      std::copy_n(recv.begin() + (m * k + t) * C, C, U.begin() + (m * L + r) * C);
    }
  DeviceArray<std::int32_t> dindex(index), dcount(count), dmap(N * L);
  auto s = create_stream();
  row_map_from_index(dindex.data(), dcount.data(), N, L, k, dmap.data(), s);
  synchronize(s);
  CHECK(dmap.download() == want_map);
  // capped-style slots: slot i -> row slot_src[i] (or -1); inverted it is the same kind of map.
  const std::vector<std::int32_t> slot_src{7, -1, 0, 29, -1, 12};
  std::vector<std::int32_t> want_slots(N * L, -1);
  for (std::size_t i = 0; i < slot_src.size(); ++i)
    if (slot_src[i] >= 0) want_slots[static_cast<std::size_t>(slot_src[i])] = static_cast<std::int32_t>(i);
  DeviceArray<std::int32_t> dslots(slot_src), dmap2(N * L);
  row_map_from_slots(dslots.data(), static_cast<std::int64_t>(slot_src.size()), N * L, dmap2.data(), s);
  synchronize(s);
  CHECK(dmap2.download() == want_slots);

  auto W = random_floats(N * L * C, 42);
  auto M = random_floats(N * L * C, 43);
  if (dtype == MomentumDtype::bf16) M = from_bf16(to_bf16(M));
  PostParams p;
  p.lr = 0.02F;
  p.weight_decay = 0.1F;
  p.adjusted_lr = 0.04F;
  p.ef = 0.9F;
  std::vector<float> V(N * L, 0.02F);
  DeviceArray<float> dW1(W), dW2(W), dV1(V), dV2(V), ds1(N * L), ds2(N * L);
  DeviceMomentum dM1(M, dtype), dM2(M, dtype);
  DeviceArray<bf16_bits> dU(U), drecv(recv);
  nordion2_row_scale(dU.data(), N, L, L, C, dV1.data(), 0.95F, ds1.data(), s);
  nordion2_row_scale(drecv.data(), N, L, L, C, dV2.data(), 0.95F, ds2.data(), s, false, dmap.data());
  masked_post(dW1.data(), dM1.data(), dtype, dU.data(), ds1.data(), N, L, L, C, p, s);
  masked_post(dW2.data(), dM2.data(), dtype, drecv.data(), ds2.data(), N, L, L, C, p, s, dmap.data());
  DeviceArray<float> dW3(W), dW4(W);  // Dion2: no row scale, bf16-rounded update
  DeviceMomentum dM3(M, dtype), dM4(M, dtype);
  masked_post(dW3.data(), dM3.data(), dtype, dU.data(), nullptr, N, L, L, C, p, s);
  masked_post(dW4.data(), dM4.data(), dtype, drecv.data(), nullptr, N, L, L, C, p, s, dmap.data());
  synchronize(s);
  CHECK(dW4.download() == dW3.download());
  CHECK(dM4.download() == dM3.download());
  CHECK(dV2.download() == dV1.download());
  CHECK(ds2.download() == ds1.download());
  CHECK(dW2.download() == dW1.download());
  CHECK(dM2.download() == dM1.download());
  CHECK(dW1.download() != W);  // the posts did something
  destroy_stream(s);
}
