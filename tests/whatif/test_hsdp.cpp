// HSDP (--shard-group): the optimizer's plan and collectives live in the shard group, so at 1024
// GPUs with shard group 8 the optimizer step is the 8-GPU step exactly; the backward adds the
// all-reduce of each layer's reduced gradient shard across the 128 replicas (the collective model's).
#include <catch2/catch.hpp>
#include <cmath>

#include "common/error.hpp"
#include "optimizer/inventory.hpp"
#include "sim/collective_model.hpp"
#include "sim/whatif.hpp"

using namespace dionsim;
using namespace dionsim::sim;

namespace {

WhatifStudy study(std::int64_t gpus, std::int64_t shard_group) {
  WhatifStudy s;
  s.base.model = "gpt-2048x16";
  s.base.mfu = 0.4;
  s.base.tokens_per_gpu = 8192;
  s.scopes = {opt::Scope::global};
  s.fractions = {0.25};
  s.capacity_factors = {std::nullopt};
  s.gpus = {gpus};
  s.fabrics = {topo::preset("b200-ndr400")};
  if (shard_group > 0) s.shard_groups = {shard_group};
  return s;
}

}  // namespace

TEST_CASE("HSDP shard group 8 at 1024 GPUs: the 8-GPU optimizer step plus the replica all-reduce", "[whatif][hsdp]") {
  const auto inventory = opt::load_inventory("gpt-2048x16");
  REQUIRE(inventory.layers == 16);
  const KernelModel kernels(default_kernel_model_config(hardware_preset("b200", "--hardware")));
  const auto one_node = expand(study(8, 0));
  const auto hsdp = expand(study(1024, 8));
  REQUIRE(one_node.size() == 1);
  REQUIRE(hsdp.size() == 1);
  CHECK(hsdp.front().world() == 1024);
  CHECK(hsdp.front().shard_world() == 8);
  CHECK(hsdp.front().plan_config().world == 8);
  const auto r8 = run_whatif(one_node.front(), inventory, kernels);
  const auto r = run_whatif(hsdp.front(), inventory, kernels);

  // the optimizer: same plan bytes, same times, event for event
  CHECK(r.plan.a2a_payload_bytes == r8.plan.a2a_payload_bytes);
  CHECK(r.plan.norms_allgather_bytes == r8.plan.norms_allgather_bytes);
  CHECK(r.opt.a2a_bytes == r8.opt.a2a_bytes);
  CHECK(r.opt.wall_ns == r8.opt.wall_ns);
  CHECK(r.opt.a2a_ns == r8.opt.a2a_ns);
  CHECK(r.opt.gpu_busy_ns == r8.opt.gpu_busy_ns);
  CHECK(r.opt.events.size() == r8.opt.events.size());

  // the backward: the 8-GPU FSDP collectives plus one all-reduce per layer across 128 replicas.
  // P = 16 x 12 x 2048^2 parameters (q, k, v, o: 4h^2; fc, proj: 8h^2), 16 layers, shard of 8:
  // ceil(P/16/8) fp32 gradients per rank, all-reduced by the 128 replicas, one GPU of each host:
  // the call `dionsim collective --op allreduce --nodes 128 --gpus-per-node 1 --fabric b200-ndr400`
  // prices.
  const std::int64_t params = 16LL * 12 * 2048 * 2048;
  CHECK(r.params == params);
  const std::int64_t shard = (params / 16 + 7) / 8;
  const std::int64_t bytes = shard * 4;
  const auto fabric = topo::preset("b200-ndr400");
  const CollectiveModel replicas(fabric, 128, 1);
  const CollectiveCost ar = replicas.cost(CollectiveOp::allreduce, bytes);
  CHECK(r.fwd_bwd.replica_reduce_ns == 16 * static_cast<std::int64_t>(std::ceil(ar.time_us * 1e3)));
  // one NIC per replica: no faster than a ring over one GPU's NIC moves the bus bytes
  // every rank's reduced shard leaves its host at least once, through its one NIC
  CHECK(ar.time_us * 1e-6 >= static_cast<double>(bytes) / (fabric.nic_GBps * 1e9));
  CHECK(r8.fwd_bwd.replica_reduce_ns == 0);
  CHECK(r.fwd_bwd.fsdp_comm_ns - r8.fwd_bwd.fsdp_comm_ns == r.fwd_bwd.replica_reduce_ns);
  CHECK(r.fwd_bwd.compute_ns == r8.fwd_bwd.compute_ns);
  CHECK(r.fwd_bwd.wall_ns >= r8.fwd_bwd.wall_ns);
  CHECK(r.step_wall_ns == r.fwd_bwd.wall_ns + r.opt.wall_ns);

  // FSDP over all 1024 GPUs is another optimizer step (the plan's world is 1024)
  const auto flat = run_whatif(expand(study(1024, 0)).front(), inventory, kernels);
  CHECK(flat.plan.a2a_payload_bytes != r8.plan.a2a_payload_bytes);
  CHECK(flat.fwd_bwd.replica_reduce_ns == 0);

  // bf16 reduction halves the bytes of the replica all-reduce
  auto bf16 = study(1024, 8);
  bf16.base.reduce_dtype = "bf16";
  const auto rb = run_whatif(expand(bf16).front(), inventory, kernels);
  CHECK(rb.fwd_bwd.replica_reduce_ns < r.fwd_bwd.replica_reduce_ns);
  CHECK(rb.opt.wall_ns == r.opt.wall_ns);
}

TEST_CASE("whatif's FSDP collectives are the calls `collective` prices", "[whatif][hsdp][collective]") {
  // gpt-2048x16 FSDP over 2 x 8 B200: per layer, an all-gather of the bf16 shard (nccl-tests size:
  // the gathered output, 2 bytes x P/L) and a reduce-scatter of the fp32 gradients (input 4 x P/L),
  // each the model's time for that call on 2 nodes x 8 (`dionsim collective --op allgather|reducescatter
  // --nodes 2 --gpus-per-node 8 --fabric b200-ndr400`): 2L - 1 all-gathers and L reduce-scatters.
  const auto inventory = opt::load_inventory("gpt-2048x16");
  const KernelModel kernels(default_kernel_model_config(hardware_preset("b200", "--hardware")));
  const auto r = run_whatif(expand(study(16, 0)).front(), inventory, kernels);
  const std::int64_t per_layer = 12LL * 2048 * 2048, L = 16, w = 16;
  const std::int64_t shard = (per_layer + w - 1) / w;
  const CollectiveModel model(topo::preset("b200-ndr400"), 2, 8);
  const auto ns = [](const CollectiveCost& c) { return static_cast<std::int64_t>(std::ceil(c.time_us * 1e3)); };
  const std::int64_t ag = ns(model.cost(CollectiveOp::allgather, 2 * shard * w));
  const std::int64_t rs = ns(model.cost(CollectiveOp::reducescatter, 4 * shard * w));
  CHECK(r.fwd_bwd.fsdp_comm_ns == (2 * L - 1) * ag + L * rs);
  // the ring crosses both hosts' 8 NICs at once: faster than one GPU's NIC would carry it
  const auto spec = topo::preset("b200-ndr400");
  const double one_nic_s = static_cast<double>(2 * shard * (w - 1)) / (spec.nic_GBps * spec.nic_efficiency * 1e9);
  CHECK(static_cast<double>(ag) * 1e-9 < 0.5 * one_nic_s);
}

TEST_CASE("whatif sizes: --gpus, NVLink domains, shard groups and global batches are checked", "[whatif][hsdp]") {
  auto s = study(64, 0);
  s.fabrics = {topo::preset("gb200-nvl72")};
  const auto in_one_rack = expand(s);  // 64 GPUs of one NVL72 rack: valid
  CHECK(in_one_rack.front().nodes == 16);
  CHECK(in_one_rack.front().gpus_per_node == 4);
  s.gpus = {128};  // 72 + 56: not whole racks
  CHECK_THROWS_WITH(expand(s), Catch::Contains("--gpus: got '128 GPUs on gb200-nvl72'") &&
                                   Catch::Contains("72-GPU NVLink domain"));
  s.gpus = {144};
  CHECK(expand(s).front().nodes == 36);
  s.gpus = {146};
  CHECK_THROWS_WITH(expand(s), Catch::Contains("a positive multiple of the GPUs per host (4"));
  auto g = study(64, 3);
  CHECK_THROWS_WITH(expand(g), Catch::Contains("--shard-group: got '3'"));
  auto tokens = study(64, 0);
  tokens.global_batch_tokens = {1'048'576, 1000};
  CHECK_THROWS_WITH(expand(tokens), Catch::Contains("--global-batch-tokens: got '1000', expected a multiple of the world (64"));
  tokens.global_batch_tokens = {1'048'576};
  CHECK(expand(tokens).front().tokens_per_gpu == 16384);
  auto lists = study(64, 0);
  lists.base.mfu.reset();
  lists.mfus = {0.3, 0.5};
  lists.shard_groups = {8, 64};
  const auto configs = expand(lists);
  REQUIRE(configs.size() == 4);
  CHECK(configs[0].shard_group == 8);
  CHECK(configs[2].shard_group == 0);  // a group of the whole world is FSDP
  CHECK(*configs[1].mfu == 0.5);
}
