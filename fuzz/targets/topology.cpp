// Topology TOML (topologies/topology_file.cpp).
#include "fuzz/fuzz_util.hpp"
#include "topologies/topology_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return dionsim::fuzz::run_one([&] { (void)dionsim::topo::parse_topology(text, "fuzz.toml"); });
}
