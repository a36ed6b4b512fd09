#pragma once
// How this process was started, and the MPI bootstrap of one-process-per-GPU runs. No CUDA and no
// <mpi.h> here: the CLI validates the launch in every build, and kernels/transport uses Mpi to
// hand the NCCL unique id out (MPI_Bcast, as nccl-tests does). C++17 on purpose: nvcc compiles
// kernels/transport.cu, which includes it, as CUDA C++17.
//
// Precedence (select_launch): an MPI launch (mpirun, or srun --mpi=...) in a build with MPI → MPI;
// else WORLD_SIZE set → the torchrun-style environment; else one process drives every local GPU.
// An MPI launch in a build without MPI is a UsageError that says how to rebuild.
#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.hpp"

namespace dionsim::launch {

enum class Launch { single_process, torchrun_env, mpi };

[[nodiscard]] std::string_view to_string(Launch l);

// Reads one environment variable (nullptr when unset). Tests pass a fake; the default is getenv.
using EnvLookup = std::function<const char*(const char*)>;
[[nodiscard]] EnvLookup process_env();

// "NAME=VALUE" of the first variable that an MPI launcher sets for its ranks: OMPI_COMM_WORLD_SIZE
// (Open MPI mpirun), PMIX_RANK (PMIx: srun --mpi=pmix, Open MPI 5), PMI_SIZE / PMI_RANK (MPICH
// hydra, srun --mpi=pmi2); nullopt without one. Plain srun (no --mpi) is not an MPI launch.
[[nodiscard]] std::optional<std::string> detect_mpi_launch(const EnvLookup& env);

// True when this dionsim was configured with DIONSIM_WITH_MPI and MPI was found.
[[nodiscard]] bool built_with_mpi();

// The precedence above; throws UsageError for an MPI launch when `with_mpi` is false.
[[nodiscard]] Launch select_launch(const EnvLookup& env, bool with_mpi);
[[nodiscard]] Launch select_launch();  // this process: process_env(), built_with_mpi()

// The CUDA device of a rank with `local_rank` among the ranks of its node, `visible` devices seen
// by this process: the local rank, or 0 when exactly one device is visible (a launcher that binds
// one GPU per task, e.g. srun --gpus-per-task=1). NoDeviceError otherwise.
[[nodiscard]] int device_for_local_rank(int local_rank, int visible);

// Ranks per node of a world of `world` processes, from the launcher's variables: Open MPI's
// OMPI_COMM_WORLD_LOCAL_SIZE, MPICH's MPI_LOCALNRANKS, torchrun's LOCAL_WORLD_SIZE, Slurm's
// SLURM_NTASKS_PER_NODE ("8" or "8(x2)"), first set wins; `world` when none is set (one node).
// What `measure` records as gpus_per_node (nodes = world / it). UsageError naming the variable
// when its value is not a positive integer dividing the world.
[[nodiscard]] int ranks_per_node(const EnvLookup& env, int world);

// The MPI world of this process. Mpi::init() calls MPI_Init once per process (later calls return the
// same world) and MPI_Finalize at exit; MPI errors are returned, not fatal, and become DeviceError
// "rank R: MPI_CALL (WHAT): MPI's message". Only in builds with MPI (DeviceError otherwise).
class Mpi {
 public:
  static Mpi init();

  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] int size() const { return size_; }
  [[nodiscard]] int local_rank() const { return local_rank_; }  // rank among this node's ranks
  [[nodiscard]] int local_size() const { return local_size_; }

  // Every rank gets root's `bytes` bytes at `data` (same size on every rank); `what` names it in
  // errors. An invalid root is MPI's to report (MPI_ERR_ROOT → DeviceError).
  void broadcast(void* data, std::size_t bytes, int root, std::string_view what) const;

  // Runs `step` on every rank and agrees on the outcome before anyone goes on: when it throws a
  // dionsim::Error on some rank, every rank throws — that rank its own error, the others an Error of
  // the same exit code naming the lowest failing rank — so no rank waits in a later collective for
  // a rank that has already given up. `what` names the step in the others' message.
  void all_or_none(std::string_view what, const std::function<void()>& step) const;

 private:
  Mpi(int rank, int size, int local_rank, int local_size)
      : rank_(rank), size_(size), local_rank_(local_rank), local_size_(local_size) {}
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
};

// Under an MPI world of more than one rank, an error on one rank after the ranks are connected must
// end the job: the others may wait in a collective forever, and MPI_Finalize would wait for them.
// When MPI is initialized with size > 1: prints "dionsim: error: rank R: MESSAGE" to stderr and calls
// MPI_Abort with `code` (mpirun then exits with it). Otherwise it returns and the caller rethrows.
void abort_job_if_mpi(ExitCode code, std::string_view message);

// Runs `body`; an exception escaping it ends the whole MPI job (abort_job_if_mpi) instead of
// leaving the other ranks waiting. Outside an MPI world of size > 1 the exception propagates.
template <class F>
auto abort_job_on_error(F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const Error& e) {
    abort_job_if_mpi(e.code(), e.what());
    throw;
  } catch (const std::exception& e) {
    abort_job_if_mpi(static_cast<ExitCode>(1), std::string("internal error: ") + e.what());
    throw;
  }
}

}  // namespace dionsim::launch
