// Ad-hoc driver: one NewtonSchulz shape, a few runs, for ncu's per-kernel times.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "kernels/device.hpp"
#include "kernels/ops.hpp"
using namespace dionsim::kernels;
int main(int argc, char** argv) {
  const int batch = argc > 1 ? std::atoi(argv[1]) : 4;
  const long long rows = argc > 2 ? std::atoll(argv[2]) : 5120, cols = argc > 3 ? std::atoll(argv[3]) : 5120;
  const int tile = argc > 4 ? std::atoi(argv[4]) : 512;
  set_device(0);
  StreamHandle s = create_stream();
  const std::size_t n = static_cast<std::size_t>(batch * rows * cols);
  DeviceArray<float> tmp(n);
  fill_random(tmp.data(), static_cast<std::int64_t>(n), 7, 1.0F, s);
  DeviceArray<bf16_bits> X(n), X0(n);
  pad_shards_bf16(tmp.data(), MomentumDtype::fp32, batch, batch, rows, rows, cols, X0.data(), s);
  NewtonSchulz ns(NsKind::polar_express);
  if (tile > 0) ns.set_symmetric_layout({SymmetricLayout::tiles, tile});
  else ns.set_symmetric_layout({SymmetricLayout::block_rows, 0});
  ns.reserve(batch, rows, cols);
  for (int r = 0; r < 3; ++r) {
    copy_device(X.data(), X0.data(), X0.bytes(), s);
    ns.run(X.data(), batch, rows, cols, s);
  }
  synchronize(s);
  std::printf("done\n");
  return 0;
}
