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

TEST_CASE("per-layer overlap: only the first all-gather and the last reduction are exposed", "[training_model]") {
  auto c = seed_config(8);
  c.fwd_bwd_ms = 120.0;  // forward 10 ms, backward 20 ms per layer
  c.layers = 4;
  // comm under the compute: exposed = layer 0's all-gather before the first forward + layer 0's
  // reduction after the last backward
  auto hidden = fwd_bwd(c, {5'000'000, 6'000'000, 2'000'000});
  CHECK(hidden.wall_ns == 5'000'000 + 120'000'000 + 8'000'000);
  CHECK(hidden.fsdp_exposed_ns == 13'000'000);
  CHECK(hidden.fsdp_comm_ns == 7 * 5'000'000 + 4 * 8'000'000);  // 2L-1 all-gathers, L reductions
  CHECK(hidden.replica_reduce_ns == 4 * 2'000'000);
  // comm-bound: 30 ms all-gathers (by hand: forward gathers at 30, 60, 90, 120; F3 120-130;
  // B3 130-150; backward gathers 130-160, 160-190, 190-220; B2 160-180, B1 190-210, B0 220-240)
  auto bound = fwd_bwd(c, {30'000'000, 0, 0});
  CHECK(bound.wall_ns == 240'000'000);
  CHECK(bound.fsdp_exposed_ns == 120'000'000);
  // one layer: nothing overlaps
  c.layers = 1;
  CHECK(fwd_bwd(c, {5'000'000, 8'000'000, 0}).wall_ns == 5'000'000 + 120'000'000 + 8'000'000);
  // no layers given: the whole-step bound max(compute, 2 all-gathers + reductions)
  c.layers = 0;
  CHECK(fwd_bwd(c, {5'000'000, 8'000'000, 0}).wall_ns == 120'000'000);
  CHECK(fwd_bwd(c, {50'000'000, 30'000'000, 0}).wall_ns == 130'000'000);
  CHECK(fwd_bwd(c, {50'000'000, 30'000'000, 0}).fsdp_exposed_ns == 10'000'000);
}

TEST_CASE("contention: the compute runs s times slower while an FSDP collective is in flight", "[training_model]") {
  auto c = seed_config(8);
  c.fwd_bwd_ms = 120.0;  // forward 10 ms, backward 20 ms per layer
  c.layers = 4;
  c.compute_overlap_slowdown = 2.0;
  // By hand (ms): AG0 0-4; F0 4-16 (AG1 4-8 beside it: 2 of its 10 ms of work there); F1 16-28
  // (AG2 16-20); F2 28-40 (AG3 28-32); F3 40-50 alone. B3 50-72 (AG2 50-54), RS3 72-80; B2 72-98
  // (RS3, then AG1 80-84: 12 ms of work done in 26), RS2 98-106; B1 98-124 (RS2, AG0 106-110),
  // RS1 124-132; B0 124-148 (RS1); RS0 148-156.
  const auto slow = fwd_bwd(c, {4'000'000, 6'000'000, 2'000'000});
  CHECK(slow.wall_ns == 156'000'000);
  CHECK(slow.compute_ns == 120'000'000);
  CHECK(slow.fsdp_exposed_ns == 36'000'000);
  c.compute_overlap_slowdown = 1.0;  // none: only layer 0's all-gather and last reduction exposed
  CHECK(fwd_bwd(c, {4'000'000, 6'000'000, 2'000'000}).wall_ns == 4'000'000 + 120'000'000 + 8'000'000);
  // whole-step bound: collectives back to back from 0; hidden ones still cost T (1 - 1/s)
  c.layers = 0;
  c.compute_overlap_slowdown = 2.0;
  CHECK(fwd_bwd(c, {5'000'000, 8'000'000, 0}).wall_ns == 120'000'000 + 9'000'000);
  CHECK(fwd_bwd(c, {50'000'000, 30'000'000, 0}).wall_ns == 120'000'000 + 65'000'000);
  // communication longer than the slowed compute: the communication is the wall
  CHECK(fwd_bwd(c, {100'000'000, 100'000'000, 0}).wall_ns == 300'000'000);
  c.compute_overlap_slowdown = 0.5;
  CHECK_THROWS_WITH(validate(c), Catch::Contains("ns_gemm_overlap_slowdown: got '0.5"));
}

TEST_CASE("HSDP bytes: shard group G, replicas world / G, reduce dtype", "[training_model]") {
  auto c = seed_config(1024);
  c.params = 8000;
  c.layers = 2;           // 4000 parameters per layer
  c.shard_group = 8;      // 500 per rank
  c.reduce_bytes = 2;     // bf16
  const auto b = fsdp_bytes(c);
  CHECK(b.shard_ranks == 8);
  CHECK(b.replicas == 128);
  CHECK(b.allgather_input_bytes == 1000);
  CHECK(b.reducescatter_input_bytes == 500 * 8 * 2);
  CHECK(b.allreduce_bytes == 500 * 2);
  c.shard_group = 0;  // FSDP over 1024, fp32
  c.reduce_bytes = 4;
  const auto f = fsdp_bytes(c);
  CHECK(f.replicas == 1);
  CHECK(f.allreduce_bytes == 0);
  CHECK(f.reducescatter_input_bytes == 4 * 1024 * 4);  // ceil(4000/1024) = 4
  c.shard_group = 1;  // DDP: every rank holds everything, gradients all-reduced
  const auto ddp = fsdp_bytes(c);
  CHECK(ddp.allgathers == 0);
  CHECK(ddp.allreduce_bytes == 4000 * 4);
  c.shard_group = 3;
  c.mfu = 0.5;
  CHECK_THROWS_WITH(validate(c), Catch::Contains("--shard-group: got '3', expected a divisor of the world (1024 GPUs)"));
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
