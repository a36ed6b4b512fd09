// .npy reader (optimizer/npy.cpp).
#include "fuzz/fuzz_util.hpp"
#include "optimizer/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = dionsim::fuzz::write_scratch("a.npy", data, size);
  return dionsim::fuzz::run_one([&] { (void)dionsim::opt::read_npy(path); });
}
