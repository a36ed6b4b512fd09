#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "sim/training_model.hpp"

using namespace dionsim;
using namespace dionsim::sim;

namespace {
// seed-5120x8: 33 x 5120^2 + 16 x 20480*5120 = 2,543,321,088 parameters.
constexpr std::int64_t kSeedParams = 33LL * 5120 * 5120 + 16LL * 20480 * 5120;

TrainingConfig seed_config(std::int64_t world) {
  TrainingConfig c;
  c.params = kSeedParams;
  c.tokens_per_gpu = 16384;
  c.world = world;
  c.peak_bf16_TFLOPs = 989.4;
  return c;
}
}  // namespace

TEST_CASE("MFU of the seed's 2-node global run from its step wall", "[training_model]") {
  // The thread: 584.5 ms step, H100 MFU 43.6 % at ~130k tokens/step on 8 GPUs (16384 per GPU).
  auto c = seed_config(8);
  c.fwd_bwd_ms = 400.0;
  CHECK(mfu_pct(c, 584'500'000) == Approx(43.2).margin(0.1));
}

TEST_CASE("compute from FLOPs and MFU is 6 P T / (peak mfu)", "[training_model]") {
  auto c = seed_config(4);
  c.mfu = 0.5;
  const double expect_s = 6.0 * kSeedParams * 16384 / (989.4e12 * 0.5);
  CHECK(fwd_bwd_compute_ns(c) == Approx(expect_s * 1e9).epsilon(1e-9));
  // the step's MFU when it only computes equals the input MFU
  CHECK(mfu_pct(c, fwd_bwd_compute_ns(c)) == Approx(50.0).epsilon(1e-6));
}

TEST_CASE("FSDP bytes per rank", "[training_model]") {
  const auto b = fsdp_bytes(1000, 8);  // ceil(1000/8) = 125 rows of parameters per rank
  CHECK(b.allgather_input_bytes == 250);
  CHECK(b.allgathers == 2);
  CHECK(b.reducescatter_input_bytes == 125 * 8 * 4);
  const auto one = fsdp_bytes(1000, 1);
  CHECK(one.allgather_input_bytes == 0);
  CHECK(one.reducescatter_input_bytes == 0);
}

TEST_CASE("FSDP comm is exposed only beyond the compute", "[training_model]") {
  auto c = seed_config(8);
  c.fwd_bwd_ms = 100.0;
  auto hidden = fwd_bwd(c, 80'000'000);
  CHECK(hidden.wall_ns == 100'000'000);
  CHECK(hidden.fsdp_exposed_ns == 0);
  auto exposed = fwd_bwd(c, 130'000'000);
  CHECK(exposed.wall_ns == 130'000'000);
  CHECK(exposed.fsdp_exposed_ns == 30'000'000);
}

TEST_CASE("training config validation", "[training_model]") {
  auto c = seed_config(8);
  CHECK_THROWS_AS(validate(c), UsageError);  // neither
  c.fwd_bwd_ms = 1.0;
  c.mfu = 0.4;
  CHECK_THROWS_AS(validate(c), UsageError);  // both
  c.fwd_bwd_ms.reset();
  c.mfu = 1.5;
  CHECK_THROWS_AS(validate(c), UsageError);
  c.mfu = 0.4;
  CHECK_NOTHROW(validate(c));
  c.tokens_per_gpu = 0;
  CHECK_THROWS_AS(validate(c), UsageError);
}
