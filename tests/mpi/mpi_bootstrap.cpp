// The MPI bootstrap of common/launch.hpp, run by ctest under `mpirun -np 2` (tests/mpi/CMakeLists.txt).
// No GPU and no Catch2: every rank runs the same checks, prints what failed, and the program exits
// non-zero on any rank with a failure (mpirun then exits non-zero).
//
//   mpi_bootstrap checks WORLD   rank/size/local rank against the launcher's variables, bit-exact
//                                broadcast of a 128-byte blob (the ncclUniqueId's size) from rank 0 and
//                                from rank 1, all_or_none agreement, MPI errors as DeviceError
//   mpi_bootstrap abort          rank 1 fails while rank 0 waits for it in a broadcast: the job must end
//                                (MPI_Abort with the error's exit code 4), not hang
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "common/launch.hpp"
#include "tests/mpi/rank_checks.hpp"

using namespace dionsim;
using namespace dionsim::testing;
using namespace dionsim::launch;

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v == nullptr ? fallback : std::atoi(v);
}

using Blob = std::array<unsigned char, 128>;  // NCCL_UNIQUE_ID_BYTES

// Every byte value class that a careless copy could lose: 0x00 (C strings), 0xFF, high bit set.
Blob pattern() {
  Blob b{};
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<unsigned char>((i * 151 + 7) & 0xFF);
  b[0] = 0x00;
  b[1] = 0xFF;
  b[127] = 0x00;
  return b;
}

void check_world(const Mpi& mpi, int expected_world) {
  expect(mpi.size() == expected_world,
         "size " + std::to_string(mpi.size()) + ", expected " + std::to_string(expected_world));
  expect(mpi.rank() >= 0 && mpi.rank() < mpi.size(), "rank " + std::to_string(mpi.rank()) + " out of range");
  // Open MPI's mpirun tells each rank its place; MPI must agree with it.
  expect(mpi.rank() == env_int("OMPI_COMM_WORLD_RANK", mpi.rank()), "rank differs from OMPI_COMM_WORLD_RANK");
  expect(mpi.local_rank() == env_int("OMPI_COMM_WORLD_LOCAL_RANK", mpi.local_rank()),
         "local rank " + std::to_string(mpi.local_rank()) + " differs from OMPI_COMM_WORLD_LOCAL_RANK");
  expect(mpi.local_size() == env_int("OMPI_COMM_WORLD_LOCAL_SIZE", mpi.local_size()),
         "local size differs from OMPI_COMM_WORLD_LOCAL_SIZE");
  // One host: every rank is local, in world order.
  expect(mpi.local_size() == mpi.size(), "local size " + std::to_string(mpi.local_size()) + " on one host");
  expect(mpi.local_rank() == mpi.rank(), "local rank " + std::to_string(mpi.local_rank()) + " on one host");
  const Mpi again = Mpi::init();  // one MPI_Init per process; the same world
  expect(again.rank() == mpi.rank() && again.size() == mpi.size(), "second Mpi::init() differs");
  expect(select_launch() == Launch::mpi, "select_launch() under mpirun is not Launch::mpi");
}

void check_broadcast(const Mpi& mpi) {
  // From rank 0: a known pattern; the receivers start from garbage.
  Blob b;
  b.fill(0xA5);
  if (mpi.rank() == 0) b = pattern();
  mpi.broadcast(b.data(), b.size(), 0, "pattern");
  expect(std::memcmp(b.data(), pattern().data(), b.size()) == 0, "pattern from rank 0 arrived altered");

  // From rank 0: bytes only rank 0 knows; rank 1 sends back what it got (root 1), rank 0 compares.
  Blob secret{}, got{}, echoed{};
  std::random_device rd;
  for (auto& x : secret) x = static_cast<unsigned char>(rd());
  if (mpi.rank() == 0) got = secret;
  mpi.broadcast(got.data(), got.size(), 0, "secret");
  if (mpi.rank() == 1) echoed = got;
  mpi.broadcast(echoed.data(), echoed.size(), 1, "echo");
  if (mpi.rank() == 0) expect(echoed == secret, "random blob from rank 0 came back from rank 1 altered");
  expect(echoed == got, "echo from rank 1 differs from what this rank received");
}

void check_agreement(const Mpi& mpi) {
  // Nobody fails: nobody throws.
  try {
    mpi.all_or_none("nothing", [] {});
  } catch (const std::exception& e) {
    expect(false, std::string("all_or_none threw without a failure: ") + e.what());
  }
  // Rank 1 fails: rank 1 gets its own error (type and text), rank 0 one with the same exit code
  // that names rank 1.
  try {
    mpi.all_or_none("device setup", [&] {
      if (mpi.rank() == 1) throw NoDeviceError("no CUDA device on rank 1");
    });
    expect(false, "all_or_none did not throw when rank 1 failed");
  } catch (const NoDeviceError& e) {
    expect(mpi.rank() == 1 && std::string(e.what()) == "no CUDA device on rank 1", "wrong own error");
  } catch (const Error& e) {
    expect(mpi.rank() == 0, "rank 1 did not get its own error type");
    expect(e.code() == ExitCode::no_device, "code " + std::to_string(static_cast<int>(e.code())) + ", expected 77");
    expect(std::string(e.what()).find("device setup failed on rank 1") != std::string::npos,
           std::string("message does not name rank 1: ") + e.what());
  }
  // Both fail, differently: each keeps its own error.
  try {
    mpi.all_or_none("both", [&] {
      if (mpi.rank() == 0) throw UsageError("zero");
      throw IoError("one");
    });
    expect(false, "all_or_none did not throw when both failed");
  } catch (const Error& e) {
    expect(e.code() == (mpi.rank() == 0 ? ExitCode::usage : ExitCode::io), "lost this rank's own exit code");
  }
}

void check_mpi_errors(const Mpi& mpi) {
  // An invalid root is detected by MPI on every rank (returned, not fatal): DeviceError naming the
  // call, what was broadcast and the rank.
  Blob b{};
  try {
    mpi.broadcast(b.data(), b.size(), mpi.size(), "NCCL unique id");
    expect(false, "broadcast from root " + std::to_string(mpi.size()) + " did not throw");
  } catch (const DeviceError& e) {
    const std::string m = e.what();
    const std::string want = "rank " + std::to_string(mpi.rank()) + ": MPI_Bcast (NCCL unique id): ";
    expect(m.rfind(want, 0) == 0, "message '" + m + "' does not start with '" + want + "'");
  }
  // The world is still usable afterwards.
  Blob c{};
  if (mpi.rank() == 0) c = pattern();
  mpi.broadcast(c.data(), c.size(), 0, "after the error");
  expect(c == pattern(), "broadcast after an MPI error arrived altered");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "checks" && mode != "abort") {
    std::fprintf(stderr, "usage: mpi_bootstrap checks WORLD | abort   (under mpirun)\n");
    return 2;
  }
  try {
    const Mpi mpi = Mpi::init();
    my_rank = mpi.rank();
    if (mode == "abort") {
      return abort_job_on_error([&] {
        Blob b{};
        if (mpi.rank() == 1) throw IoError("rank 1 cannot write its results");
        mpi.broadcast(b.data(), b.size(), 1, "never sent");  // rank 0 waits here for rank 1
        return 0;
      });
    }
    check_world(mpi, argc > 2 ? std::atoi(argv[2]) : 2);
    if (mpi.size() >= 2) {
      check_broadcast(mpi);
      check_agreement(mpi);
    }
    check_mpi_errors(mpi);
  } catch (const std::exception& e) {
    expect(false, std::string("unexpected exception: ") + e.what());
  }
  if (failures == 0) std::printf("rank %d: all MPI bootstrap checks passed\n", my_rank);
  return failures == 0 ? 0 : 1;
}
