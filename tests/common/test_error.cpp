#include <catch2/catch.hpp>

#include "common/error.hpp"

using namespace dionsim;

TEST_CASE("errors carry their exit codes and the where/what/expected message", "[common]") {
  try {
    throw_bad_input("topo.toml:12", "nic_GBps", "-5", "a positive number");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::bad_input);
    CHECK(std::string(e.what()) == "topo.toml:12: nic_GBps: got '-5', expected a positive number");
  }
  CHECK(UsageError("x").code() == ExitCode::usage);
  CHECK(IoError("x").code() == ExitCode::io);
  CHECK(DeviceError("x").code() == ExitCode::device);
  CHECK(NoDeviceError("x").code() == ExitCode::no_device);
}
