#pragma once
// NCCL transport for the optimizer's collectives: all-gather (norms) and all-to-all (grouped
// send/recv) on a dedicated communication stream per rank. Two ways to set up the ranks:
//   * one process driving all local GPUs: Communicator::init_local(n) (ncclCommInitAll); collectives
//     of the n communicators are issued inside one GroupGuard;
//   * one process per GPU started by a launcher: Communicator::init_from_env() reads the
//     torchrun-style RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT and exchanges the NCCL
//     unique id over a TCP socket (rank 0 listens on MASTER_PORT);
//   * one process per GPU started by mpirun / srun --mpi=... (builds with MPI):
//     Communicator::init_from_mpi() takes rank, world and local rank from MPI (common/launch.hpp)
//     and broadcasts the NCCL unique id from rank 0 with MPI_Bcast, as nccl-tests does.
// Plain C++ interface; NCCL errors become DeviceError naming the call, rank and op.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kernels/device.hpp"

namespace dionsim::kernels {

enum class WireType { bf16, fp32, u8 };
std::size_t wire_bytes(WireType t);

class Communicator {
 public:
  static std::vector<Communicator> init_local(int ndev);
  static Communicator init_from_env();
  // Device = the local rank (or 0 when the launcher binds one GPU per task). Every rank agrees on
  // the device check before the id broadcast, so a rank without a GPU stops all ranks (same exit
  // code) instead of leaving them in MPI_Bcast. DeviceError in builds without MPI.
  static Communicator init_from_mpi();

  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  ~Communicator();

  [[nodiscard]] int rank() const;
  [[nodiscard]] int world() const;
  [[nodiscard]] int device() const;
  [[nodiscard]] StreamHandle stream() const;  // the dedicated communication stream

  // recv [world][count] = every rank's send [count] (rank-major), on stream().
  void all_gather(const void* send, void* recv, std::size_t count, WireType t) const;
  // send [world][count] -> recv [world][count]: chunk d goes to rank d (self chunk included), as
  // ncclGroupStart / ncclSend+ncclRecv per peer / ncclGroupEnd, on stream().
  void all_to_all(const void* send, void* recv, std::size_t count, WireType t) const;

 private:
  struct Impl;
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Brackets the collectives that one process issues for several communicators (init_local).
class GroupGuard {
 public:
  GroupGuard();
  ~GroupGuard() noexcept(false);
  GroupGuard(const GroupGuard&) = delete;
  GroupGuard& operator=(const GroupGuard&) = delete;
};

// Makes `waiter` wait (on the device, no host block) for the work issued so far on `signaller`.
class StreamLink {
 public:
  StreamLink();
  ~StreamLink();
  StreamLink(const StreamLink&) = delete;
  StreamLink& operator=(const StreamLink&) = delete;
  void wait(StreamHandle waiter, StreamHandle signaller);

 private:
  void* event_ = nullptr;
};

}  // namespace dionsim::kernels
