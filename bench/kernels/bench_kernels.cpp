// bench_kernels: per NS shape of a model's plan (default gpt-5120x8, world 2, fraction 0.25, the
// three scopes' NS inputs), Polar Express TFLOP/s (nominal §2.6.4 FLOPs / CUDA-event time) against
// cuBLASLt's own throughput on the same three GEMM shapes (X Xᵀ, A A, B X) run back to back; NS
// time per number of symmetric block rows; the effective HBM bandwidth of the row kernels. CUDA
// events, median of --iters after warm-up.
// Usage: bench_kernels [--model M] [--world W] [--fraction F] [--iters N]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.hpp"
#include "kernels/device.hpp"
#include "kernels/ops.hpp"
#include "optimizer/inventory.hpp"
#include "optimizer/plan.hpp"

using namespace dionsim;
using namespace dionsim::kernels;

namespace {

template <class F>
double median_ms(StreamHandle s, int iters, F&& f) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> t;
  EventTimer timer;
  for (int i = 0; i < iters; ++i) {
    timer.start(s);
    f();
    timer.stop(s);
    t.push_back(timer.elapsed_ms());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "gpt-5120x8";
  std::int64_t world = 2;
  double fraction = 0.25;
  int iters = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") model = v;
    else if (k == "--world") world = std::stoll(v);
    else if (k == "--fraction") fraction = std::stod(v);
    else if (k == "--iters") iters = std::stoi(v);
    else { std::fprintf(stderr, "bench_kernels: unknown option '%s'\n", k.c_str()); return 2; }
  }
  try {
    const auto dev = require_devices(1).front();
    set_device(0);
    auto s = create_stream();
    std::printf("# bench_kernels on %s: %s world %lld fraction %g (median of %d, CUDA events)\n", dev.name.c_str(),
                model.c_str(), static_cast<long long>(world), fraction, iters);
    // Distinct NS inputs [batch, rows, cols] of the three scopes' plans.
    std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shapes;
    for (auto scope : {opt::Scope::local, opt::Scope::global, opt::Scope::global_capped}) {
      opt::PlanConfig pc;
      pc.world = world;
      pc.scope = scope;
      pc.fraction = fraction;
      for (const auto& g : opt::make_plan(opt::load_inventory(model), pc).groups)
        shapes.insert({g.ns_matrices, g.ns_rows, g.ns_cols});
    }
    std::printf("%6s %7s %7s %10s %10s %10s %12s %12s %8s\n", "batch", "rows", "cols", "NS_TFLOP", "NS_ms", "NS_TF/s",
                "GEMMs_ms", "GEMMs_TF/s", "NS/GEMM");
    for (const auto& [batch, rows, cols] : shapes) {
      const std::int64_t m = std::min(rows, cols), n = std::max(rows, cols);
      std::vector<float> host(static_cast<std::size_t>(batch * rows * cols));
      DeviceArray<float> tmp(host.size());
      fill_random(tmp.data(), static_cast<std::int64_t>(host.size()), 7, 1.0F, s);
      DeviceArray<bf16_bits> X(host.size()), X0(host.size()), A(static_cast<std::size_t>(batch * m * m)),
          AA(static_cast<std::size_t>(batch * m * m)), BX(host.size());
      // bf16 copy of the random fp32 data through the row-kernel path (pad_shards: N=Np=batch, L=pl=rows)
      pad_shards_bf16(tmp.data(), MomentumDtype::fp32, static_cast<int>(batch), static_cast<int>(batch), rows, rows, cols, X0.data(), s);
      NewtonSchulz ns(NsKind::polar_express);
      ns.reserve(static_cast<int>(batch), rows, cols);
      const double ns_ms = median_ms(s, iters, [&] {
        copy_device(X.data(), X0.data(), X0.bytes(), s);  // fresh (non-converged) input every run
        ns.run(X.data(), static_cast<int>(batch), rows, cols, s);
      });
      const double copy_ms = median_ms(s, iters, [&] { copy_device(X.data(), X0.data(), X0.bytes(), s); });
      // The same three GEMM shapes per iteration as plain row-major GEMMs (wide form: m x n).
      const double gemm_ms = median_ms(s, iters, [&] {
        ns.gemm(X0.data(), X0.data(), A.data(), static_cast<int>(batch), m, m, n, s);    // ~ X Xᵀ (shape only)
        ns.gemm(A.data(), A.data(), AA.data(), static_cast<int>(batch), m, m, m, s);     // A A
        ns.gemm(AA.data(), X0.data(), BX.data(), static_cast<int>(batch), m, n, m, s);   // B X
      });
      const double flops = NewtonSchulz::flops(static_cast<int>(batch), rows, cols);
      const double ns_net = ns_ms - copy_ms;
      std::printf("%6lld %7lld %7lld %10.3f %10.3f %10.1f %12.3f %12.1f %8.2f\n", static_cast<long long>(batch),
                  static_cast<long long>(rows), static_cast<long long>(cols), flops / 1e12, ns_net, flops / (ns_net * 1e9),
                  5 * gemm_ms, flops / (5 * gemm_ms * 1e9), (flops / (ns_net * 1e9)) / (flops / (5 * gemm_ms * 1e9)));
    }
    // Symmetric block rows (X Xᵀ and A A of the NS): time per block-row count, to pick the default.
    std::printf("\n%-24s %7s %7s %10s %10s\n", "NS input (symmetric)", "m", "blocks", "NS_ms", "vs_1");
    for (const auto& [batch, rows, cols] : shapes) {
      const std::int64_t m = std::min(rows, cols);
      const auto n = static_cast<std::size_t>(batch * rows * cols);
      DeviceArray<float> tmp(n);
      fill_random(tmp.data(), static_cast<std::int64_t>(n), 7, 1.0F, s);
      DeviceArray<bf16_bits> X(n), X0(n);
      pad_shards_bf16(tmp.data(), MomentumDtype::fp32, static_cast<int>(batch), static_cast<int>(batch), rows, rows,
                      cols, X0.data(), s);
      const double copy_ms = median_ms(s, iters, [&] { copy_device(X.data(), X0.data(), X0.bytes(), s); });
      double plain = 0;
      for (int blocks : {1, 2, 4, 8, 16}) {
        NewtonSchulz ns(NsKind::polar_express);
        ns.set_symmetric_layout({SymmetricLayout::block_rows, 0});
        ns.set_symmetric_min(1);
        ns.set_symmetric_blocks(blocks);
        if (blocks > 1 && ns.symmetric_blocks(m) != blocks) continue;
        ns.reserve(static_cast<int>(batch), rows, cols);
        const double ms = median_ms(s, iters, [&] {
                            copy_device(X.data(), X0.data(), X0.bytes(), s);
                            ns.run(X.data(), static_cast<int>(batch), rows, cols, s);
                          }) - copy_ms;
        if (blocks == 1) plain = ms;
        std::printf("%4lld x %6lld x %6lld %7lld %7d %10.3f %10.3f\n", static_cast<long long>(batch),
                    static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(m), blocks, ms,
                    ms / plain);
      }
      // Tiles (t: the upper triangle's tiles in one pointer-array GEMM per product), default algorithms.
      for (const std::int64_t tile : {128, 256, 320, 512, 640, 1024}) {
        const NsLayout want{SymmetricLayout::tiles, tile};
        NewtonSchulz ns(NsKind::polar_express);
        ns.set_symmetric_layout(want);
        const NsLayout got = ns.layout(static_cast<int>(batch), rows, cols);
        if (got.kind != want.kind) continue;  // does not apply to this shape
        ns.reserve(static_cast<int>(batch), rows, cols);
        const double ms = median_ms(s, iters, [&] {
                            copy_device(X.data(), X0.data(), X0.bytes(), s);
                            ns.run(X.data(), static_cast<int>(batch), rows, cols, s);
                          }) - copy_ms;
        std::printf("%4lld x %6lld x %6lld %7lld %6s%lld %10.3f %10.3f\n", static_cast<long long>(batch),
                    static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(m), "t",
                    static_cast<long long>(want.rows), ms, ms / plain);
      }
      {  // what `dionsim measure` runs: autotuned layout and GEMM algorithms (tuned in the warm-up runs)
        NewtonSchulz ns(NsKind::polar_express);
        ns.set_autotune(true);
        ns.reserve(static_cast<int>(batch), rows, cols);
        const double ms = median_ms(s, iters, [&] {
                            copy_device(X.data(), X0.data(), X0.bytes(), s);
                            ns.run(X.data(), static_cast<int>(batch), rows, cols, s);
                          }) - copy_ms;
        const NsLayout l = ns.layout(static_cast<int>(batch), rows, cols);
        std::string chosen = "at:";
        chosen += l.kind == SymmetricLayout::tiles ? 't' : 'b';
        chosen += std::to_string(l.rows);
        std::printf("%4lld x %6lld x %6lld %7lld %7s %10.3f %10.3f\n", static_cast<long long>(batch),
                    static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(m),
                    chosen.c_str(), ms, ms / plain);
      }
    }
    // Memory-bound kernels: effective bandwidth (bytes read + written / time).
    const std::int64_t rows = 20480, cols = 5120;
    DeviceArray<float> G(static_cast<std::size_t>(rows * cols)), M(G.size()), keys(static_cast<std::size_t>(rows)), W(G.size());
    fill_random(G.data(), rows * cols, 1, 1.0F, s);
    fill_random(W.data(), rows * cols, 2, 1.0F, s);
    memset_device(M.data(), 0, M.bytes(), s);
    const double acc_ms = median_ms(s, iters, [&] { accumulate_row_l1(G.data(), M.data(), MomentumDtype::fp32, rows, cols, keys.data(), s); });
    DeviceArray<bf16_bits> U(G.size());
    pad_shards_bf16(G.data(), MomentumDtype::fp32, 1, 1, rows, rows, cols, U.data(), s);
    PostParams pp;
    pp.ef = 0.95F;
    const double post_ms = median_ms(s, iters, [&] { masked_post(W.data(), M.data(), MomentumDtype::fp32, U.data(), nullptr, 1, rows, rows, cols, pp, s); });
    const double gb = static_cast<double>(rows * cols);
    std::printf("\n%-28s %10s %10s\n", "kernel [20480 x 5120]", "ms", "GB/s");
    std::printf("%-28s %10.3f %10.1f\n", "accumulate_row_l1 (fp32)", acc_ms, gb * 12 / (acc_ms * 1e6));
    std::printf("%-28s %10.3f %10.1f\n", "masked_post (all applied)", post_ms, gb * (2 + 8 + 8) / (post_ms * 1e6));
    destroy_stream(s);
  } catch (const NoDeviceError& e) {
    std::fprintf(stderr, "bench_kernels: skipped: %s\n", e.what());  // `make bench` on a GPU-less CUDA build
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_kernels: %s\n", e.what());
    return static_cast<int>(e.code());
  }
  return 0;
}
