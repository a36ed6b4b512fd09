// Measurement and anchor CSVs (analysis/measured/measurements.cpp), then the grouping calibrate does.
#include "analysis/measured/measurements.hpp"
#include "fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  dionsim::fuzz::run_one([&] { (void)dionsim::analysis::group_configurations(dionsim::analysis::parse_measurement_csv(text, "fuzz.csv")); });
  return dionsim::fuzz::run_one([&] { (void)dionsim::analysis::parse_anchors_csv(text, "fuzz.csv"); });
}
