// One CPU reference step of a model at a simulated world size, all ranks, real math: wall time,
// peak RSS and the achieved NS GEMM rate (plan FLOPs x ranks / wall), one line per scope.
// Usage: bench_step [MODEL] [WORLD] [SCOPE...]   (default gpt-1024x4 16 local global global_capped)
// Each scope runs in a forked child so that its peak RSS is its own.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "optimizer/inventory.hpp"
#include "optimizer/plan.hpp"
#include "optimizer/reference_step.hpp"

namespace {

using namespace dionsim::opt;

std::vector<float> fill(std::int64_t n, std::uint64_t seed, float scale) {
  std::vector<float> v(static_cast<std::size_t>(n));
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = scale * (static_cast<float>(s >> 40) / 16777216.0f - 0.5f);
  }
  return v;
}

int run_one(const std::string& model, std::int64_t world, Scope scope, int threads) {
  const Inventory inv = load_inventory(model);
  std::vector<ParamSpec> params;
  std::vector<std::vector<float>> w0, grads;
  for (const MatrixSpec& m : inv.entries) {
    for (std::int64_t c = 0; c < m.count; ++c) {
      params.push_back({m.name + "." + std::to_string(c), m.rows, m.cols});
      w0.push_back(fill(m.rows * m.cols, params.size(), 0.02f));
      grads.push_back(fill(m.rows * m.cols, 1000 + params.size(), 1.0f));
    }
  }
  StepConfig cfg;
  cfg.plan.world = world;
  cfg.plan.scope = scope;
  cfg.plan.fraction = 0.25;
  cfg.threads = threads;
  ReferenceOptimizer opt(cfg, params, w0);
  w0.clear();
  w0.shrink_to_fit();
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  const auto t0 = std::chrono::steady_clock::now();
  opt.step(grads);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double ns_flops = 0.0;
  std::int64_t a2a = 0;
  for (const GroupPlan& g : opt.groups()) {
    // real matrices only: virtual (zero) matrices are skipped by the reference step
    const double per = dionsim::opt::ns_flops(cfg.plan.ns, g.ns_rows, g.ns_cols);
    ns_flops += per * static_cast<double>(g.path == Path::single ? g.N * world : g.N);
    a2a += g.a2a_bytes;
  }
  std::int64_t deferred = 0;
  for (const auto& r : opt.stats()) deferred += r.back().deferred_rows;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  const double cpu = secs(ru.ru_utime) + secs(ru.ru_stime) - secs(before.ru_utime) - secs(before.ru_stime);
  std::printf("%-12s world %4lld  %-13s  threads %d  step_s %8.3f  cpu_s %8.3f  peak_rss_MB %8.1f  ns_GFLOP %8.1f  ns_GFLOPps %6.1f  "
              "a2a_MB/rank %7.2f  deferred %lld\n",
              model.c_str(), static_cast<long long>(world), std::string(to_string(scope)).c_str(), threads, s, cpu,
              static_cast<double>(ru.ru_maxrss) / 1024.0, ns_flops / 1e9, ns_flops / 1e9 / s,
              static_cast<double>(a2a) / 1e6, static_cast<long long>(deferred));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string model = argc > 1 ? argv[1] : "gpt-1024x4";
  const std::int64_t world = argc > 2 ? std::stoll(argv[2]) : 16;
  std::vector<std::string> scopes;
  for (int i = 3; i < argc; ++i) scopes.emplace_back(argv[i]);
  if (scopes.empty()) scopes = {"local", "global", "global_capped"};
  for (const std::string& s : scopes) {
    for (int threads : {1, 2}) {
      std::fflush(stdout);
      const pid_t pid = fork();
      if (pid == 0) {
        const int rc = run_one(model, world, parse_scope(s, "scope"), threads);
        std::fflush(stdout);
        _exit(rc);
      }
      int status = 0;
      waitpid(pid, &status, 0);
    }
  }
  return 0;
}
