#include "kernels/measure.hpp"

#include <algorithm>

#include <cstdlib>

#include "common/error.hpp"
#include "optimizer/inventory.hpp"

namespace dionsim::kernels {

namespace {
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

std::vector<Communicator> make_communicators(int gpus) {
  const char* ws = std::getenv("WORLD_SIZE");
  if (ws != nullptr && *ws != '\0') {
    std::vector<Communicator> one;
    one.push_back(Communicator::init_from_env());
    return one;
  }
  const int n = gpus > 0 ? gpus : static_cast<int>(require_devices(1).size());
  return Communicator::init_local(n);
}

MeasureResult run_measure(const MeasureConfig& cfg, std::vector<Communicator>& comms) {
  if (cfg.steps < 1) throw_bad_usage("--steps", std::to_string(cfg.steps), "an integer >= 1");
  if (cfg.warmup < 0) throw_bad_usage("--warmup", std::to_string(cfg.warmup), "an integer >= 0");
  if (cfg.step.world < 1) throw_bad_usage("--gpus", std::to_string(cfg.step.world), "an integer >= 1");
  const opt::Inventory inv = opt::load_inventory(cfg.model);
  std::vector<opt::ParamSpec> params;
  for (const auto& e : inv.entries)
    for (std::int64_t i = 0; i < e.count; ++i) params.push_back({e.name + "." + std::to_string(i), e.rows, e.cols});
  const auto devices = list_devices();
  NcclStepTransport tr(comms);
  GpuOptimizer gpu(cfg.step, params, tr, /*timing=*/true, cfg.max_in_flight);
  gpu.randomize_weights(cfg.seed);

  MeasureResult res;
  res.groups = gpu.groups();
  res.device_name = devices.at(static_cast<std::size_t>(comms.front().device())).name;
  res.rank = comms.front().rank();
  res.gpus = static_cast<int>(cfg.step.world);
  for (const auto& g : res.groups) {
    res.a2a_payload_bytes += g.a2a_bytes;
    res.norms_allgather_bytes += g.norms_bytes;
    res.ns_flops_per_rank += g.ns_flops;
  }
  std::map<std::string, std::vector<double>> kernel_samples;
  std::map<std::pair<std::string, std::int64_t>, std::vector<double>> coll_samples;
  std::map<std::pair<std::string, std::int64_t>, std::int64_t> coll_bytes;
  for (int t = 0; t < cfg.warmup + cfg.steps; ++t) {
    gpu.randomize_grads(cfg.seed);  // outside the timed region (the step's events bracket step() only)
    gpu.step();
    gpu.synchronize();
    if (t < cfg.warmup) continue;
    const auto timing = gpu.last_timing();
    double worst = 0;
    for (const auto& rt : timing) worst = std::max(worst, rt.step_ms);
    res.step_ms.push_back(worst);
    for (const auto& [k, ms] : timing.front().kernel_ms) kernel_samples[k].push_back(ms);
    for (const auto& c : timing.front().collectives) {
      coll_samples[{c.name, c.group}].push_back(c.ms);
      coll_bytes[{c.name, c.group}] = c.bytes_sent;
    }
    for (const auto& s : gpu.last_stats()) {
      res.winner_rows += s.winner_rows;
      res.deferred_rows += s.deferred_rows;
    }
  }
  res.median_step_ms = median(res.step_ms);
  for (const auto& [k, v] : kernel_samples) res.kernel_ms[k] = median(v);
  for (const auto& [key, v] : coll_samples) res.collectives.push_back({key.first, key.second, coll_bytes[key], median(v)});
  std::sort(res.collectives.begin(), res.collectives.end(),
            [](const auto& a, const auto& b) { return a.group != b.group ? a.group < b.group : a.name < b.name; });
  return res;
}

}  // namespace dionsim::kernels
