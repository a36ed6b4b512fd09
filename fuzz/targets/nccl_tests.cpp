// nccl-tests output (analysis/measured/measurements.cpp), then the fit calibrate makes of it.
#include "analysis/calibration/fit_calibration.hpp"
#include "analysis/measured/measurements.hpp"
#include "fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  return dionsim::fuzz::run_one([&] {
    (void)dionsim::analysis::looks_like_nccl_tests(text);
    (void)dionsim::analysis::fit_nccl_tests(dionsim::analysis::parse_nccl_tests_output(text, "fuzz.log"));
  });
}
