// common/launch.hpp without a launcher: which launch an environment means, the precedence, the
// error for an MPI launch of a build without MPI, and the device of a local rank. (The MPI
// bootstrap itself runs under mpirun: tests/mpi.)
#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "common/launch.hpp"

using namespace dionsim;
using namespace dionsim::launch;

namespace {
EnvLookup fake_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}
}  // namespace

TEST_CASE("an MPI launch is recognised by the variables its launchers set", "[common][launch]") {
  CHECK_FALSE(detect_mpi_launch(fake_env({})));
  CHECK(detect_mpi_launch(fake_env({{"OMPI_COMM_WORLD_SIZE", "2"}})) == "OMPI_COMM_WORLD_SIZE=2");  // mpirun
  CHECK(detect_mpi_launch(fake_env({{"PMIX_RANK", "3"}})) == "PMIX_RANK=3");                        // srun --mpi=pmix
  CHECK(detect_mpi_launch(fake_env({{"PMI_SIZE", "8"}})) == "PMI_SIZE=8");                          // hydra, --mpi=pmi2
  CHECK(detect_mpi_launch(fake_env({{"PMI_RANK", "1"}})) == "PMI_RANK=1");
  CHECK_FALSE(detect_mpi_launch(fake_env({{"OMPI_COMM_WORLD_SIZE", ""}})));  // set but empty = unset
  // Plain srun (no --mpi) and torchrun set none of them.
  CHECK_FALSE(detect_mpi_launch(fake_env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}})));
  CHECK_FALSE(detect_mpi_launch(fake_env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}})));
}

TEST_CASE("launch precedence: MPI, then the torchrun-style environment, then one process", "[common][launch]") {
  const auto torchrun = std::map<std::string, std::string>{
      {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};
  auto both = torchrun;
  both.emplace("OMPI_COMM_WORLD_SIZE", "2");
  CHECK(select_launch(fake_env({}), true) == Launch::single_process);
  CHECK(select_launch(fake_env({}), false) == Launch::single_process);
  CHECK(select_launch(fake_env(torchrun), true) == Launch::torchrun_env);
  CHECK(select_launch(fake_env(torchrun), false) == Launch::torchrun_env);
  CHECK(select_launch(fake_env({{"PMIX_RANK", "0"}}), true) == Launch::mpi);
  CHECK(select_launch(fake_env(both), true) == Launch::mpi);  // MPI wins over WORLD_SIZE
  CHECK(select_launch(fake_env({{"WORLD_SIZE", ""}}), true) == Launch::single_process);
}

TEST_CASE("an MPI launch of a build without MPI is a usage error that says how to rebuild", "[common][launch]") {
  try {
    (void)select_launch(fake_env({{"OMPI_COMM_WORLD_SIZE", "2"}, {"WORLD_SIZE", "2"}}), false);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::usage);
    const std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("OMPI_COMM_WORLD_SIZE=2"));
    CHECK_THAT(m, Catch::Contains("built without MPI"));
    CHECK_THAT(m, Catch::Contains("-DDIONSIM_WITH_MPI=ON"));
    CHECK_THAT(m, Catch::Contains("libopenmpi-dev"));
  }
}

TEST_CASE("a rank's device is its local rank, or the one GPU a launcher bound to it", "[common][launch]") {
  CHECK(device_for_local_rank(0, 8) == 0);
  CHECK(device_for_local_rank(7, 8) == 7);
  CHECK(device_for_local_rank(5, 1) == 0);  // srun --gpus-per-task=1: each task sees its GPU as 0
  CHECK_THROWS_AS(device_for_local_rank(2, 2), NoDeviceError);
  CHECK_THROWS_AS(device_for_local_rank(0, 0), NoDeviceError);
  try {
    (void)device_for_local_rank(3, 2);
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::no_device);
    CHECK_THAT(std::string(e.what()), Catch::Contains("local rank 3") && Catch::Contains("sees 2 GPU(s)"));
  }
}

TEST_CASE("outside an MPI job an error is not an MPI abort: it propagates", "[common][launch]") {
  // No MPI_Init in this process (in builds with or without MPI): abort_job_on_error must rethrow the
  // same error, and a normal result passes through.
  CHECK(abort_job_on_error([] { return 42; }) == 42);
  CHECK_THROWS_AS(abort_job_on_error([]() -> int { throw NoDeviceError("no CUDA device"); }), NoDeviceError);
}

TEST_CASE("the MPI bootstrap is compiled in exactly when configure found MPI", "[common][launch]") {
  // DIONSIM_EXPECT_MPI comes from tests/common/CMakeLists.txt (DIONSIM_HAVE_MPI at configure).
  CHECK(built_with_mpi() == (DIONSIM_EXPECT_MPI != 0));
  if (!built_with_mpi()) {
    CHECK_THROWS_AS(Mpi::init(), DeviceError);  // and says to reconfigure
  }
}

TEST_CASE("ranks per node come from the launcher, else the whole world is one node", "[common][launch]") {
  CHECK(ranks_per_node(fake_env({}), 2) == 2);  // one process driving both GPUs, or no launcher
  CHECK(ranks_per_node(fake_env({{"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}), 8) == 4);  // mpirun
  CHECK(ranks_per_node(fake_env({{"MPI_LOCALNRANKS", "8"}}), 16) == 8);            // MPICH hydra
  CHECK(ranks_per_node(fake_env({{"LOCAL_WORLD_SIZE", "8"}}), 64) == 8);           // torchrun
  CHECK(ranks_per_node(fake_env({{"SLURM_NTASKS_PER_NODE", "8(x2)"}}), 16) == 8);  // srun
  CHECK(ranks_per_node(fake_env({{"SLURM_NTASKS_PER_NODE", "4"}}), 8) == 4);
  // first set wins: Open MPI's own count over a Slurm allocation's
  CHECK(ranks_per_node(fake_env({{"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"SLURM_NTASKS_PER_NODE", "4"}}), 8) == 2);
  CHECK_THROWS_WITH(ranks_per_node(fake_env({{"LOCAL_WORLD_SIZE", "3"}}), 8),
                    Catch::Contains("LOCAL_WORLD_SIZE: got '3', expected a positive number of ranks per node that "
                                    "divides the world of 8"));
  CHECK_THROWS_AS(ranks_per_node(fake_env({{"LOCAL_WORLD_SIZE", "x"}}), 8), UsageError);
  CHECK_THROWS_AS(ranks_per_node(fake_env({{"LOCAL_WORLD_SIZE", "0"}}), 8), UsageError);
  CHECK_THROWS_AS(ranks_per_node(fake_env({{"MPI_LOCALNRANKS", "4(x2)"}}), 8), UsageError);  // only Slurm's form
}
