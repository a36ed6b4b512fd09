// Stored configurations keep their hashes (issue 15): the canonical JSON that the database hashes
// for a what-if, a deferral and a plan run, pinned to what dionsim wrote before the plan's inputs
// moved into one opt::PlanConfig inside each configuration. A stored run is found again (and a
// sweep resumes) only while these stay byte for byte the same.
#include <catch2/catch.hpp>
#include <string>

#include "analysis/records/records.hpp"
#include "analysis/store/store_provenance.hpp"
#include "common/config_match.hpp"
#include "optimizer/deferral.hpp"
#include "optimizer/inventory.hpp"
#include "sim/whatif.hpp"

using namespace dionsim;

namespace {

// `dionsim whatif --model gpt-1b --optimizer dion2 --ns polar_express --scope local,global_capped
//  --capacity-factor auto,2 --gpus 16 --fabric p5-efa --mfu 0.4 --shard-group 8` (no calibration file).
std::vector<sim::WhatifConfig> gpt1b_sweep() {
  sim::WhatifOptions o;
  o.model = "gpt-1b";
  o.optimizer = "dion2";
  o.ns = "polar_express";
  o.scopes = "local,global_capped";
  o.capacities = "auto,2";
  o.gpus = "16";
  o.fabrics = "p5-efa";
  o.mfu = "0.4";
  o.shard_group = "8";
  sim::WhatifStudy study = sim::make_study(o);
  study.base.hardware = "h100-sxm";     // what cmd_whatif sets from the GPU preset
  study.base.calibration = "h100-sxm";  // ... and the calibration's name
  return sim::expand(study);
}

const std::string kTail =
    R"("fabric":"p5-efa","fraction":0.25,"fwd_bwd_ms":null,"gpus_per_node":8,"hardware":"h100-sxm",)"
    R"("host_launch_us":0.0,"layout":"node","leaf_radix":32,"mfu":0.4,"model":"gpt-1b","network":"efa",)"
    R"("nic_effective_GBps":37.5,"nic_latency_us":20.0,"nodes":2,"ns":"polar_express","nvlink_effective_GBps":299.7,)"
    R"("nvlink_latency_us":60.0,"optimizer":"dion2","oversubscription":1.0,"scope":")";
const std::string kHead = R"({"alltoall_algbw_GBps":null,"calibration":"h100-sxm","capacity_factor":)";
const std::string kEnd = R"(","shard_group":8,"tokens_per_gpu":16384,"world":16})";

}  // namespace

TEST_CASE("what-if configurations hash as before: auto as \"auto\" when capped, null otherwise", "[whatif][store]") {
  const auto configs = gpt1b_sweep();
  REQUIRE(configs.size() == 3);  // local once; global_capped at auto and 2
  CHECK(canonical_json(sim::to_json(configs[0])) == kHead + "null," + kTail + "local" + kEnd);
  CHECK(canonical_json(sim::to_json(configs[1])) == kHead + "\"auto\"," + kTail + "global_capped" + kEnd);
  CHECK(canonical_json(sim::to_json(configs[2])) == kHead + "2.0," + kTail + "global_capped" + kEnd);
  // The hashes `dionsim whatif --db` stored for these three before the change.
  CHECK(analysis::config_hash(sim::to_json(configs[0])) == "5452b8d4f4222fe898bbccf773b17bb7139653dae603e8eab6c60af249f954a7");
  CHECK(analysis::config_hash(sim::to_json(configs[1])) == "9a03dd1657c6f6d060f88f737c7bb7fef3ac9c46d02d91d702c733f7f6e63cf2");
  CHECK(analysis::config_hash(sim::to_json(configs[2])) == "af793d9a38265809974f0ddb55622bb709c80e8d1425e360f39ca8e27afa04d5");
  // The plan the what-if makes runs over the shard group, whatever plan.world holds.
  CHECK(configs[2].plan_config().world == 8);
  CHECK(configs[2].plan_config().capacity_factor == 2.0);
}

TEST_CASE("deferral configurations hash as before", "[deferral][store]") {
  // `dionsim deferral --model gpt-768x12 --world 4 --capacity-factor 1.25 --optimizer nordion2
  //  --fraction 0.5 --momentum-dtype bfloat16 --steps 2 --db …`
  opt::DeferralConfig c;
  c.inventory = opt::load_inventory("gpt-768x12");
  c.plan.optimizer = opt::OptimizerKind::nordion2;
  c.plan.world = 4;
  c.plan.fraction = 0.5;
  c.plan.capacity_factor = 1.25;
  c.momentum_dtype = opt::Dtype::bfloat16;
  c.steps = 2;
  const nlohmann::json j = analysis::deferral_config_json(c, "auto", nullptr);
  CHECK(canonical_json(j) ==
        R"({"capacity_factor":1.25,"ef":0.95,"fraction":0.5,"mode":"auto","model":"gpt-768x12","momentum_dtype":"bfloat16",)"
        R"("norms":"iid","optimizer":"nordion2","seed":0,"steps":2,"trials":1,"world":4})");
  CHECK(analysis::config_hash(j) == "b125e0dbc8b15d84f37e7711510144eb8c6e5c45560ae00767fa198a50f7b473");
  c.plan.capacity_factor.reset();  // auto is stored as "auto" here
  CHECK(analysis::deferral_config_json(c, "auto", nullptr).at("capacity_factor") == "auto");
}

TEST_CASE("plan configurations hash as before: auto as null", "[plan][store]") {
  // `dionsim plan --model seed-5120x8 --world 8 --scope global_capped --optimizer nordion2 --ns gram --db …`
  opt::PlanConfig pc;
  pc.world = 8;
  pc.scope = opt::Scope::global_capped;
  pc.optimizer = opt::OptimizerKind::nordion2;
  pc.ns = opt::NsKind::gram;
  const nlohmann::json j = analysis::plan_config_json(opt::load_inventory("seed-5120x8"), pc);
  CHECK(canonical_json(j) ==
        R"({"matrices":[["square",5120,5120,33],["mlp",20480,5120,16]],"model":"seed-5120x8","plan":{"capacity_factor":null,)"
        R"("fraction":0.25,"momentum_bytes":4,"ns":"gram","optimizer":"nordion2","param_bytes":4,"scope":"global_capped",)"
        R"("sharded":true,"world":8}})");
  CHECK(analysis::config_hash(j) == "bcd56cdf92e3f5e602bbba317c0eb78dcbbdccc2444a393a4394b5da84555bd6");
}
