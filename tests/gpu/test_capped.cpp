// global_capped transport: spec test vectors, the header bit-cast, and a simulated-world round trip
// (pack -> all-to-all by copies -> route/assemble -> identity NS -> repack -> unpack) against the
// CPU reference, bit-exact.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>

#include "kernels/ops.hpp"
#include "kernels/reference.hpp"
#include "tests/gpu/gpu_test_util.hpp"

using namespace dionsim::kernels;
using namespace dionsim::kernels::testing;

namespace {

struct RankPack {
  std::vector<bf16_bits> send;
  std::vector<std::int32_t> slot_src;
  long long winners = 0, deferred = 0;
};

RankPack gpu_pack(const CappedShape& sh, const std::vector<float>& M, MomentumDtype dtype,
                  const std::vector<float>& norms, const std::vector<std::uint8_t>& winners,
                  const std::vector<float>& thresh) {
  DeviceMomentum dM(M.empty() ? std::vector<float>(1) : M, dtype);
  DeviceArray<float> dn(norms.empty() ? std::vector<float>(1) : norms), dt(thresh);
  DeviceArray<std::uint8_t> dw(winners);
  DeviceArray<bf16_bits> send(sh.w * (1 + sh.B) * sh.C);
  DeviceArray<std::int32_t> slot_src(sh.w * sh.B);
  DeviceArray<long long> stats(std::vector<long long>{0, 0});
  CappedScratch scratch(sh);
  auto s = create_stream();
  capped_pack(sh, dM.data(), dtype, dn.data(), dw.data(), dt.data(), scratch, send.data(), slot_src.data(),
              stats.data(), s);
  synchronize(s);
  destroy_stream(s);
  const auto st = stats.download();
  return {send.download(), slot_src.download(), st[0], st[1]};
}

std::vector<std::int32_t> header(const CappedShape& sh, const std::vector<bf16_bits>& send, int d) {
  std::vector<std::int32_t> c(static_cast<std::size_t>(sh.pr));
  decode_header_counts(send.data() + d * (1 + sh.B) * sh.C, sh.pr, c.data());
  return c;
}

}  // namespace

TEST_CASE("header bit-cast round trip (spec TV6)", "[gpu][capped]") {
  const std::vector<bf16_bits> d0 = {0x0140, 0x0000, 0x1001, 0x0000, 0x0000, 0x0000};
  const std::vector<bf16_bits> d1 = {0x1170, 0x0001, 0x0001, 0x0000, 0x0000, 0x0010};
  std::int32_t c[3];
  decode_header_counts(d0.data(), 3, c);
  CHECK((c[0] == 320 && c[1] == 4097 && c[2] == 0));
  decode_header_counts(d1.data(), 3, c);
  CHECK((c[0] == 70000 && c[1] == 1 && c[2] == 1048576));
}

TEST_CASE("capped_pack reproduces spec TV2 (pooled budget, scale-normalized eviction)", "[gpu][capped]") {
  // w=2, N=4, S=8 (L=4 each), C=8, f=0.25, c=1.0: pl=4, k=1, kw=2, k_tot=2, B=2, pr=2.
  const std::vector<float> keys = {100, 90, 1, 1, 1, 1, 1, 1,          2.0F, 0.1F, 0.1F, 0.1F, 1.5F, 0.1F, 0.1F, 0.1F,
                                   1,   2,  3, 4, 5, 6, 7, 8,          4,    4,    4,    4,    4,    4,    4,    4};
  std::vector<std::uint8_t> winners;
  std::vector<float> thresh;
  ref::stable_topk_mask(keys, 4, 8, 2, winners, thresh);
  for (int rank = 0; rank < 2; ++rank) {
    CappedShape sh{2, rank, 4, 2, 4, 4, 8, 2, 2, 2};
    std::vector<float> norms, M(4 * 4 * 8);
    for (int m = 0; m < 4; ++m)
      for (int r = 0; r < 4; ++r) norms.push_back(keys[m * 8 + rank * 4 + r]);
    for (std::size_t i = 0; i < M.size(); ++i) M[i] = static_cast<float>(i) * 0.5F + 1.0F;  // row id in the values
    const auto got = gpu_pack(sh, M, MomentumDtype::fp32, norms, winners, thresh);
    const auto want = ref::capped_pack(sh, M, MomentumDtype::fp32, norms, winners, thresh);
    CHECK(got.send == want.send);
    CHECK(got.slot_src == want.slot_src);
    if (rank == 0) {
      CHECK(header(sh, got.send, 0) == std::vector<std::int32_t>{1, 1});   // m0 row 1 deferred
      CHECK(header(sh, got.send, 1) == std::vector<std::int32_t>{0, 2});
      CHECK(std::vector<std::int32_t>(got.slot_src.begin(), got.slot_src.end()) ==
            std::vector<std::int32_t>{0 * 4 + 0, 1 * 4 + 0, 3 * 4 + 0, 3 * 4 + 1});
      CHECK((got.winners == 5 && got.deferred == 1));
    } else {
      CHECK(header(sh, got.send, 0) == std::vector<std::int32_t>{0, 1});
      CHECK(header(sh, got.send, 1) == std::vector<std::int32_t>{2, 0});
      CHECK(std::vector<std::int32_t>(got.slot_src.begin(), got.slot_src.end()) ==
            std::vector<std::int32_t>{1 * 4 + 0, -1, 2 * 4 + 2, 2 * 4 + 3});   // ascending row order
      CHECK((got.winners == 3 && got.deferred == 0));
    }
  }
}

TEST_CASE("capped transport round trip over a simulated world is bit-exact", "[gpu][capped]") {
  const auto dtype = GENERATE(MomentumDtype::fp32, MomentumDtype::bf16);
  // w=3, N=5 (pr=2, one virtual matrix), S=23 (pl=8, L = 8, 8, 7), C=16, f=0.3: k=3, k_tot=7,
  // kw=9, c=1.0 -> B=6 (tight: overflow and deferral happen).
  const int w = 3, N = 5, pr = 2;
  const std::int64_t pl = 8, C = 16, k_tot = 7, kw = 9, B = 6;
  const std::vector<std::int64_t> L = {8, 8, 7};
  std::vector<std::vector<float>> M(w), norms(w);
  std::vector<float> gathered(static_cast<std::size_t>(w * N * pl), -1.0F);
  auto s = create_stream();
  for (int r = 0; r < w; ++r) {
    // Row scales vary by matrix (cross-matrix skew) so that eviction order matters.
    std::vector<float> G = random_floats(N * L[r] * C, 100 + r);
    for (int m = 0; m < N; ++m)
      for (std::int64_t i = 0; i < L[r] * C; ++i) G[(m * L[r]) * C + i] *= std::pow(10.0F, static_cast<float>(m - 2));
    // Rank 0 holds every winner of matrix 0 (7 rows > B = 6 for its chunk): overflow is certain.
    if (r == 0)
      for (std::int64_t i = 0; i < L[0] * C; ++i) G[i] *= 1000.0F;
    DeviceMomentum dM(std::vector<float>(G.size(), 0.0F), dtype);
    DeviceArray<float> dG(G), dn(N * L[r]);
    accumulate_row_l1(dG.data(), dM.data(), dtype, N * L[r], C, dn.data(), s);
    synchronize(s);
    M[r] = dM.download();
    norms[r] = dn.download();
    for (int m = 0; m < N; ++m)
      for (std::int64_t row = 0; row < L[r]; ++row) gathered[(m * w + r) * pl + row] = norms[r][m * L[r] + row];
  }
  // Winners on the device from the gathered [N][w*pl] keys (every rank computes the same).
  DeviceArray<float> dkeys(gathered), dthresh(N);
  DeviceArray<std::uint8_t> dwin(N * w * pl);
  stable_topk_mask(dkeys.data(), N, w * pl, k_tot, dwin.data(), dthresh.data(), s);
  synchronize(s);
  const auto winners = dwin.download();
  const auto thresh = dthresh.download();
  for (int m = 0; m < N; ++m) {
    int count = 0;
    for (std::int64_t p = 0; p < w * pl; ++p) count += winners[m * w * pl + p];
    CHECK(count == k_tot);  // invariant 1
  }
  std::vector<RankPack> packs;
  long long total_winners = 0, total_deferred = 0;
  for (int r = 0; r < w; ++r) {
    CappedShape sh{w, r, N, pr, pl, L[r], C, k_tot, kw, B};
    packs.push_back(gpu_pack(sh, M[r], dtype, norms[r], winners, thresh));
    const auto want = ref::capped_pack(sh, M[r], dtype, norms[r], winners, thresh);
    CHECK(packs.back().send == want.send);
    CHECK(packs.back().slot_src == want.slot_src);
    CHECK((packs.back().winners == want.winners && packs.back().deferred == want.deferred));
    total_winners += packs.back().winners;
    total_deferred += packs.back().deferred;
  }
  CHECK(total_winners == N * k_tot);
  CHECK(total_deferred > 0);  // the tight budget really evicts something in this case
  // Forward all-to-all by copies; owner d routes, assembles, runs identity NS, repacks.
  const std::size_t fchunk = static_cast<std::size_t>((1 + B) * C), rchunk = static_cast<std::size_t>(B * C);
  std::vector<std::vector<bf16_bits>> back(w, std::vector<bf16_bits>(w * rchunk));
  for (int d = 0; d < w; ++d) {
    std::vector<bf16_bits> recv;
    for (int r = 0; r < w; ++r) recv.insert(recv.end(), packs[r].send.begin() + d * fchunk, packs[r].send.begin() + (d + 1) * fchunk);
    CappedShape sh{w, d, N, pr, pl, L[d], C, k_tot, kw, B};
    DeviceArray<bf16_bits> drecv(recv), buf(pr * kw * C), ret(w * rchunk);
    DeviceArray<std::int32_t> route(w * B);
    capped_route(sh, drecv.data(), route.data(), s);
    capped_assemble(sh, drecv.data(), route.data(), buf.data(), s);
    capped_repack(sh, buf.data(), route.data(), ret.data(), s);
    synchronize(s);
    std::vector<bf16_bits> want_buf;
    std::vector<std::int32_t> want_route;
    ref::capped_assemble(sh, recv, want_buf, want_route);
    CHECK(buf.download() == want_buf);
    CHECK(route.download() == want_route);
    const auto r = ret.download();
    for (int src = 0; src < w; ++src) std::copy(r.begin() + src * rchunk, r.begin() + (src + 1) * rchunk, back[src].begin() + d * rchunk);
  }
  // Unpack on every sender: kept winner rows come back bit-exact, everything else is zero.
  for (int r = 0; r < w; ++r) {
    CappedShape sh{w, r, N, pr, pl, L[r], C, k_tot, kw, B};
    DeviceArray<bf16_bits> dback(back[r]), U(N * L[r] * C);
    DeviceArray<std::int32_t> slot_src(packs[r].slot_src);
    capped_unpack(sh, dback.data(), slot_src.data(), U.data(), s);
    synchronize(s);
    const auto u = U.download();
    std::map<std::int32_t, bool> kept;
    for (auto src : packs[r].slot_src)
      if (src >= 0) kept[src] = true;
    for (int m = 0; m < N; ++m)
      for (std::int64_t row = 0; row < L[r]; ++row) {
        const auto flat = static_cast<std::int32_t>(m * L[r] + row);
        if (kept.count(flat)) CHECK(winners[m * w * pl + r * pl + row] == 1);  // applied rows are winners
        for (std::int64_t c = 0; c < C; ++c) {
          const auto i = static_cast<std::size_t>(flat * C + c);
          CHECK(u[i] == (kept.count(flat) ? to_bf16(M[r][i]) : bf16_bits{0}));
        }
      }
  }
  destroy_stream(s);
}
