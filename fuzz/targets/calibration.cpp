// Calibration JSON (analysis/calibration/fit_calibration.cpp read_calibration).
#include "analysis/calibration/fit_calibration.hpp"
#include "fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = dionsim::fuzz::write_scratch("cal.json", data, size);
  return dionsim::fuzz::run_one([&] { (void)dionsim::analysis::read_calibration(path); });
}
