// The GPU step against the CPU reference step (the ground truth) and the shared fixtures.
// Loopback: a simulated world on one GPU (collectives = device copies); NCCL: one rank per GPU.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "kernels/gpu_step.hpp"
#include "kernels/reference.hpp"
#include "optimizer/npy.hpp"
#include "optimizer/numerics_case.hpp"
#include "optimizer/reference_step.hpp"
#include "tests/gpu/gpu_test_util.hpp"

using namespace dionsim;
using namespace dionsim::kernels;
namespace fs = std::filesystem;

namespace {

// DIONSIM_SHARED_DIR in the environment overrides the build-time path (the GPU machine gets the
// fixtures copied next to the binaries, not at ../shared).
fs::path shared_dir() {
  const char* env = std::getenv("DIONSIM_SHARED_DIR");
  return env != nullptr && *env != '\0' ? fs::path(env) : fs::path(DIONSIM_SHARED_DIR);
}
const fs::path kFixtures = shared_dir() / "fixtures" / "numerics";

// || (a - base) - (b - base) ||_F / || b - base ||_F : the update's relative error.
double update_error(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& base) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double da = static_cast<double>(a[i]) - base[i], db = static_cast<double>(b[i]) - base[i];
    num += (da - db) * (da - db);
    den += db * db;
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

struct GpuRun {
  std::vector<std::vector<float>> W;                 // [param] after all steps
  std::vector<std::vector<std::int64_t>> applied;    // [param] rows applied in the last step
  std::vector<std::vector<opt::RankStepStats>> stats;  // [step][rank]
};

GpuRun run_gpu(const opt::StepConfig& cfg, const std::vector<opt::ParamSpec>& params,
               const std::vector<std::vector<float>>& w0, const std::vector<std::vector<std::vector<float>>>& grads,
               StepTransport& tr) {
  GpuOptimizer g(cfg, params, tr);
  g.set_weights(w0);
  GpuRun out;
  for (const auto& gt : grads) {
    g.set_grads(gt);
    g.step();
    g.synchronize();
    out.stats.push_back(g.last_stats());
  }
  for (std::size_t i = 0; i < params.size(); ++i) out.W.push_back(g.weight(i));
  out.applied = g.last_applied_rows();
  return out;
}

void check_fixture(const std::string& name, StepTransport& tr) {
  const opt::NumericsCase c = opt::load_numerics_case((kFixtures / name).string());
  const GpuRun run = run_gpu(c.config, c.params, c.initial, c.grads, tr);
  const auto ref = opt::run_numerics_case(c, 2);
  for (std::size_t i = 0; i < c.params.size(); ++i) {
    const auto expected = opt::read_npy((kFixtures / name / "expected" / ("W_" + c.params[i].name + ".npy")).string());
    const double err = update_error(run.W[i], expected.data, c.initial[i]);
    const double err_cpu = update_error(run.W[i], ref->weight(i), c.initial[i]);
    WARN(name << " (" << tr.name() << ", world " << tr.world() << ") " << c.params[i].name
              << ": update error vs PyTorch " << err << ", vs CPU reference " << err_cpu);
    // The fixtures' acceptance bound (tests/optimizer uses the same): bf16 NS on different
    // hardware lands within a few percent (§2.6.1); measured values are printed above.
    CHECK(err < 0.05);
    auto ref_rows = ref->last_applied_rows()[i];
    std::sort(ref_rows.begin(), ref_rows.end());
    CHECK(run.applied[i] == ref_rows);  // selection sets identical to the CPU reference
  }
  std::ifstream in(kFixtures / name / "expected" / "stats.json");
  const auto stats = nlohmann::json::parse(in)["capped_stats_rank0"];
  REQUIRE(stats.size() == run.stats.size());
  for (std::size_t t = 0; t < stats.size(); ++t)
    if (!stats[t].empty()) {
      CHECK(run.stats[t][0].deferred_rows == stats[t]["deferred_rows"].get<std::int64_t>());
      CHECK(run.stats[t][0].winner_rows == stats[t]["winner_rows"].get<std::int64_t>());
    }
}

}  // namespace

TEST_CASE("GPU step reproduces the four fixtures on one GPU (simulated world)", "[gpu][step]") {
  for (const char* name : {"d2_local_w2", "d2_global_w2", "nd2_global_w4_uneven", "d2_capped_w2_pool"}) {
    const auto c = opt::load_numerics_case((kFixtures / name).string());
    LoopbackTransport tr(static_cast<int>(c.config.plan.world), 0);
    check_fixture(name, tr);
  }
}

TEST_CASE("GPU step reproduces the world-2 fixtures over NCCL on two GPUs", "[gpu][step][nccl]") {
  if (list_devices().size() < 2) {
    WARN("skipped: fewer than 2 GPUs");
    return;
  }
  auto comms = Communicator::init_local(2);
  NcclStepTransport tr(comms);
  for (const char* name : {"d2_local_w2", "d2_global_w2", "d2_capped_w2_pool"}) check_fixture(name, tr);
}

TEST_CASE("GPU step matches the CPU reference step: selections, momentum, stats, updates", "[gpu][step]") {
  const auto scope = GENERATE(opt::Scope::local, opt::Scope::global, opt::Scope::global_capped);
  const auto kind = GENERATE(opt::OptimizerKind::dion2, opt::OptimizerKind::nordion2);
  const auto dtype = GENERATE(opt::Dtype::float32, opt::Dtype::bfloat16);
  opt::StepConfig cfg;
  cfg.plan.scope = scope;
  cfg.plan.optimizer = kind;
  cfg.dtype = dtype;
  cfg.plan.world = 3;
  cfg.plan.fraction = 0.3;
  cfg.plan.capacity_factor = 1.0;  // pins B = ceil(pr*k): the capped groups pack (and defer)
  cfg.lr = 0.05;
  cfg.ef = kind == opt::OptimizerKind::dion2 ? 0.95 : 0.9;
  // Two shape groups with uneven shards (29 rows over 3 ranks: 10, 10, 9) and a virtual matrix.
  std::vector<opt::ParamSpec> params;
  std::vector<std::vector<float>> w0;
  for (int i = 0; i < 5; ++i) params.push_back({"sq" + std::to_string(i), 29, 64});
  for (int i = 0; i < 2; ++i) params.push_back({"wide" + std::to_string(i), 40, 96});
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto w = testing::random_floats(static_cast<std::size_t>(params[i].rows * params[i].cols), 500 + i, 0.1F);
    if (dtype == opt::Dtype::bfloat16) w = testing::from_bf16(testing::to_bf16(w));
    w0.push_back(w);
  }
  LoopbackTransport tr(3, 0);
  GpuOptimizer gpu(cfg, params, tr);
  gpu.set_weights(w0);
  opt::ReferenceOptimizer ref(cfg, params, w0);
  for (int t = 0; t < 3; ++t) {
    std::vector<std::vector<float>> g;
    for (std::size_t i = 0; i < params.size(); ++i)
      g.push_back(testing::random_floats(static_cast<std::size_t>(params[i].rows * params[i].cols), 900 + 10 * t + i));
    gpu.set_grads(g);
    gpu.step();
    gpu.synchronize();
    ref.step(g);
    INFO("scope " << opt::to_string(scope) << " " << opt::to_string(kind) << " bf16 " << (dtype == opt::Dtype::bfloat16)
                  << " step " << t);
    const auto applied = gpu.last_applied_rows();
    for (std::size_t i = 0; i < params.size(); ++i) {
      auto want = ref.last_applied_rows()[i];
      std::sort(want.begin(), want.end());
      CHECK(applied[i] == want);
      // M += G and the EF decay are the same single-rounding operations on identical inputs.
      CHECK(gpu.momentum(i) == ref.momentum(i));
    }
    const auto st = gpu.last_stats();
    for (std::size_t r = 0; r < st.size(); ++r) {
      CHECK(st[r].deferred_rows == ref.stats()[r].back().deferred_rows);
      CHECK(st[r].winner_rows == ref.stats()[r].back().winner_rows);
    }
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const double err = update_error(gpu.weight(i), ref.weight(i), w0[i]);
    WARN("GPU vs CPU reference after 3 steps, " << opt::to_string(scope) << " " << opt::to_string(kind)
                                                << (dtype == opt::Dtype::bfloat16 ? " bf16 " : " fp32 ") << params[i].name
                                                << ": update error " << err);
    CHECK(err < 0.05);  // bf16 NS on tensor cores vs the CPU's exact-sum GEMMs (§2.6.1: a few percent)
  }
}

// Regression: a single [12 x 96] NS per owner (batch 1) once picked a cuBLASLt split-K kernel that
// reduced partial sums in bf16 (7 % off). With no EF, no weight decay and W0 = 0 the update is
// -lr * bf16(U), so U is read back from W and compared with the host NS of the same rows.
TEST_CASE("global step: the owner's NS output equals the host NS of the selected rows", "[gpu][step]") {
  opt::StepConfig cfg;
  cfg.plan.scope = opt::Scope::global;
  cfg.plan.world = 2;
  cfg.plan.fraction = 0.3;
  cfg.lr = 0.05;
  cfg.ef = 1.0;
  cfg.weight_decay = 0.0;
  cfg.adjust_lr = opt::AdjustLr::none;
  const std::int64_t R = 40, C = 96;
  std::vector<opt::ParamSpec> params{{"a", R, C}, {"b", R, C}};
  std::vector<std::vector<float>> w0, g;
  for (int i = 0; i < 2; ++i) {
    w0.push_back(std::vector<float>(static_cast<std::size_t>(R * C), 0.0F));
    g.push_back(testing::random_floats(static_cast<std::size_t>(R * C), 900 + i));
  }
  LoopbackTransport tr(2, 0);
  GpuOptimizer gpu(cfg, params, tr);
  gpu.set_weights(w0);
  gpu.set_grads(g);
  gpu.step();
  gpu.synchronize();
  opt::ReferenceOptimizer ref(cfg, params, w0);
  ref.step(g);
  for (std::size_t i = 0; i < 2; ++i) {
    auto rows = ref.last_applied_rows()[i];
    std::sort(rows.begin(), rows.end());
    const auto grows = gpu.last_applied_rows()[i];
    // host NS of the selected bf16 momentum rows (M = G: no EF, first step)
    std::vector<bf16_bits> x;
    for (auto r : rows)
      for (std::int64_t c = 0; c < C; ++c) x.push_back(to_bf16(g[i][static_cast<std::size_t>(r * C + c)]));
    kernels::ref::newton_schulz(x, 1, static_cast<std::int64_t>(rows.size()), C, NsKind::polar_express);
    const auto wg = gpu.weight(i), wr = ref.weight(i);
    std::vector<float> ug, ur, uh;
    for (std::size_t t = 0; t < rows.size(); ++t)
      for (std::int64_t c = 0; c < C; ++c) {
        const auto e = static_cast<std::size_t>(rows[t] * C + c);
        ug.push_back(-wg[e] / 0.05F);
        ur.push_back(-wr[e] / 0.05F);
        uh.push_back(from_bf16(x[t * static_cast<std::size_t>(C) + static_cast<std::size_t>(c)]));
      }
    std::string gs, rs;
    for (auto r : grows) gs.append(" ").append(std::to_string(r));  // (not " " + ...: GCC 12 -Wrestrict false positive)
    for (auto r : rows) rs.append(" ").append(std::to_string(r));
    INFO("param " << i << " gpu rows" << gs << " | ref rows" << rs);
    CHECK(grows == rows);
    // Both sides round -lr * U through bf16 once (<= 2^-9 relative per element): 4e-3 bounds it.
    CHECK(testing::rel_frobenius(ug, uh) < 4e-3);
    CHECK(testing::rel_frobenius(ur, uh) < 4e-3);
  }
}

// The overlapped stream layouts (memory-bound kernels on per-task auxiliary streams, NS on the
// compute stream) only reorder independent work across megabatches: weights, momentum, applied
// rows and CAPPED_STATS must equal the single-stream step's bit for bit, also with fewer
// auxiliary streams than groups (max_in_flight 2, three groups: groups 0 and 2 share one).
TEST_CASE("overlapped stream layouts give the single-stream step's results bit for bit", "[gpu][step]") {
  const auto scope = GENERATE(opt::Scope::local, opt::Scope::global, opt::Scope::global_capped);
  const auto kind = GENERATE(opt::OptimizerKind::dion2, opt::OptimizerKind::nordion2);
  opt::StepConfig cfg;
  cfg.plan.scope = scope;
  cfg.plan.optimizer = kind;
  cfg.plan.world = 3;
  cfg.plan.fraction = 0.3;
  cfg.plan.capacity_factor = 1.0;
  cfg.lr = 0.05;
  cfg.ef = 0.95;
  std::vector<opt::ParamSpec> params;
  for (int i = 0; i < 5; ++i) params.push_back({"sq" + std::to_string(i), 29, 64});
  for (int i = 0; i < 2; ++i) params.push_back({"wide" + std::to_string(i), 40, 96});
  for (int i = 0; i < 3; ++i) params.push_back({"tall" + std::to_string(i), 72, 32});
  std::vector<std::vector<float>> w0;
  for (std::size_t i = 0; i < params.size(); ++i)
    w0.push_back(testing::random_floats(static_cast<std::size_t>(params[i].rows * params[i].cols), 700 + i, 0.1F));
  struct Result {
    std::vector<std::vector<float>> W, M;
    std::vector<std::vector<std::int64_t>> applied;
    std::vector<opt::RankStepStats> stats;
  };
  auto run = [&](StreamMode mode, int in_flight) {
    LoopbackTransport tr(3, 0);
    GpuOptimizer gpu(cfg, params, tr, /*timing=*/true, in_flight, mode);
    gpu.set_weights(w0);
    Result r;
    // Device-side gradients, steps issued back to back with no host synchronization: each step's
    // gradient fill (compute stream) and kernels must wait for the previous step's aux streams.
    for (int t = 0; t < 3; ++t) {
      gpu.randomize_grads(11);
      gpu.step();
    }
    gpu.synchronize();
    for (std::size_t i = 0; i < params.size(); ++i) {
      r.W.push_back(gpu.weight(i));
      r.M.push_back(gpu.momentum(i));
    }
    r.applied = gpu.last_applied_rows();
    r.stats = gpu.last_stats();
    return r;
  };
  const Result base = run(StreamMode::single, 3);
  const std::vector<std::pair<StreamMode, int>> layouts{{StreamMode::overlap, 3},
                                                         {StreamMode::overlap, 2},
                                                         {StreamMode::overlap_ns_first, 3},
                                                         {StreamMode::overlap_aux_first, 1}};
  for (const auto& [mode, in_flight] : layouts) {
    INFO("scope " << opt::to_string(scope) << " " << opt::to_string(kind) << " mode " << static_cast<int>(mode)
                  << " in flight " << in_flight);
    const Result r = run(mode, in_flight);
    CHECK(r.W == base.W);
    CHECK(r.M == base.M);
    CHECK(r.applied == base.applied);
    for (std::size_t k = 0; k < r.stats.size(); ++k) {
      CHECK(r.stats[k].winner_rows == base.stats[k].winner_rows);
      CHECK(r.stats[k].deferred_rows == base.stats[k].deferred_rows);
    }
  }
}

TEST_CASE("the step reports each group's NS layout, configured or autotuned", "[gpu][step][ns]") {
  opt::StepConfig cfg;
  cfg.plan.world = 2;
  cfg.plan.scope = opt::Scope::local;
  cfg.plan.fraction = 0.5;
  // local NS inputs: pr matrices of kw = w * k rows by 96 columns — "sq" 32 x 96 (tiles of 16
  // apply), "wide" 20 x 96 (they do not: block rows).
  std::vector<opt::ParamSpec> params;
  for (int i = 0; i < 4; ++i) params.push_back({"sq" + std::to_string(i), 64, 96});
  for (int i = 0; i < 2; ++i) params.push_back({"wide" + std::to_string(i), 40, 96});
  LoopbackTransport tr(2, 0);
  {
    GpuOptimizer gpu(cfg, params, tr, false, 3, StreamMode::single, NsTuning{false, {SymmetricLayout::tiles, 16}});
    const auto layouts = gpu.ns_layouts();
    REQUIRE(layouts.size() == gpu.groups().size());
    for (std::size_t g = 0; g < layouts.size(); ++g) {
      const NsInput in = ns_input(gpu.groups()[g]);
      const std::int64_t m = std::min(in.rows, in.cols);
      INFO("group " << g << " NS m " << m);
      // tiles of 16 where they split m into >= 2, block rows otherwise
      CHECK(layouts[g].kind == (m % 16 == 0 && m / 16 >= 2 ? SymmetricLayout::tiles : SymmetricLayout::block_rows));
    }
  }
  GpuOptimizer tuned(cfg, params, tr, false, 3, StreamMode::single, NsTuning{true, {SymmetricLayout::tiles, 16}});
  tuned.randomize_weights(1);
  tuned.randomize_grads(2);
  tuned.step();  // the first step tunes every NS shape
  tuned.synchronize();
  const auto picked = tuned.ns_layouts();
  REQUIRE(picked.size() == tuned.groups().size());
  for (const auto& l : picked) CHECK(l.rows > 0);  // a real choice: tile rows or block height
}
