// Exact-count stable selection and compaction against std::stable_sort.
#include <catch2/catch.hpp>

#include <random>

#include "kernels/ops.hpp"
#include "kernels/reference.hpp"
#include "tests/gpu/gpu_test_util.hpp"

using namespace dionsim::kernels;

namespace {
std::pair<std::vector<std::uint8_t>, std::vector<float>> gpu_topk(const std::vector<float>& keys, int segs,
                                                                   std::int64_t len, std::int64_t count) {
  DeviceArray<float> dk(keys.empty() ? std::vector<float>{0} : keys), kth(std::max(segs, 1));
  DeviceArray<std::uint8_t> mask(std::max<std::int64_t>(segs * len, 1));
  auto s = create_stream();
  stable_topk_mask(dk.data(), segs, len, count, mask.data(), kth.data(), s);
  synchronize(s);
  destroy_stream(s);
  auto m = mask.download();
  m.resize(static_cast<std::size_t>(segs * len));
  auto k = kth.download();
  k.resize(static_cast<std::size_t>(segs));
  return {m, k};
}
}  // namespace

TEST_CASE("stable_topk_mask: spec TV1 (stable tie-break, -1 padding never wins)", "[gpu][select]") {
  // §8 TV1: gathered [5,3,3,1 | 3,5,2,-1], k_tot = 4 -> positions {0,1,2,5}, thresh 3.
  const auto [mask, kth] = gpu_topk({5, 3, 3, 1, 3, 5, 2, -1}, 1, 8, 4);
  CHECK(mask == std::vector<std::uint8_t>{1, 1, 1, 0, 0, 1, 0, 0});
  CHECK(kth[0] == 3.0F);
}

TEST_CASE("stable_topk_mask: spec TV2 matrices (all-tie m3 picks the lowest positions)", "[gpu][select]") {
  const std::vector<float> keys = {100, 90, 1, 1, 1, 1, 1, 1,          2.0F, 0.1F, 0.1F, 0.1F, 1.5F, 0.1F, 0.1F, 0.1F,
                                   1,   2,  3, 4, 5, 6, 7, 8,          4,    4,    4,    4,    4,    4,    4,    4};
  const auto [mask, kth] = gpu_topk(keys, 4, 8, 2);
  CHECK(mask == std::vector<std::uint8_t>{1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0,
                                          0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0});
  CHECK(kth == std::vector<float>{90, 1.5F, 7, 4});
}

TEST_CASE("stable_topk_mask equals a stable sort on random keys with many ties", "[gpu][select]") {
  std::mt19937_64 rng(7);
  for (const auto& [segs, len, count] : std::vector<std::tuple<int, std::int64_t, std::int64_t>>{
           {1, 1, 1}, {3, 17, 6}, {5, 1000, 250}, {2, 5000, 1280}, {4, 3, 10}, {2, 40960, 10384}, {3, 64, 0}}) {
    std::uniform_int_distribution<int> small(0, 40);
    std::vector<float> keys(static_cast<std::size_t>(segs * len));
    for (auto& k : keys) k = static_cast<float>(small(rng)) * 0.25F - 1.0F;  // includes -1 pads, 0, and ties
    const auto [mask, kth] = gpu_topk(keys, segs, len, count);
    std::vector<std::uint8_t> want;
    std::vector<float> want_kth;
    ref::stable_topk_mask(keys, segs, len, count, want, want_kth);
    INFO("segs " << segs << " len " << len << " count " << count);
    CHECK(mask == want);
    CHECK(kth == want_kth);
  }
}

TEST_CASE("compact_mask lists set positions in ascending order", "[gpu][select]") {
  const std::int64_t len = 3000;
  std::vector<std::uint8_t> mask(2 * len, 0);
  std::mt19937_64 rng(9);
  for (auto& m : mask) m = (rng() % 7) == 0;
  DeviceArray<std::uint8_t> dm(mask);
  DeviceArray<std::int32_t> idx(2 * len), cnt(2);
  auto s = create_stream();
  compact_mask(dm.data(), 2, len, idx.data(), cnt.data(), s);
  synchronize(s);
  const auto i = idx.download(), c = cnt.download();
  for (int sgm = 0; sgm < 2; ++sgm) {
    std::vector<std::int32_t> want;
    for (std::int64_t p = 0; p < len; ++p)
      if (mask[sgm * len + p]) want.push_back(static_cast<std::int32_t>(p));
    REQUIRE(c[sgm] == static_cast<std::int32_t>(want.size()));
    CHECK(std::vector<std::int32_t>(i.begin() + sgm * len, i.begin() + sgm * len + c[sgm]) == want);
  }
  destroy_stream(s);
}
