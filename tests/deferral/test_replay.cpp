// replay:DB streams: the recorded gradient row statistics (optimizer/row_stats.hpp) and the
// replayed stream drawn from them.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <vector>

#include "common/error.hpp"
#include "optimizer/deferral_stream.hpp"
#include "optimizer/row_stats.hpp"

using namespace dionsim::opt;

namespace {

// Gradients [1 step][N params] of S x C, rows s_i * N(0, I) with s_i from `scale`.
template <typename Scale>
std::vector<std::vector<std::vector<float>>> gaussian_rows(std::int64_t N, std::int64_t S, std::int64_t C, Scale scale,
                                                           std::uint64_t seed) {
  std::vector<std::vector<std::vector<float>>> grads(1);
  for (std::int64_t m = 0; m < N; ++m) {
    const std::uint64_t key = stream_key(seed, 0, 0, static_cast<std::uint64_t>(m));
    std::vector<float> g(static_cast<std::size_t>(S * C));
    for (std::int64_t i = 0; i < S; ++i) {
      const double s = scale(m, i, key);
      for (std::int64_t j = 0; j < C; j += 2) {
        double z0 = 0, z1 = 0;
        normal_pair(key, static_cast<std::uint64_t>((i * C + j) / 2), z0, z1);
        g[static_cast<std::size_t>(i * C + j)] = static_cast<float>(s * z0);
        g[static_cast<std::size_t>(i * C + j + 1)] = static_cast<float>(s * z1);
      }
    }
    grads[0].push_back(std::move(g));
  }
  return grads;
}

}  // namespace

TEST_CASE("gradient row statistics by shape group and rank shard, worked by hand", "[deferral][replay]") {
  // Two 3x2 matrices and one 2x2, world 2: shards of 3 rows are rows {0,1} and {2}.
  const std::vector<ParamSpec> params = {{"a", 3, 2}, {"b", 2, 2}, {"c", 3, 2}};
  const std::vector<std::vector<std::vector<float>>> grads = {
      {{1, -1, 2, 2, 0, 3}, {1, 1, -4, 0}, {3, 0, -1, -1, 6, 0}}};
  const auto stats = gradient_row_stats(params, grads, 2);
  REQUIRE(stats.size() == 4);  // (3x2: ranks 0, 1), (2x2: ranks 0, 1)
  CHECK(stats[0].rows == 3);
  CHECK(stats[0].rank == 0);
  CHECK(stats[0].row_count == 4);  // rows 0, 1 of a and c: L1 2, 4, 3, 2
  CHECK(stats[0].mean_l1 == Approx(2.75));
  REQUIRE(stats[0].quantiles.size() == static_cast<std::size_t>(kRowQuantiles));
  CHECK(stats[0].quantiles.front() == Approx(2.0 / 2.75));
  CHECK(stats[0].quantiles.back() == Approx(4.0 / 2.75));
  CHECK(stats[0].quantiles[16] == Approx(2.5 / 2.75));  // median of 2, 2, 3, 4
  CHECK(stats[1].rank == 1);
  CHECK(stats[1].row_count == 2);  // row 2 of a and c: L1 3, 6
  CHECK(stats[1].mean_l1 == Approx(4.5));
  CHECK(stats[2].rows == 2);
  CHECK(stats[2].mean_l1 == Approx(2.0));
  CHECK(stats[3].mean_l1 == Approx(4.0));
  CHECK(quantile_at(stats[1].quantiles, 0.5) == Approx(1.0));
}

TEST_CASE("a replayed stream reproduces the recorded row-scale spread and shard skew", "[deferral][replay]") {
  const std::int64_t N = 8, S = 512, C = 64, W = 4;
  // Recorded: lognormal(0.6) row scales, and rank 2's shard 3x hotter.
  const auto recorded_grads = gaussian_rows(
      N, S, C,
      [&](std::int64_t, std::int64_t i, std::uint64_t key) {
        double z0 = 0, z1 = 0;
        normal_pair(key ^ 0xabcdefULL, static_cast<std::uint64_t>(i), z0, z1);
        return std::exp(0.6 * z0) * (i / (S / W) == 2 ? 3.0 : 1.0);
      },
      11);
  const std::vector<ParamSpec> params(N, ParamSpec{"w", S, C});
  const auto recorded = gradient_row_stats(params, recorded_grads, W);
  NormStream stream = parse_norm_stream("replay:rec.db", "--norms");
  REQUIRE(stream.kind == StreamKind::replay);
  stream.replay = std::make_shared<const ReplayStats>(make_replay(recorded, "rec.db"));

  // Replayed: rows s_i * N(0, I) with s_i from the stream (as the deferral study draws them).
  const auto replayed_grads = gaussian_rows(
      N, S, C,
      [&](std::int64_t m, std::int64_t i, std::uint64_t) {
        return row_scale(stream, stream_key(99, 0, 0, static_cast<std::uint64_t>(m)), i, S, C, W);
      },
      12);
  const auto replayed = gradient_row_stats(params, replayed_grads, W);
  REQUIRE(replayed.size() == recorded.size());
  double total_rec = 0, total_rep = 0;
  for (std::size_t r = 0; r < recorded.size(); ++r) {
    total_rec += recorded[r].mean_l1;
    total_rep += replayed[r].mean_l1;
  }
  for (std::size_t r = 0; r < recorded.size(); ++r) {
    INFO("rank " << r);
    // Shard skew: each shard's share of the mean L1 within 5% (1024 rows per shard, CV ~0.65).
    CHECK(replayed[r].mean_l1 / total_rep == Approx(recorded[r].mean_l1 / total_rec).epsilon(0.05));
    // Spread within the shard (relative to its mean): quartiles within 0.08, p10 and p90 within 0.15
    // (sampling error of 1024 rows ~0.03 at the median, ~0.06 at p90; iid rows would miss p90 by ~0.6).
    for (const auto& [i, margin] : {std::pair{3, 0.15}, {8, 0.08}, {16, 0.08}, {24, 0.08}, {29, 0.15}}) {
      INFO("quantile " << i << "/32");
      CHECK(replayed[r].quantiles[static_cast<std::size_t>(i)] ==
            Approx(recorded[r].quantiles[static_cast<std::size_t>(i)]).margin(margin));
    }
  }
  CHECK(recorded[2].mean_l1 / recorded[0].mean_l1 == Approx(3.0).epsilon(0.1));  // the skew was there to reproduce
}

TEST_CASE("replaying iid gradients gives (nearly) uniform row scales: the Gaussian spread is not counted twice",
          "[deferral][replay]") {
  const std::int64_t N = 8, S = 256, C = 48, W = 2;
  const std::vector<ParamSpec> params(N, ParamSpec{"w", S, C});
  const auto recorded = gradient_row_stats(params,
                                           gaussian_rows(
                                               N, S, C, [](auto, auto, auto) { return 1.0; }, 5),
                                           W);
  // iid rows of 48 columns: L1 / mean spreads by CV ~0.11 on its own.
  CHECK(recorded[0].quantiles[29] - recorded[0].quantiles[3] > 0.2);
  const ReplayStats replay = make_replay(recorded, "iid.db");
  for (std::int64_t i = 0; i < S; ++i) {
    const double s = replay.row_scale(i, S, C, (static_cast<double>(i) + 0.5) / static_cast<double>(S));
    CHECK(s == Approx(1.0).margin(0.12));
  }
  // Another shape maps onto the recorded group by row position.
  CHECK(replay.row_scale(0, 1024, 96, 0.5) == Approx(1.0).margin(0.12));
}

TEST_CASE("replay: refused without statistics", "[deferral][replay]") {
  CHECK_THROWS_AS(make_replay({}, "empty.db"), dionsim::InputError);
  CHECK_THROWS_AS(parse_norm_stream("replay:", "--norms"), dionsim::UsageError);
}
