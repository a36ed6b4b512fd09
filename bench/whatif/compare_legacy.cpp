// TEMPORARY (issue 15): the one scheduler against the old double-time contention loop on the
// seed configurations, calibrated (docs/calibration-seed-h100.json): the largest difference of
// any event start, duration, wall, exposed communication. Deleted with the old loop.
#include <cstdio>
#include <cstdlib>

#include "calibrated_step.hpp"
#include "legacy_contention_loop.hpp"

using namespace dionsim;

int main() {
  const auto cal = bench::seed_calibration();
  long long max_diff = 0, configs = 0, events = 0, total_stretched = 0;
  for (auto scope : {opt::Scope::local, opt::Scope::global, opt::Scope::global_capped}) {
    for (auto [nodes, gpn] : {std::pair{1, 2}, std::pair{1, 4}, std::pair{1, 8}, std::pair{2, 8}, std::pair{4, 8},
                              std::pair{8, 8}, std::pair{16, 8}, std::pair{32, 8}, std::pair{64, 8}}) {
      for (double hbm : {1.0, 1.4, 2.0}) {
        if (nodes > 1 && hbm != 1.0) continue;  // whatif applies it within one node only
        for (int variant = 0; variant < 4; ++variant) {
          const bool ahead = variant % 2 == 0;
          auto s = bench::calibrated_step(cal, scope, nodes, gpn, hbm, ahead);
          if (variant >= 2) {  // stress: every kernel class slowed beside a collective
            auto config = s.kernels->config();
            for (const auto& g : s.plan.groups) {
              for (const auto& ph : g.phases) {
                for (const auto& k : ph.kernels) config.overlap_slowdown_by_kernel[k.kernel] = 1.37;
              }
            }
            s.kernels = std::make_unique<sim::KernelModel>(config, sim::MeasuredKernelTimes{});
          }
          const auto a = sim::simulate_optimizer_step(s.plan, *s.kernels, *s.timer, s.options);
          const auto b = sim::legacy::legacy_contention_schedule(s.plan, *s.kernels, *s.timer, s.options);
          if (a.events.size() != b.events.size()) {
            std::printf("event counts differ\n");
            return 1;
          }
          const auto lowered = sim::lower_optimizer_step(s.plan, *s.kernels, *s.timer, s.options);
          long long stretched = 0;
          for (std::size_t i = 0; i < a.events.size(); ++i) {
            stretched += a.events[i].duration_ns > lowered.ops[i].event.duration_ns ? 1 : 0;
          }
          total_stretched += stretched;
          long long d = 0;
          for (std::size_t i = 0; i < a.events.size(); ++i) {
            d = std::max(d, std::llabs(a.events[i].start_ns - b.events[i].start_ns));
            d = std::max(d, std::llabs(a.events[i].duration_ns - b.events[i].duration_ns));
          }
          d = std::max({d, std::llabs(a.wall_ns - b.wall_ns), std::llabs(a.exposed_comm_ns - b.exposed_comm_ns),
                        std::llabs(a.gpu_busy_ns - b.gpu_busy_ns), std::llabs(a.a2a_ns - b.a2a_ns)});
          std::printf("%-14s %2dx%d hbm %.1f ahead %d stress %d  wall %lld ns (old %lld)  stretched ops %lld  max |diff| %lld ns\n",
                      opt::to_string(scope).data(), nodes, gpn, hbm, ahead ? 1 : 0, variant / 2, static_cast<long long>(a.wall_ns),
                      static_cast<long long>(b.wall_ns), stretched, d);
          max_diff = std::max(max_diff, d);
          ++configs;
          events += static_cast<long long>(a.events.size());
        }
      }
    }
  }
  std::printf("configurations %lld, events %lld (%lld slowed by contention), largest difference %lld ns\n", configs,
              events, total_stretched, max_diff);
  return 0;
}
