#include "kernels/transport.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "common/error.hpp"
#include "common/launch.hpp"
#include "kernels/check.cuh"

#define DIONSIM_NCCL_CHECK(call, op)                                                                 \
  do {                                                                                               \
    const ncclResult_t r_ = (call);                                                                  \
    if (r_ != ncclSuccess)                                                                           \
      ::dionsim::kernels::detail::throw_device_error(#call, std::string(ncclGetErrorString(r_)), (op), __FILE__, __LINE__); \
  } while (0)

namespace dionsim::kernels {

std::size_t wire_bytes(WireType t) { return t == WireType::bf16 ? 2 : t == WireType::fp32 ? 4 : 1; }

namespace {
ncclDataType_t nccl_type(WireType t) {
  return t == WireType::bf16 ? ncclBfloat16 : t == WireType::fp32 ? ncclFloat32 : ncclUint8;
}

std::string env_or_throw(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0')
    throw UsageError(std::string("environment: ") + name +
                     ": got '', expected it set (torchrun-style launch: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)");
  return v;
}
int env_int(const char* name) {
  const std::string v = env_or_throw(name);
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (*end != '\0' || x < 0) throw UsageError(describe_bad_value("environment", name, v, "a non-negative integer"));
  return static_cast<int>(x);
}

// Rank 0 serves the unique id to world-1 clients; the others connect (retrying while rank 0 starts).
ncclUniqueId exchange_unique_id(int rank, int world, const std::string& addr, int port) {
  ncclUniqueId id{};
  if (rank == 0) {
    DIONSIM_NCCL_CHECK(ncclGetUniqueId(&id), "unique id");
    const int srv = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(srv, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    sa.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::bind(srv, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || ::listen(srv, world) != 0) {
      ::close(srv);
      throw DeviceError("rank 0: cannot listen on MASTER_PORT " + std::to_string(port) + ": " + std::strerror(errno));
    }
    for (int served = 1; served < world; ++served) {
      const int c = ::accept(srv, nullptr, nullptr);
      if (c < 0) { ::close(srv); throw DeviceError(std::string("rank 0: accept failed: ") + std::strerror(errno)); }
      const auto n = ::send(c, &id, sizeof(id), 0);
      ::close(c);
      if (n != static_cast<ssize_t>(sizeof(id))) { ::close(srv); throw DeviceError("rank 0: short send of the NCCL id"); }
    }
    ::close(srv);
    return id;
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || res == nullptr)
    throw UsageError(describe_bad_value("environment", "MASTER_ADDR", addr, "a resolvable host name or IPv4 address"));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    const int c = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(c, res->ai_addr, res->ai_addrlen) == 0) {
      std::size_t got = 0;
      while (got < sizeof(id)) {
        const auto n = ::recv(c, reinterpret_cast<char*>(&id) + got, sizeof(id) - got, 0);
        if (n <= 0) break;
        got += static_cast<std::size_t>(n);
      }
      ::close(c);
      if (got == sizeof(id)) break;
    } else {
      ::close(c);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::freeaddrinfo(res);
      throw DeviceError("rank " + std::to_string(rank) + ": no NCCL id from " + addr + ":" + std::to_string(port) +
                        " within 120 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::freeaddrinfo(res);
  return id;
}
}  // namespace

struct Communicator::Impl {
  ncclComm_t comm = nullptr;
  int rank = 0, world = 1, device = 0;
  StreamHandle stream = nullptr;
  ~Impl() {
    if (comm != nullptr) {
      (void)cudaSetDevice(device);
      ncclCommDestroy(comm);
    }
    destroy_stream(stream);
  }
};

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;
Communicator::~Communicator() = default;

std::vector<Communicator> Communicator::init_local(int ndev) {
  require_devices(ndev);
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(ndev));
  std::vector<int> devs(static_cast<std::size_t>(ndev));
  for (int i = 0; i < ndev; ++i) devs[static_cast<std::size_t>(i)] = i;
  DIONSIM_NCCL_CHECK(ncclCommInitAll(comms.data(), ndev, devs.data()), "init (one process, all local GPUs)");
  std::vector<Communicator> out;
  for (int i = 0; i < ndev; ++i) {
    auto impl = std::make_unique<Impl>();
    impl->comm = comms[static_cast<std::size_t>(i)];
    impl->rank = i;
    impl->world = ndev;
    impl->device = i;
    set_device(i);
    impl->stream = create_stream();
    out.push_back(Communicator(std::move(impl)));
  }
  return out;
}

Communicator Communicator::init_from_env() {
  const int rank = env_int("RANK"), world = env_int("WORLD_SIZE"), local = env_int("LOCAL_RANK");
  const std::string addr = env_or_throw("MASTER_ADDR");
  const int port = env_int("MASTER_PORT");
  if (world < 1 || rank >= world) throw UsageError(describe_bad_value("environment", "RANK", std::to_string(rank), "0 <= RANK < WORLD_SIZE"));
  set_error_rank(rank);
  require_devices(local + 1);
  set_device(local);
  const ncclUniqueId id = exchange_unique_id(rank, world, addr, port);
  auto impl = std::make_unique<Impl>();
  impl->rank = rank;
  impl->world = world;
  impl->device = local;
  DIONSIM_NCCL_CHECK(ncclCommInitRank(&impl->comm, world, id, rank), "init (one process per GPU)");
  impl->stream = create_stream();
  return Communicator(std::move(impl));
}

Communicator Communicator::init_from_mpi() {
  const auto mpi = launch::Mpi::init();
  set_error_rank(mpi.rank());
  static_assert(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES, "the id travels as opaque bytes");
  ncclUniqueId id{};
  int device = 0;
  mpi.all_or_none("device setup", [&] {
    device = launch::device_for_local_rank(mpi.local_rank(), static_cast<int>(require_devices(1).size()));
    set_device(device);
    if (mpi.rank() == 0) DIONSIM_NCCL_CHECK(ncclGetUniqueId(&id), "unique id");
  });
  mpi.broadcast(&id, sizeof(id), 0, "NCCL unique id");
  auto impl = std::make_unique<Impl>();
  impl->rank = mpi.rank();
  impl->world = mpi.size();
  impl->device = device;
  DIONSIM_NCCL_CHECK(ncclCommInitRank(&impl->comm, mpi.size(), id, mpi.rank()), "init (one process per GPU, MPI)");
  impl->stream = create_stream();
  return Communicator(std::move(impl));
}

int Communicator::rank() const { return impl_->rank; }
int Communicator::world() const { return impl_->world; }
int Communicator::device() const { return impl_->device; }
StreamHandle Communicator::stream() const { return impl_->stream; }

void Communicator::all_gather(const void* send, void* recv, std::size_t count, WireType t) const {
  set_error_rank(impl_->rank);
  DIONSIM_NCCL_CHECK(ncclAllGather(send, recv, count, nccl_type(t), impl_->comm, detail::stream(impl_->stream)),
                     "all-gather");
}

void Communicator::all_to_all(const void* send, void* recv, std::size_t count, WireType t) const {
  set_error_rank(impl_->rank);
  const std::size_t bytes = count * wire_bytes(t);
  const auto st = detail::stream(impl_->stream);
  DIONSIM_NCCL_CHECK(ncclGroupStart(), "all-to-all");
  for (int peer = 0; peer < impl_->world; ++peer) {
    const auto off = static_cast<std::size_t>(peer) * bytes;
    DIONSIM_NCCL_CHECK(ncclSend(static_cast<const char*>(send) + off, count, nccl_type(t), peer, impl_->comm, st), "all-to-all (send)");
    DIONSIM_NCCL_CHECK(ncclRecv(static_cast<char*>(recv) + off, count, nccl_type(t), peer, impl_->comm, st), "all-to-all (recv)");
  }
  DIONSIM_NCCL_CHECK(ncclGroupEnd(), "all-to-all");
}

GroupGuard::GroupGuard() { DIONSIM_NCCL_CHECK(ncclGroupStart(), "group"); }
GroupGuard::~GroupGuard() noexcept(false) { DIONSIM_NCCL_CHECK(ncclGroupEnd(), "group"); }

StreamLink::StreamLink() {
  cudaEvent_t e = nullptr;
  DIONSIM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "stream link");
  event_ = e;
}
StreamLink::~StreamLink() { (void)cudaEventDestroy(static_cast<cudaEvent_t>(event_)); }
void StreamLink::wait(StreamHandle waiter, StreamHandle signaller) {
  DIONSIM_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), detail::stream(signaller)), "stream link");
  DIONSIM_CUDA_CHECK(cudaStreamWaitEvent(detail::stream(waiter), static_cast<cudaEvent_t>(event_), 0), "stream link");
}

}  // namespace dionsim::kernels
