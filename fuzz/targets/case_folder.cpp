// Numerics case folder (optimizer/numerics_case.cpp): the input is case.json; the folder also
// holds small valid W0_w/G0_w .npy files so that a well-formed case reads its arrays too.
#include <vector>

#include "fuzz/fuzz_util.hpp"
#include "optimizer/npy.hpp"
#include "optimizer/numerics_case.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool arrays = [] {
    const std::vector<std::int64_t> shape{4, 4};
    const std::vector<float> values(16, 0.5f);
    for (const char* n : {"W0_w.npy", "G0_w.npy", "G1_w.npy"}) {
      dionsim::opt::write_npy((dionsim::fuzz::scratch() / n).string(), shape, values);
    }
    return true;
  }();
  (void)arrays;
  (void)dionsim::fuzz::write_scratch("case.json", data, size);
  return dionsim::fuzz::run_one([&] { (void)dionsim::opt::load_numerics_case(dionsim::fuzz::scratch().string()); });
}
