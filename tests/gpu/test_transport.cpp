// NCCL transport with one process driving every visible GPU (world = device count; world 1 still
// runs the collectives through NCCL).
#include <catch2/catch.hpp>

#include "kernels/transport.hpp"
#include "tests/gpu/gpu_test_util.hpp"

using namespace dionsim::kernels;

TEST_CASE("all-to-all and all-gather deliver every chunk to the right rank", "[gpu][transport]") {
  const int world = static_cast<int>(list_devices().size());
  auto comms = Communicator::init_local(world);
  const std::size_t count = 1000;  // bf16 elements per peer
  std::vector<DeviceArray<bf16_bits>> send, recv, gsend, grecv;
  for (int r = 0; r < world; ++r) {
    set_device(comms[r].device());
    std::vector<bf16_bits> s(world * count), g(count);
    for (int d = 0; d < world; ++d)
      for (std::size_t i = 0; i < count; ++i) s[d * count + i] = static_cast<bf16_bits>(r * 1000 + d * 100 + i % 97);
    for (std::size_t i = 0; i < count; ++i) g[i] = static_cast<bf16_bits>(r * 7 + i % 31);
    send.emplace_back(s);
    recv.emplace_back(world * count);
    gsend.emplace_back(g);
    grecv.emplace_back(world * count);
  }
  {
    GroupGuard group;
    for (int r = 0; r < world; ++r) comms[r].all_to_all(send[r].data(), recv[r].data(), count, WireType::bf16);
  }
  {
    GroupGuard group;
    for (int r = 0; r < world; ++r) comms[r].all_gather(gsend[r].data(), grecv[r].data(), count, WireType::bf16);
  }
  for (int r = 0; r < world; ++r) {
    set_device(comms[r].device());
    synchronize(comms[r].stream());
    const auto a = recv[r].download(), g = grecv[r].download();
    for (int src = 0; src < world; ++src)
      for (std::size_t i = 0; i < count; ++i) {
        REQUIRE(a[src * count + i] == static_cast<bf16_bits>(src * 1000 + r * 100 + i % 97));
        REQUIRE(g[src * count + i] == static_cast<bf16_bits>(src * 7 + i % 31));
      }
  }
}
