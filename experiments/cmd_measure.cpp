// dionsim measure: the real optimizer step (or one collective, nccl-tests style) on this machine's
// GPUs, timed with CUDA events. Logic: kernels/measure.hpp, kernels/collective_bench.hpp; --db
// recording: experiments/record.hpp; how the ranks are started: common/launch.hpp. Builds without
// CUDA keep the options (so --help and usage errors behave the same) and exit 5.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "common/error.hpp"
#include "common/launch.hpp"
#include "common/parse.hpp"
#include "experiments/cli.hpp"
#include "experiments/record.hpp"
#include "optimizer/inventory.hpp"
#include "optimizer/plan.hpp"
#ifdef DIONSIM_HAVE_CUDA
#include "kernels/collective_bench.hpp"
#include "kernels/measure.hpp"
#endif

namespace dionsim::cli {

#ifdef DIONSIM_HAVE_CUDA
namespace {

int measure_collective(const Command& cmd, const std::string& op, const std::string& b, const std::string& e,
                       std::int64_t factor, std::vector<kernels::Communicator>& comms, int iters, int warmup) {
  kernels::CollectiveBenchConfig cfg;
  cfg.op = op == "alltoall" ? kernels::CollectiveOp::alltoall : kernels::CollectiveOp::allgather;
  cfg.min_bytes = static_cast<std::size_t>(parse_size_bytes(b, "-b"));
  cfg.max_bytes = static_cast<std::size_t>(parse_size_bytes(e, "-e"));
  cfg.factor = static_cast<int>(factor);
  cfg.iters = iters;
  cfg.warmup = warmup;
  const int n = comms.front().world();
  kernels::validate(cfg, n);
  const auto rows = kernels::run_collective_bench(cfg, comms);
  if (comms.front().rank() != 0) return 0;  // one process per GPU: rank 0 reports
  nlohmann::json out = {{"mode", "collective"}, {"op", op}, {"world", n}, {"type", "bfloat16"}, {"rows", nlohmann::json::array()}};
  if (!cmd.common().json)
    std::printf("# dionsim measure --collective %s  world %d  (GB = 1e9; busbw = algbw*(n-1)/n)\n%12s %12s %8s %6s %6s %10s %8s %8s %7s\n",
                op.c_str(), n, "size", "count", "type", "redop", "root", "time(us)", "algbw", "busbw", "#wrong");
  for (const auto& r : rows) {
    out["rows"].push_back({{"bytes", r.bytes}, {"count", r.count}, {"time_us", r.time_us}, {"algbw_GBps", r.algbw_GBps},
                           {"busbw_GBps", r.busbw_GBps}, {"wrong", r.wrong}});
    if (!cmd.common().json)
      std::printf("%12zu %12zu %8s %6s %6d %10.1f %8.2f %8.2f %7lld\n", r.bytes, r.count, "bf16", "none", -1, r.time_us,
                  r.algbw_GBps, r.busbw_GBps, r.wrong);
  }
  if (cmd.common().json) print_json(out);
  store_measure(cmd.common(), {{"mode", "collective"}, {"op", op}, {"world", n}, {"min_bytes", cfg.min_bytes}, {"max_bytes", cfg.max_bytes},
              {"factor", cfg.factor}, {"iters", cfg.iters}}, out);
  return 0;
}

}  // namespace
#endif

int run_measure(std::span<const std::string> args) {
  Command cmd("measure",
              "--model M --optimizer O --scope S --fraction F [--capacity-factor C] [--steps N] [--gpus W]\n"
              "       dionsim measure --collective alltoall|allgather -b SIZE -e SIZE -f FACTOR [--gpus W]\n"
              "       mpirun -np W dionsim measure ...   (or srun --mpi=pmix, or torchrun-style RANK/WORLD_SIZE/...)",
              "Runs the CUDA/NCCL Dion2/NorDion2 step on this machine's GPUs (one process drives them all, or one\n"
              "process per GPU under mpirun / srun --mpi=pmix or the torchrun-style environment; rank 0 reports) with\n"
              "seeded random gradients on FSDP row shards: warm-up, then N steps timed with CUDA events; prints the\n"
              "median step time, per-kernel-class and per-collective times, bytes and deferral counters. With\n"
              "--collective: nccl-tests-style rows for this fabric. Needs a CUDA build (exit 5 otherwise).");
  std::string model = "gpt-5120x8", optimizer = "dion2", scope = "global", capacity = "auto", dtype = "float32";
  std::string ns = "polar_express";
  bool cuda_graph = false;
  std::string collective, b = "1M", e = "256M";
  double fraction = 0.25;
  std::int64_t steps = 10, warmup = 3, gpus = 0, factor = 2, in_flight = 3;
  cmd.options().add_options()
      ("model", po::value(&model)->default_value(model), "seed-5120x8, gpt-<h>x<L>, gpt-1b, gpt-14b or inventory.json")
      ("optimizer", po::value(&optimizer)->default_value(optimizer), "dion2 | nordion2")
      ("scope", po::value(&scope)->default_value(scope), "local | global | global_capped")
      ("fraction", po::value(&fraction)->default_value(fraction), "selected fraction, in (0, 1]")
      ("capacity-factor", po::value(&capacity)->default_value(capacity), "global_capped c >= 1, or auto")
      ("momentum-dtype", po::value(&dtype)->default_value(dtype), "float32 | bfloat16 (= parameter dtype)")
      ("ns", po::value(&ns)->default_value(ns), "polar_express | newton_schulz5 | gram (Gram NS in fp16)")
      ("cuda-graph", po::bool_switch(&cuda_graph), "also capture the whole step in a CUDA graph after the timed eager "
                                                   "steps and time its replays (one process per GPU)")
      ("steps", po::value(&steps)->default_value(steps), "timed steps (median reported)")
      ("warmup", po::value(&warmup)->default_value(warmup), "untimed steps first")
      ("gpus", po::value(&gpus)->default_value(gpus), "GPUs = world size (0 = all visible); ignored under a launcher "
                                                      "(mpirun / srun --mpi, or RANK, WORLD_SIZE, LOCAL_RANK, "
                                                      "MASTER_ADDR, MASTER_PORT set)")
      ("in-flight", po::value(&in_flight)->default_value(in_flight), "megabatches in flight (spec §1.7: 3)")
      ("collective", po::value(&collective), "alltoall | allgather: measure one collective instead")
      (",b", po::value(&b)->default_value(b), "--collective: smallest size per rank (bytes, K/M/G)")
      (",e", po::value(&e)->default_value(e), "--collective: largest size per rank")
      (",f", po::value(&factor)->default_value(factor), "--collective: size multiplication factor");
  if (!cmd.parse(args)) return 0;
  // Validate everything before anything touches a device (same answers in CPU and CUDA builds).
  if (!collective.empty() && collective != "alltoall" && collective != "allgather")
    throw_bad_usage("--collective", collective, "alltoall or allgather");
  opt::PlanConfig plan;  // its world = the GPUs, known once the communicators exist
  plan.optimizer = opt::parse_optimizer(optimizer, "--optimizer");
  plan.scope = opt::parse_scope(scope, "--scope");
  [[maybe_unused]] const auto dtype_kind = opt::parse_dtype(dtype, "--momentum-dtype");  // used by CUDA builds
  plan.ns = opt::parse_ns(ns, "--ns");
  opt::check_fraction(fraction, "--fraction");
  plan.fraction = fraction;
  plan.capacity_factor = opt::parse_capacity_factor(capacity, "--capacity-factor");
  if (steps < 1) throw_bad_usage("--steps", std::to_string(steps), "an integer >= 1");
  if (warmup < 0) throw_bad_usage("--warmup", std::to_string(warmup), "an integer >= 0");
  if (gpus < 0) throw_bad_usage("--gpus", std::to_string(gpus), "an integer >= 0 (0 = all visible)");
  if (in_flight < 1) throw_bad_usage("--in-flight", std::to_string(in_flight), "an integer >= 1");
  if (steps > 100000) throw_bad_usage("--steps", std::to_string(steps), "an integer in [1, 100000]");
  // The model and the collective sizes are checked here too, so that a bad value is a usage error
  // (exit 2) on a machine without a GPU as on one with (before, 77 came first).
  if (collective.empty()) (void)opt::load_inventory(model);
  const std::int64_t b_bytes = parse_size_bytes(b, "-b"), e_bytes = parse_size_bytes(e, "-e");
  if (b_bytes < 1 || e_bytes < b_bytes) throw_bad_usage("-b/-e", b + ".." + e, "1 <= -b <= -e");
  if (factor < 2) throw_bad_usage("-f", std::to_string(factor), "an integer >= 2");
  // An MPI launch of a build without MPI is a usage error (exit 2) before anything else happens.
  const launch::Launch how = launch::select_launch();
#ifndef DIONSIM_HAVE_CUDA
  (void)plan;
  (void)how;
  throw DeviceError("measure: this dionsim was built without CUDA; reconfigure with -DDIONSIM_WITH_CUDA=ON "
                    "(cmake --preset cuda-release) where nvcc and NCCL are installed");
#else
  // Setup errors are agreed between ranks (every rank exits with the same code); after it, an error on
  // one rank of an MPI job aborts the job rather than leave the others waiting in a collective.
  auto comms = kernels::make_communicators(static_cast<int>(gpus));
  if (comms.front().rank() == 0)
    log(cmd.common(), std::string("launch: ") + std::string(launch::to_string(how)) + ", world " +
                          std::to_string(comms.front().world()));
  return launch::abort_job_on_error([&] {
    if (!collective.empty())
      return measure_collective(cmd, collective, b, e, factor, comms, static_cast<int>(steps * 2), static_cast<int>(warmup));
    kernels::MeasureConfig cfg;
    cfg.model = model;
    cfg.step.plan = plan;
    cfg.step.plan.world = comms.front().world();
    cfg.step.dtype = dtype_kind;
    cfg.cuda_graph = cuda_graph;
    cfg.step.ef = 0.95;  // Dion2 ef_decay and NorDion2 mu defaults (spec §1.1)
    cfg.steps = static_cast<int>(steps);
    cfg.warmup = static_cast<int>(warmup);
    cfg.seed = cmd.common().seed;
    cfg.max_in_flight = static_cast<int>(in_flight);
    log(cmd.common(), "measuring " + model + " " + optimizer + " " + scope + " on " + std::to_string(cfg.step.plan.world) + " GPU(s)");
    const auto res = kernels::run_measure(cfg, comms);
    if (res.rank != 0) return 0;  // one process per GPU: rank 0 reports and stores
    const auto out = kernels::to_json(cfg, res);
    nlohmann::json config = out;
    for (const char* k : {"step_ms", "host_ms", "kernels_ms", "collectives", "metrics", "device", "ns_layouts",
                          "ns_executed", "eager"})
      config.erase(k);
    store_measure(cmd.common(), config, out);
    if (cmd.common().json) {
      print_json(out);
      return 0;
    }
    std::printf("# dionsim measure  %s  world %lld  %s %s f=%g c=%s  momentum %s  ns %s%s  %s  (median of %d after %d warm-up)\n",
                model.c_str(), static_cast<long long>(cfg.step.plan.world), optimizer.c_str(), scope.c_str(), fraction,
                capacity.c_str(), dtype.c_str(), ns.c_str(), cuda_graph ? "  cuda-graph" : "", res.device_name.c_str(),
                cfg.steps, cfg.warmup);
    for (const auto& m : out["metrics"])
      std::printf("%-20s %12.3f %s\n", m["metric"].get<std::string>().c_str(), m["value"].get<double>(), m["unit"].get<std::string>().c_str());
    if (cuda_graph)
      std::printf("eager (before capture): opt_step_ms %.3f, opt_cpu_span_ms %.3f; graph of %zu nodes\n",
                  res.eager_step_ms, res.eager_host_ms, res.graph_nodes);
    std::printf("\n%-16s %10s\n", "kernel_class", "ms/step");
    for (const auto& [k, ms] : res.kernel_ms) std::printf("%-16s %10.3f\n", k.c_str(), ms);
    std::printf("\n%5s %-18s %-12s %10s %14s %10s\n", "group", "ns_input", "ns_layout", "ns_ms", "executed_FLOP",
                "TFLOP/s");
    for (const auto& l : out["ns_layouts"])
      std::printf("%5lld %-18s %-12s %10.3f %14.4g %10.1f\n", l["group"].get<long long>(),
                  l["ns_input"].get<std::string>().c_str(), l["layout"].get<std::string>().c_str(),
                  l.value("ns_ms", 0.0), l.value("ns_executed_flops", 0.0), l.value("ns_executed_tflops", 0.0));
    std::printf("\n%5s %-16s %14s %10s %10s\n", "group", "collective", "bytes_sent", "ms", "GB/s");
    for (const auto& c : out["collectives"])
      std::printf("%5lld %-16s %14lld %10.3f %10.1f\n", c["group"].get<long long>(), c["name"].get<std::string>().c_str(),
                  c["bytes_sent"].get<long long>(), c["ms"].get<double>(), c["GBps"].get<double>());
    return 0;
  });
#endif
}

}  // namespace dionsim::cli
