// GPU test runner: exit 77 (ctest SKIP_RETURN_CODE) when there is no CUDA device.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "common/error.hpp"
#include "kernels/device.hpp"

int main(int argc, char** argv) {
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::string(argv[i]).rfind("--list", 0) == 0;
  if (!listing) {
    try {
      const auto devices = dionsim::kernels::require_devices(1);
      for (const auto& d : devices)
        std::fprintf(stderr, "tests_gpu: device %d: %s (sm_%d%d, %d SMs, %.1f GB)\n", d.index, d.name.c_str(), d.sm_major,
                     d.sm_minor, d.multiprocessors, static_cast<double>(d.memory_bytes) / 1e9);
    } catch (const dionsim::NoDeviceError& e) {
      std::fprintf(stderr, "tests_gpu: SKIP: %s\n", e.what());
      return static_cast<int>(dionsim::ExitCode::no_device);
    }
  }
  return Catch::Session().run(argc, argv);
}
