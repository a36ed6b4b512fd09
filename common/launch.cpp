#include "common/launch.hpp"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <optional>
#include <string>

#ifdef DIONSIM_HAVE_MPI
#include <mpi.h>
#endif

namespace dionsim::launch {

std::string_view to_string(Launch l) {
  switch (l) {
    case Launch::single_process:
      return "one process, all local GPUs";
    case Launch::torchrun_env:
      return "one process per GPU (torchrun-style environment)";
    case Launch::mpi:
      return "one process per GPU (MPI)";
  }
  return "?";
}

EnvLookup process_env() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

std::optional<std::string> detect_mpi_launch(const EnvLookup& env) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"}) {
    const char* v = env(name);
    if (v != nullptr && *v != '\0') return std::string(name) + "=" + v;
  }
  return std::nullopt;
}

bool built_with_mpi() {
#ifdef DIONSIM_HAVE_MPI
  return true;
#else
  return false;
#endif
}

Launch select_launch(const EnvLookup& env, bool with_mpi) {
  if (const auto mpi = detect_mpi_launch(env)) {
    if (!with_mpi)
      throw UsageError("launch: started by an MPI launcher (" + *mpi +
                       ") but this dionsim was built without MPI; reconfigure with -DDIONSIM_WITH_MPI=ON "
                       "(install 'libopenmpi-dev openmpi-bin': scripts/install-deps.sh) and rebuild, or start "
                       "one process per GPU with the torchrun-style environment (RANK, WORLD_SIZE, LOCAL_RANK, "
                       "MASTER_ADDR, MASTER_PORT) instead");
    return Launch::mpi;
  }
  const char* ws = env("WORLD_SIZE");
  if (ws != nullptr && *ws != '\0') return Launch::torchrun_env;
  return Launch::single_process;
}

Launch select_launch() { return select_launch(process_env(), built_with_mpi()); }

int ranks_per_node(const EnvLookup& env, int world) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"}) {
    const char* value = env(name);
    if (value == nullptr || *value == '\0') continue;
    const std::string text(value);
    std::size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    // Slurm writes "8(x2)" for 8 tasks on each of 2 nodes; the count is what precedes "(".
    const bool tail_ok = used == text.size() || (std::string_view(name) == "SLURM_NTASKS_PER_NODE" && text[used] == '(');
    if (used == 0 || !tail_ok || n < 1 || world % n != 0) {
      throw_bad_usage(name, text, "a positive number of ranks per node that divides the world of " +
                                      std::to_string(world));
    }
    return n;
  }
  return world;
}

int device_for_local_rank(int local_rank, int visible) {
  if (visible == 1) return 0;
  if (local_rank >= 0 && local_rank < visible) return local_rank;
  throw NoDeviceError("no CUDA device for local rank " + std::to_string(local_rank) + ": this process sees " +
                      std::to_string(visible) +
                      " GPU(s); start at most that many ranks per node, or bind one GPU per rank "
                      "(srun --gpus-per-task=1, CUDA_VISIBLE_DEVICES)");
}

#ifdef DIONSIM_HAVE_MPI
namespace {

int world_rank_or_minus_one() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized == 0 || finalized != 0) return -1;
  int r = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

void check(int rc, const char* call, std::string_view what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  throw DeviceError(
      "rank " + std::to_string(world_rank_or_minus_one()) + ": " + call + " (" + std::string(what) +
      "): " + (len > 0 ? std::string(text, static_cast<std::size_t>(len)) : "MPI error " + std::to_string(rc)));
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized == 0) MPI_Finalize();
}

}  // namespace

Mpi Mpi::init() {
  // MPI allows one MPI_Init per process; the world it describes is the same for every caller.
  static std::optional<Mpi> world;
  if (world) return *world;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized == 0) {
    if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS)  // MPI_Init failures abort under Open MPI; belt and braces
      throw DeviceError("MPI_Init failed (is this process started by mpirun or srun --mpi=pmix?)");
    std::atexit(finalize_at_exit);
  }
  check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", "world");
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank", "world");
  check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size", "world");
  // The ranks that share this node's memory are the ones that share its GPUs.
  MPI_Comm node = MPI_COMM_NULL;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node), "MPI_Comm_split_type",
        "ranks of this node");
  const int rc_rank = MPI_Comm_rank(node, &local_rank), rc_size = MPI_Comm_size(node, &local_size);
  MPI_Comm_free(&node);
  check(rc_rank, "MPI_Comm_rank", "ranks of this node");
  check(rc_size, "MPI_Comm_size", "ranks of this node");
  world = Mpi(rank, size, local_rank, local_size);
  return *world;
}

void Mpi::broadcast(void* data, std::size_t bytes, int root, std::string_view what) const {
  if (bytes > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw DeviceError("rank " + std::to_string(rank_) + ": MPI_Bcast (" + std::string(what) +
                      "): " + std::to_string(bytes) + " bytes is more than one MPI_Bcast carries");
  check(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast", what);
}

void Mpi::all_or_none(std::string_view what, const std::function<void()>& step) const {
  std::exception_ptr mine;
  int code = 0;
  try {
    step();
  } catch (const Error& e) {
    mine = std::current_exception();
    code = static_cast<int>(e.code());
  } catch (const std::exception&) {
    mine = std::current_exception();
    code = 1;  // main's "internal error"
  }
  // MAXLOC: the highest exit code, and among ranks with it the lowest rank. 0 = every rank succeeded.
  struct {
    int code;
    int rank;
  } in{code, rank_}, out{0, 0};
  check(MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD), "MPI_Allreduce", what);
  if (mine) std::rethrow_exception(mine);
  if (out.code != 0)
    throw Error(static_cast<ExitCode>(out.code), "rank " + std::to_string(rank_) + ": " + std::string(what) +
                                                     " failed on rank " + std::to_string(out.rank) +
                                                     " (its message is above); every rank stops");
}

void abort_job_if_mpi(ExitCode code, std::string_view message) {
  const int rank = world_rank_or_minus_one();
  if (rank < 0) return;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size <= 1) return;
  std::fprintf(stderr,
               "dionsim: error: rank %d: %.*s\ndionsim: rank %d ends the MPI job (MPI_Abort %d): the other "
               "ranks may be waiting for it in a collective\n",
               rank, static_cast<int>(message.size()), message.data(), rank, static_cast<int>(code));
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, static_cast<int>(code));
  std::_Exit(static_cast<int>(code));  // MPI_Abort does not return; should it, leave anyway
}

#else  // builds without MPI

Mpi Mpi::init() {
  throw DeviceError(
      "MPI: this dionsim was built without MPI; reconfigure with -DDIONSIM_WITH_MPI=ON "
      "(install 'libopenmpi-dev openmpi-bin') and rebuild");
}
void Mpi::broadcast(void*, std::size_t, int, std::string_view) const {}
void Mpi::all_or_none(std::string_view, const std::function<void()>& step) const { step(); }
void abort_job_if_mpi(ExitCode, std::string_view) {}

#endif

}  // namespace dionsim::launch
