// Kineto / Chrome trace (analysis/measured/kineto*.cpp), gzipped or not, then the step reduction.
#include "analysis/measured/kineto.hpp"
#include "analysis/measured/kineto_io.hpp"
#include "fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = dionsim::fuzz::write_scratch("trace.json", data, size);
  return dionsim::fuzz::run_one([&] { (void)dionsim::analysis::reduce_steps(dionsim::analysis::read_kineto_trace(path)); });
}
