// The unsharded GPU paths (single at world 1, ddp over a simulated world of replicas), column
// selection, Gram Newton-Schulz and the CUDA-graph step, each against the CPU reference
// (optimizer/reference_step.hpp, optimizer/newton_schulz.hpp) or the eager step.
#include <catch2/catch.hpp>

#include <algorithm>

#include "kernels/gpu_step.hpp"
#include "optimizer/newton_schulz.hpp"
#include "optimizer/reference_step.hpp"
#include "tests/gpu/gpu_test_util.hpp"

using namespace dionsim;
using namespace dionsim::kernels;

namespace {

double update_error(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& base) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double da = static_cast<double>(a[i]) - base[i], db = static_cast<double>(b[i]) - base[i];
    num += (da - db) * (da - db);
    den += db * db;
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// Row selection (24 x 64, R <= C), column selection for Dion2 (72 x 32, R > C; NorDion2 selects
// rows), a square group, and a single matrix (at world 3 unsharded: the single path, N = 1).
std::vector<opt::ParamSpec> mixed_params() {
  std::vector<opt::ParamSpec> p;
  for (int i = 0; i < 4; ++i) p.push_back({"wide" + std::to_string(i), 24, 64});
  for (int i = 0; i < 3; ++i) p.push_back({"tall" + std::to_string(i), 72, 32});
  for (int i = 0; i < 2; ++i) p.push_back({"sq" + std::to_string(i), 40, 40});
  p.push_back({"one", 48, 56});
  return p;
}

std::vector<std::vector<float>> initial(const std::vector<opt::ParamSpec>& params, opt::Dtype dtype, std::uint64_t seed) {
  std::vector<std::vector<float>> w0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto w = testing::random_floats(static_cast<std::size_t>(params[i].rows * params[i].cols), seed + i, 0.1F);
    if (dtype == opt::Dtype::bfloat16) w = testing::from_bf16(testing::to_bf16(w));
    w0.push_back(w);
  }
  return w0;
}

std::vector<std::vector<float>> grads(const std::vector<opt::ParamSpec>& params, int t) {
  std::vector<std::vector<float>> g;
  for (std::size_t i = 0; i < params.size(); ++i)
    g.push_back(testing::random_floats(static_cast<std::size_t>(params[i].rows * params[i].cols), 900 + 10 * t + i));
  return g;
}

}  // namespace

TEST_CASE("unsharded GPU paths match the CPU reference: single, ddp, column selection, every NS", "[gpu][step][world1]") {
  const auto kind = GENERATE(opt::OptimizerKind::dion2, opt::OptimizerKind::nordion2);
  const auto dtype = GENERATE(opt::Dtype::float32, opt::Dtype::bfloat16);
  const auto ns = GENERATE(opt::NsKind::polar_express, opt::NsKind::gram);
  const auto world = GENERATE(1, 3);  // 1: single (FSDP on a 1-rank mesh is unsharded, §1.4); 3: ddp replicas
  opt::StepConfig cfg;
  cfg.plan.scope = opt::Scope::local;  // a no-op off the sharded path
  cfg.plan.optimizer = kind;
  cfg.dtype = dtype;
  cfg.plan.ns = ns;
  cfg.plan.world = world;
  cfg.plan.sharded = world == 1;
  cfg.plan.fraction = 0.3;
  cfg.lr = 0.05;
  cfg.ef = kind == opt::OptimizerKind::dion2 ? 0.95 : 0.9;
  const auto params = mixed_params();
  const auto w0 = initial(params, dtype, 500);
  LoopbackTransport tr(world, 0);
  GpuOptimizer gpu(cfg, params, tr);
  opt::ReferenceOptimizer ref(cfg, params, w0);
  // The plan: row groups, a column group for Dion2, ddp where N > 1 at world 3.
  bool columns = false;
  for (const auto& g : gpu.groups()) {
    CHECK((g.path == opt::Path::single || g.path == opt::Path::ddp));
    CHECK((g.path == opt::Path::ddp) == (world > 1 && g.N > 1));
    columns = columns || !g.select_rows;
  }
  CHECK(columns == (kind == opt::OptimizerKind::dion2));
  gpu.set_weights(w0);
  for (int t = 0; t < 3; ++t) {
    const auto g = grads(params, t);
    gpu.set_grads(g);
    gpu.step();
    gpu.synchronize();
    ref.step(g);
    INFO(opt::to_string(kind) << " bf16 " << (dtype == opt::Dtype::bfloat16) << " ns " << opt::to_string(ns) << " world "
                              << world << " step " << t);
    const auto applied = gpu.last_applied_rows();
    for (std::size_t i = 0; i < params.size(); ++i) {
      INFO(params[i].name);
      CHECK(applied[i] == ref.last_applied_rows()[i]);  // selected rows (or columns) identical
      CHECK(gpu.momentum(i) == ref.momentum(i));         // M += G, EF decay: same single roundings
    }
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const double err = update_error(gpu.weight(i), ref.weight(i), w0[i]);
    WARN("unsharded GPU vs CPU after 3 steps, " << opt::to_string(kind) << (dtype == opt::Dtype::bfloat16 ? " bf16 " : " fp32 ")
                                                << opt::to_string(ns) << " world " << world << " " << params[i].name
                                                << ": update error " << err);
    // bf16 (Polar Express) / fp16 (Gram) products on tensor cores vs the CPU's fp32 sums (§2.6.1).
    CHECK(err < 0.05);
  }
}

TEST_CASE("Gram Newton-Schulz on the GPU matches the CPU reference (wide, tall, square, and batches)", "[gpu][ns][gram]") {
  struct Shape {
    int batch;
    std::int64_t rows, cols;
  };
  NewtonSchulz ns(NsKind::gram);
  for (const Shape sh : {Shape{1, 16, 128}, Shape{3, 40, 96}, Shape{2, 96, 40}, Shape{2, 48, 48}, Shape{1, 128, 512},
                         Shape{2, 260, 1100}}) {
    CAPTURE(sh.batch, sh.rows, sh.cols);
    const std::size_t per = static_cast<std::size_t>(sh.rows * sh.cols);
    auto x = testing::to_bf16(testing::random_floats(per * static_cast<std::size_t>(sh.batch), 77 + static_cast<std::uint64_t>(sh.rows)));
    if (sh.batch > 1) std::fill(x.begin() + static_cast<std::ptrdiff_t>(per), x.begin() + static_cast<std::ptrdiff_t>(2 * per), 0);  // a zero matrix
    DeviceArray<bf16_bits> d(x);
    const StreamHandle s = create_stream();
    ns.run(d.data(), sh.batch, sh.rows, sh.cols, s);
    synchronize(s);
    destroy_stream(s);
    const auto got = testing::from_bf16(d.download());
    for (int b = 0; b < sh.batch; ++b) {
      std::vector<float> want(per);
      for (std::size_t e = 0; e < per; ++e) want[e] = from_bf16(x[static_cast<std::size_t>(b) * per + e]);
      opt::orthogonalize_bf16(want, sh.rows, sh.cols, opt::NsKind::gram, 1e-8F);
      const std::vector<float> g(got.begin() + static_cast<std::ptrdiff_t>(b * per), got.begin() + static_cast<std::ptrdiff_t>((b + 1) * per));
      if (b == 1) {
        CHECK(std::all_of(g.begin(), g.end(), [](float v) { return v == 0.0F; }));
        continue;
      }
      const double err = testing::rel_frobenius(g, want);
      WARN("Gram NS GPU vs CPU " << sh.rows << "x" << sh.cols << " batch " << b << ": " << err);
      CHECK(err < 2e-2);  // fp16 GEMMs: tensor-core accumulation order vs the CPU's
    }
  }
  CHECK(ns.executed_flops(2, 96, 40) == 2.0 * (8.0 * 40 * 40 * 96 + 28.0 * 40 * 40 * 40));
  CHECK(ns.executed_flops(1, 48, 48) == 30.0 * 48 * 48 * 48);
}

TEST_CASE("CUDA-graph replay of the step is bit-identical to the eager step", "[gpu][step][graph]") {
  const auto ns = GENERATE(opt::NsKind::polar_express, opt::NsKind::gram);
  const auto kind = GENERATE(opt::OptimizerKind::dion2, opt::OptimizerKind::nordion2);
  opt::StepConfig cfg;
  cfg.plan.scope = opt::Scope::local;
  cfg.plan.optimizer = kind;
  cfg.plan.ns = ns;
  cfg.plan.world = 1;
  cfg.plan.fraction = 0.3;
  cfg.lr = 0.05;
  const auto params = mixed_params();
  const auto w0 = initial(params, opt::Dtype::float32, 600);
  LoopbackTransport ta(1, 0), tb(1, 0);
  GpuOptimizer eager(cfg, params, ta, /*timing=*/true), graphed(cfg, params, tb, /*timing=*/true);
  eager.set_weights(w0);
  graphed.set_weights(w0);
  graphed.capture();  // runs nothing
  CHECK(graphed.graph_nodes() > 10);
  for (int t = 0; t < 3; ++t) {
    const auto g = grads(params, t);
    eager.set_grads(g);
    graphed.set_grads(g);
    eager.step();
    graphed.replay();
    eager.synchronize();
    graphed.synchronize();
    REQUIRE(graphed.last_timing().size() == 1);
    CHECK(graphed.last_timing().front().step_ms > 0);
    CHECK(graphed.last_timing().front().kernel_ms.empty());
    CHECK(graphed.last_applied_rows() == eager.last_applied_rows());
    for (std::size_t i = 0; i < params.size(); ++i) {
      INFO(opt::to_string(ns) << " " << opt::to_string(kind) << " step " << t << " " << params[i].name);
      CHECK(graphed.weight(i) == eager.weight(i));
      CHECK(graphed.momentum(i) == eager.momentum(i));
    }
  }
  // An eager step after replays continues the same state.
  const auto g = grads(params, 7);
  eager.set_grads(g);
  graphed.set_grads(g);
  eager.step();
  graphed.step();
  eager.synchronize();
  graphed.synchronize();
  for (std::size_t i = 0; i < params.size(); ++i) CHECK(graphed.weight(i) == eager.weight(i));
}

TEST_CASE("CUDA-graph capture: refused for several local ranks, replay needs a capture", "[gpu][step][graph]") {
  opt::StepConfig cfg;
  cfg.plan.scope = opt::Scope::local;
  cfg.plan.world = 3;
  LoopbackTransport tr(3, 0);
  GpuOptimizer gpu(cfg, mixed_params(), tr);
  CHECK_THROWS_WITH(gpu.capture(), Catch::Contains("one local rank"));
  CHECK_THROWS_WITH(gpu.replay(), Catch::Contains("before capture"));
}
