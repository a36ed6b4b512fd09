#include "kernels/collective_bench.hpp"

#include <algorithm>
#include <string>

#include "common/error.hpp"
#include "kernels/check.cuh"

namespace dionsim::kernels {
namespace {

// Word i of the chunk that `src` sends to `dst` (all-gather: dst is ignored, use 0).
__device__ inline std::uint16_t pattern(int src, int dst, long long i) {
  return static_cast<std::uint16_t>((src * 131 + dst * 17 + i * 7) & 0x7f7f);  // finite bf16 patterns
}
__global__ void fill_kernel(std::uint16_t* buf, int rank, int world, long long count_per_peer, bool alltoall) {
  const long long total = alltoall ? count_per_peer * world : count_per_peer;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    buf[i] = pattern(rank, alltoall ? static_cast<int>(i / count_per_peer) : 0, i % count_per_peer);
}
__global__ void check_kernel(const std::uint16_t* recv, int rank, int world, long long count_per_peer, bool alltoall,
                             unsigned long long* wrong) {
  const long long total = count_per_peer * world;
  unsigned long long bad = 0;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const int src = static_cast<int>(i / count_per_peer);
    bad += recv[i] != pattern(src, alltoall ? rank : 0, i % count_per_peer);
  }
  if (bad) atomicAdd(wrong, bad);
}

}  // namespace

std::string to_string(CollectiveOp op) { return op == CollectiveOp::alltoall ? "alltoall" : "allgather"; }

void validate(const CollectiveBenchConfig& cfg, int world) {
  if (cfg.min_bytes == 0) throw_bad_usage("-b", "0", "a positive size");
  if (cfg.min_bytes > cfg.max_bytes)
    throw UsageError("invalid sizes for 'minbytes' and 'maxbytes': " + std::to_string(cfg.min_bytes) + " > " +
                     std::to_string(cfg.max_bytes));
  if (cfg.factor < 2) throw_bad_usage("-f", std::to_string(cfg.factor), "an integer >= 2");
  if (cfg.iters < 1) throw_bad_usage("--iters", std::to_string(cfg.iters), "an integer >= 1");
  if (cfg.warmup < 0) throw_bad_usage("--warmup", std::to_string(cfg.warmup), "an integer >= 0");
  if (cfg.max_bytes > (std::size_t{16} << 30))
    throw_bad_usage("-e", std::to_string(cfg.max_bytes), "at most 16G per rank");
  (void)world;
}

std::vector<CollectiveRow> run_collective_bench(const CollectiveBenchConfig& cfg, std::vector<Communicator>& comms) {
  if (comms.empty()) return {};
  const int world = comms.front().world();
  validate(cfg, world);
  const bool a2a = cfg.op == CollectiveOp::alltoall;
  const std::size_t unit = 2 * static_cast<std::size_t>(world);  // bf16 elements, divisible by world
  struct Bufs {
    DeviceArray<std::uint16_t> send, recv;
    DeviceArray<unsigned long long> wrong;
    std::unique_ptr<EventTimer> timer;
  };
  std::vector<Bufs> bufs;
  const std::size_t max_elems = std::max(unit, cfg.max_bytes / unit * unit / 2);
  for (auto& c : comms) {
    set_device(c.device());
    set_error_rank(c.rank());
    Bufs b;
    b.send = DeviceArray<std::uint16_t>(a2a ? max_elems : max_elems / world, "collective send");
    b.recv = DeviceArray<std::uint16_t>(max_elems, "collective recv");
    b.wrong = DeviceArray<unsigned long long>(1, "collective check");
    b.timer = std::make_unique<EventTimer>();
    bufs.push_back(std::move(b));
  }
  auto issue = [&](std::size_t per_peer) {
    GroupGuard group;  // one process driving several GPUs must group their calls
    for (std::size_t i = 0; i < comms.size(); ++i) {
      if (a2a) comms[i].all_to_all(bufs[i].send.data(), bufs[i].recv.data(), per_peer, WireType::bf16);
      else comms[i].all_gather(bufs[i].send.data(), bufs[i].recv.data(), per_peer, WireType::bf16);
    }
  };
  std::vector<CollectiveRow> rows;
  for (std::size_t bytes = cfg.min_bytes; bytes <= cfg.max_bytes; bytes *= static_cast<std::size_t>(cfg.factor)) {
    const std::size_t elems = std::max(unit, bytes / 2 / static_cast<std::size_t>(world) * static_cast<std::size_t>(world));
    const std::size_t per_peer = elems / static_cast<std::size_t>(world);
    for (std::size_t i = 0; i < comms.size(); ++i) {
      set_device(comms[i].device());
      const auto st = detail::stream(comms[i].stream());
      fill_kernel<<<1024, 256, 0, st>>>(bufs[i].send.data(), comms[i].rank(), world, static_cast<long long>(per_peer), a2a);
      DIONSIM_LAUNCH_CHECK("collective bench (fill)");
      memset_device(bufs[i].recv.data(), 0xff, elems * 2, comms[i].stream());
      memset_device(bufs[i].wrong.data(), 0, sizeof(unsigned long long), comms[i].stream());
    }
    for (int it = 0; it < cfg.warmup; ++it) issue(per_peer);
    for (std::size_t i = 0; i < comms.size(); ++i) { set_device(comms[i].device()); bufs[i].timer->start(comms[i].stream()); }
    for (int it = 0; it < cfg.iters; ++it) issue(per_peer);
    for (std::size_t i = 0; i < comms.size(); ++i) { set_device(comms[i].device()); bufs[i].timer->stop(comms[i].stream()); }
    double worst_ms = 0;
    long long wrong = 0;
    for (std::size_t i = 0; i < comms.size(); ++i) {
      set_device(comms[i].device());
      worst_ms = std::max(worst_ms, static_cast<double>(bufs[i].timer->elapsed_ms()));
      check_kernel<<<1024, 256, 0, detail::stream(comms[i].stream())>>>(bufs[i].recv.data(), comms[i].rank(), world,
                                                                        static_cast<long long>(per_peer), a2a,
                                                                        bufs[i].wrong.data());
      DIONSIM_LAUNCH_CHECK("collective bench (check)");
      wrong += static_cast<long long>(bufs[i].wrong.download()[0]);
    }
    CollectiveRow r;
    r.bytes = elems * 2;
    r.count = elems;
    r.time_us = worst_ms * 1e3 / cfg.iters;
    r.algbw_GBps = static_cast<double>(r.bytes) / (r.time_us * 1e-6) / 1e9;
    r.busbw_GBps = r.algbw_GBps * (world - 1) / world;
    r.wrong = wrong;
    rows.push_back(r);
    if (bytes > cfg.max_bytes / static_cast<std::size_t>(cfg.factor)) break;
  }
  return rows;
}

}  // namespace dionsim::kernels
