// NCCL transport with one process per GPU started by mpirun (CUDA builds with MPI; ctest runs it as
// `mpiexec -n 2`, label gpu;mpi). Communicator::init_from_mpi() on every rank, then an all-to-all
// and an all-gather across the processes, every received element checked. Exit 77 on every rank
// when there is no GPU (init_from_mpi's agreement: the same code everywhere), 1 on a wrong value.
#include <cstdio>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/launch.hpp"
#include "optimizer/bf16.hpp"
#include "kernels/device.hpp"
#include "kernels/transport.hpp"
#include "tests/mpi/rank_checks.hpp"

using namespace dionsim;
using namespace dionsim::testing;
using namespace dionsim::kernels;

namespace {

// Same data as tests/gpu/test_transport.cpp, across processes instead of inside one.
bf16_bits a2a_value(int src, int dst, std::size_t i) { return static_cast<bf16_bits>(src * 1000 + dst * 100 + i % 97); }
bf16_bits gather_value(int src, std::size_t i) { return static_cast<bf16_bits>(src * 7 + i % 31); }

void check_collectives(const Communicator& comm, std::size_t count) {
  const int world = comm.world(), r = comm.rank();
  std::vector<bf16_bits> s(static_cast<std::size_t>(world) * count), g(count);
  for (int d = 0; d < world; ++d)
    for (std::size_t i = 0; i < count; ++i) s[static_cast<std::size_t>(d) * count + i] = a2a_value(r, d, i);
  for (std::size_t i = 0; i < count; ++i) g[i] = gather_value(r, i);
  DeviceArray<bf16_bits> send(s, "a2a send"), recv(s.size(), "a2a recv"), gsend(g, "ag send"),
      grecv(s.size(), "ag recv");
  comm.all_to_all(send.data(), recv.data(), count, WireType::bf16);
  comm.all_gather(gsend.data(), grecv.data(), count, WireType::bf16);
  synchronize(comm.stream());
  const auto a = recv.download(), ga = grecv.download();
  for (int src = 0; src < world; ++src)
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t k = static_cast<std::size_t>(src) * count + i;
      expect(a[k] == a2a_value(src, r, i), "all-to-all count " + std::to_string(count) + ": element " +
                                               std::to_string(i) + " from rank " + std::to_string(src) + " is " +
                                               std::to_string(a[k]));
      expect(ga[k] == gather_value(src, i), "all-gather count " + std::to_string(count) + ": element " +
                                                std::to_string(i) + " from rank " + std::to_string(src));
    }
}

}  // namespace

int main() {
  try {
    const Communicator comm = Communicator::init_from_mpi();
    const auto mpi = launch::Mpi::init();
    my_rank = mpi.rank();
    expect(comm.rank() == mpi.rank() && comm.world() == mpi.size(), "communicator rank/world differ from MPI's");
    expect(comm.device() == launch::device_for_local_rank(mpi.local_rank(), static_cast<int>(list_devices().size())),
           "device " + std::to_string(comm.device()) + " is not local rank " + std::to_string(mpi.local_rank()) + "'s");
    set_device(comm.device());
    check_collectives(comm, 1000);      // small, odd: below NCCL's chunk sizes
    check_collectives(comm, 1u << 20);  // 2 MiB per peer: the pipelined path
  } catch (const NoDeviceError& e) {
    std::fprintf(stderr, "gpu_transport_mpi: SKIP: %s\n", e.what());
    return static_cast<int>(ExitCode::no_device);
  } catch (const Error& e) {
    std::fprintf(stderr, "gpu_transport_mpi: error: %s\n", e.what());
    return static_cast<int>(e.code());
  }
  if (failures == 0) std::printf("rank %d: NCCL all-to-all and all-gather across MPI processes correct\n", my_rank);
  return failures == 0 ? 0 : 1;
}
