// Inventory JSON (optimizer/inventory.cpp), then the plan built from it (sizes derived from it).
#include "fuzz/fuzz_util.hpp"
#include "optimizer/inventory.hpp"
#include "optimizer/plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return dionsim::fuzz::run_one([&] {
    const auto inv = dionsim::opt::parse_inventory_json(text, "fuzz.json");
    dionsim::opt::PlanConfig pc;
    pc.world = 4;
    (void)dionsim::opt::make_plan(inv, pc);
  });
}
