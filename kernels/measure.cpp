#include "kernels/measure.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "common/launch.hpp"
#include "optimizer/inventory.hpp"
#include "optimizer/plan.hpp"
#include "optimizer/plan_json.hpp"

namespace dionsim::kernels {

namespace {
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
constexpr std::array<std::pair<StreamMode, const char*>, 4> kStreamModes{{{StreamMode::single, "single"},
                                                                         {StreamMode::overlap, "overlap"},
                                                                         {StreamMode::overlap_ns_first, "ns_first"},
                                                                         {StreamMode::overlap_aux_first, "aux_first"}}};

StreamMode streams_from_env(StreamMode fallback) {
  const char* env = std::getenv("DIONSIM_GPU_STREAMS");
  if (env == nullptr || *env == '\0') return fallback;
  for (const auto& [m, name] : kStreamModes)
    if (std::string(env) == name) return m;
  throw_bad_usage("DIONSIM_GPU_STREAMS", env, "single, overlap, ns_first or aux_first");
}
bool autotune_from_env(bool fallback) {
  const char* env = std::getenv("DIONSIM_NS_AUTOTUNE");
  if (env == nullptr || *env == '\0') return fallback;
  if (std::string(env) == "0" || std::string(env) == "1") return *env == '1';
  throw_bad_usage("DIONSIM_NS_AUTOTUNE", env, "0 or 1");
}
NsLayout layout_from_env(NsLayout fallback) {
  const char* env = std::getenv("DIONSIM_NS_LAYOUT");
  if (env == nullptr || *env == '\0') return fallback;
  const std::string v = env;
  if (v == "blocks") return {SymmetricLayout::block_rows, 0};
  const std::string prefix = "tiles:", rows = v.substr(std::min(v.size(), prefix.size()));
  if (v.rfind(prefix, 0) == 0 && !rows.empty() && rows.size() <= 6 &&
      rows.find_first_not_of("0123456789") == std::string::npos && std::stoll(rows) > 0 && std::stoll(rows) % 8 == 0)
    return {SymmetricLayout::tiles, std::stoll(rows)};
  throw_bad_usage("DIONSIM_NS_LAYOUT", v, "blocks or tiles:ROWS (ROWS a positive multiple of 8)");
}
}  // namespace

std::string to_string(NsLayout l) {
  switch (l.kind) {
    case SymmetricLayout::block_rows: return "blocks";
    case SymmetricLayout::tiles: return "tiles:" + std::to_string(l.rows);
  }
  return "?";
}

const char* to_string(StreamMode m) {
  for (const auto& [mode, name] : kStreamModes)
    if (mode == m) return name;
  return "?";
}

std::vector<Communicator> make_communicators(int gpus) {
  // common/launch.hpp's precedence: MPI launch (built with MPI), torchrun-style env, one process.
  const launch::Launch how = launch::select_launch();
  if (how != launch::Launch::single_process) {
    std::vector<Communicator> one;
    one.push_back(how == launch::Launch::mpi ? Communicator::init_from_mpi() : Communicator::init_from_env());
    return one;
  }
  const int n = gpus > 0 ? gpus : static_cast<int>(require_devices(1).size());
  return Communicator::init_local(n);
}

MeasureResult run_measure(const MeasureConfig& cfg, std::vector<Communicator>& comms) {
  if (cfg.steps < 1) throw_bad_usage("--steps", std::to_string(cfg.steps), "an integer >= 1");
  if (cfg.warmup < 0) throw_bad_usage("--warmup", std::to_string(cfg.warmup), "an integer >= 0");
  if (cfg.step.plan.world < 1) throw_bad_usage("--gpus", std::to_string(cfg.step.plan.world), "an integer >= 1");
  const opt::Inventory inv = opt::load_inventory(cfg.model);
  std::vector<opt::ParamSpec> params;
  for (const auto& e : inv.entries)
    for (std::int64_t i = 0; i < e.count; ++i) params.push_back({e.name + "." + std::to_string(i), e.rows, e.cols});
  const StreamMode streams = streams_from_env(cfg.streams);
  const bool autotune = autotune_from_env(cfg.ns_autotune && cfg.warmup >= 1);
  const auto devices = list_devices();
  NcclStepTransport tr(comms);
  if (autotune && cfg.warmup < 1) throw_bad_usage("--warmup", "0", ">= 1 with NS autotuning (the first step tunes)");
  const NsLayout layout = layout_from_env(cfg.ns_layout);
  GpuOptimizer gpu(cfg.step, params, tr, /*timing=*/true, cfg.max_in_flight, streams, NsTuning{autotune, layout});
  gpu.randomize_weights(cfg.seed);

  MeasureResult res;
  res.groups = gpu.groups();
  res.device_name = devices.at(static_cast<std::size_t>(comms.front().device())).name;
  res.rank = comms.front().rank();
  res.streams = streams;
  res.ns_autotune = autotune;
  res.ns_layout = layout;
  res.gpus = static_cast<int>(cfg.step.plan.world);
  // One process drives every GPU of its node; one process per GPU: the launcher says how many share a node.
  res.ranks_per_node = comms.size() > 1 ? res.gpus : launch::ranks_per_node(launch::process_env(), res.gpus);
  for (const auto& g : res.groups) {
    res.a2a_payload_bytes += g.a2a_bytes;
    res.norms_allgather_bytes += g.norms_bytes;
    res.ns_flops_per_rank += g.ns_flops;
  }
  std::map<std::string, std::vector<double>> kernel_samples;
  std::vector<std::vector<double>> ns_group_samples(res.groups.size());
  std::map<std::pair<std::string, std::int64_t>, std::vector<double>> coll_samples;
  std::map<std::pair<std::string, std::int64_t>, std::int64_t> coll_bytes;
  using clock = std::chrono::steady_clock;
  auto host_ms = [](clock::time_point a, clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  for (int t = 0; t < cfg.warmup + cfg.steps; ++t) {
    gpu.randomize_grads(cfg.seed);  // outside the timed region (the step's events bracket step() only)
    gpu.synchronize();              // the host span below is the step's issue alone
    const auto h0 = clock::now();
    gpu.step();
    const auto h1 = clock::now();
    gpu.synchronize();
    if (t < cfg.warmup) continue;
    res.host_ms.push_back(host_ms(h0, h1));
    const auto timing = gpu.last_timing();
    double worst = 0;
    for (const auto& rt : timing) worst = std::max(worst, rt.step_ms);
    res.step_ms.push_back(worst);
    for (const auto& [k, ms] : timing.front().kernel_ms) kernel_samples[k].push_back(ms);
    for (std::size_t g = 0; g < res.groups.size(); ++g) {
      const auto it = timing.front().phase_ms.find("ns_gemm/group" + std::to_string(g));
      ns_group_samples[g].push_back(it != timing.front().phase_ms.end() ? it->second : 0.0);
    }
    for (const auto& c : timing.front().collectives) {
      coll_samples[{c.name, c.group}].push_back(c.ms);
      coll_bytes[{c.name, c.group}] = c.bytes_sent;
    }
    for (const auto& s : gpu.last_stats()) {
      res.winner_rows += s.winner_rows;
      res.deferred_rows += s.deferred_rows;
    }
  }
  res.ns_layouts_used = gpu.ns_layouts();
  res.ns_group_flops = gpu.ns_executed_flops();
  for (const auto& v : ns_group_samples) res.ns_group_ms.push_back(median(v));
  res.median_step_ms = median(res.step_ms);
  res.median_host_ms = median(res.host_ms);
  if (cfg.cuda_graph) {
    // Capture after the warm-up (autotuning synchronizes, so it must be done), replay once untimed.
    res.eager_step_ms = res.median_step_ms;
    res.eager_host_ms = res.median_host_ms;
    gpu.capture();
    res.graph_nodes = gpu.graph_nodes();
    gpu.randomize_grads(cfg.seed);
    gpu.replay();
    gpu.synchronize();
    res.step_ms.clear();
    res.host_ms.clear();
    for (int t = 0; t < cfg.steps; ++t) {
      gpu.randomize_grads(cfg.seed);
      gpu.synchronize();
      const auto h0 = clock::now();
      gpu.replay();
      const auto h1 = clock::now();
      gpu.synchronize();
      res.host_ms.push_back(host_ms(h0, h1));
      res.step_ms.push_back(gpu.last_timing().front().step_ms);
    }
    res.median_step_ms = median(res.step_ms);
    res.median_host_ms = median(res.host_ms);
  }
  for (const auto& [k, v] : kernel_samples) res.kernel_ms[k] = median(v);
  for (const auto& [key, v] : coll_samples) res.collectives.push_back({key.first, key.second, coll_bytes[key], median(v)});
  std::sort(res.collectives.begin(), res.collectives.end(),
            [](const auto& a, const auto& b) { return a.group != b.group ? a.group < b.group : a.name < b.name; });
  return res;
}

nlohmann::json to_json(const MeasureConfig& c, const MeasureResult& r) {
  double gemm = 0, other = 0, a2a = 0;
  for (const auto& [k, ms] : r.kernel_ms) (k == "ns_gemm" ? gemm : other) += ms;
  nlohmann::json colls = nlohmann::json::array();
  for (const auto& x : r.collectives) {
    if (x.name.rfind("a2a", 0) == 0) a2a += x.median_ms;
    colls.push_back({{"name", x.name}, {"group", x.group}, {"bytes_sent", x.bytes_sent}, {"ms", x.median_ms},
                     {"GBps", static_cast<double>(x.bytes_sent) / (x.median_ms * 1e6)}});
  }
  nlohmann::json ns_layouts = nlohmann::json::array();  // the layout each group's NS ran with
  // Block rows are reported with their height ("blocks:640"), one block as "plain".
  for (std::size_t g = 0; g < r.ns_layouts_used.size() && g < r.groups.size(); ++g) {
    const NsInput in = ns_input(r.groups[g]);
    const NsLayout& l = r.ns_layouts_used[g];
    std::string layout = to_string(l);
    if (l.kind == SymmetricLayout::block_rows && l.rows >= std::min(in.rows, in.cols)) layout = "plain";
    else if (l.kind == SymmetricLayout::block_rows) layout.append(":").append(std::to_string(l.rows));
    std::string input = std::to_string(in.batch);
    input.append("x").append(std::to_string(in.rows)).append("x").append(std::to_string(in.cols));
    if (c.step.plan.ns == opt::NsKind::gram) layout = "plain-fp16";  // Gram NS: plain fp16 GEMMs
    nlohmann::json row{{"group", g}, {"ns_input", input}, {"layout", layout}};
    if (g < r.ns_group_ms.size()) row["ns_ms"] = r.ns_group_ms[g];
    if (g < r.ns_group_flops.size()) {
      row["ns_executed_flops"] = r.ns_group_flops[g];
      row["ns_nominal_flops"] = r.groups[g].ns_flops;
      if (g < r.ns_group_ms.size() && r.ns_group_ms[g] > 0)
        row["ns_executed_tflops"] = r.ns_group_flops[g] / (r.ns_group_ms[g] * 1e9);
    }
    ns_layouts.push_back(row);
  }
  auto metric = [](const char* m, double v, const char* u) {
    return nlohmann::json{{"metric", m}, {"value", v}, {"unit", u}};
  };
  double executed = 0;
  for (double f : r.ns_group_flops) executed += f;
  // hardware, gpus_per_node, nodes and ns make the stored configuration one that `calibrate --db`
  // and `validate --db` read (analysis/records/stored_runs.hpp), like a row of the measurement CSV.
  nlohmann::json out = {{"mode", "step"}, {"model", c.model}, {"world", c.step.plan.world}, {"device", r.device_name},
          {"hardware", r.device_name}, {"gpus_per_node", r.ranks_per_node},
          {"nodes", r.ranks_per_node > 0 ? c.step.plan.world / r.ranks_per_node : 1},
          {"ns", opt::to_string(c.step.plan.ns)},
          {"optimizer", opt::to_string(c.step.plan.optimizer)}, {"scope", opt::to_string(c.step.plan.scope)},
          {"fraction", c.step.plan.fraction},
          {"capacity_factor", opt::capacity_factor_json(c.step.plan.capacity_factor)},
          {"momentum_dtype", c.step.dtype == opt::Dtype::bfloat16 ? "bfloat16" : "float32"},
          {"steps", c.steps}, {"warmup", c.warmup}, {"seed", c.seed}, {"streams", to_string(r.streams)},
          {"ns_autotune", r.ns_autotune}, {"ns_layout", to_string(r.ns_layout)}, {"step_ms", r.step_ms}, {"kernels_ms", r.kernel_ms},
          {"collectives", colls}, {"ns_layouts", ns_layouts},
          {"metrics",
           {metric("opt_step_ms", r.median_step_ms, "ms"), metric("ns_gemm_ms", gemm, "ms"),
            metric("non_gemm_ms", other, "ms"), metric("a2a_ms", a2a, "ms"),
            metric("a2a_payload_MB", static_cast<double>(r.a2a_payload_bytes) / 1e6, "MB"),
            metric("a2a_effective_GBps", a2a > 0 ? static_cast<double>(r.a2a_payload_bytes) / (a2a * 1e6) : 0.0, "GB/s"),
            metric("ns_tflops", gemm > 0 ? r.ns_flops_per_rank / (gemm * 1e9) : 0.0, "TFLOP/s"),
            metric("deferred_rows", static_cast<double>(r.deferred_rows), "rows"),
            metric("winner_rows", static_cast<double>(r.winner_rows), "rows"),
            metric("opt_cpu_span_ms", r.median_host_ms, "ms")}}};
  // Only metrics of the measurement CSV go into "metrics" (what the store records and `calibrate
  // --db` reads, analysis/measured/measurements.cpp); the rest are results beside them.
  out["cuda_graph"] = c.cuda_graph;
  out["host_ms"] = r.host_ms;
  out["ns_executed"] = {{"flops", executed}, {"tflops", gemm > 0 ? executed / (gemm * 1e9) : 0.0}};
  if (c.cuda_graph)
    out["eager"] = {{"opt_step_ms", r.eager_step_ms}, {"opt_cpu_span_ms", r.eager_host_ms}, {"graph_nodes", r.graph_nodes}};
  return out;
}

}  // namespace dionsim::kernels
