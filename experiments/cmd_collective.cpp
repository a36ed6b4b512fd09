// dionsim collective: one collective on a simulated fabric, nccl-tests style.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "analysis/calibration/collective_fit.hpp"
#include "analysis/calibration/published_evidence.hpp"
#include "analysis/calibration/published_intervals.hpp"
#include "common/error.hpp"
#include "common/files.hpp"
#include "common/parse.hpp"
#include "experiments/cli.hpp"
#include "experiments/record.hpp"
#include "sim/collective_model.hpp"
#include "sim/collective_table.hpp"
#include "sim/collectives.hpp"
#include "topologies/fabric_choice.hpp"

namespace dionsim::cli {
namespace {

sim::CollectiveOp parse_op(const std::string& s) {
  if (s == "alltoall") return sim::CollectiveOp::alltoall;
  if (s == "allgather") return sim::CollectiveOp::allgather;
  if (s == "reducescatter") return sim::CollectiveOp::reducescatter;
  if (s == "sendrecv") return sim::CollectiveOp::sendrecv;
  if (s == "allreduce") return sim::CollectiveOp::allreduce;
  throw_bad_usage("--op", s, "alltoall, allgather, reducescatter, allreduce or sendrecv");
}

template <typename T>
std::optional<T> get(const Command& cmd, const char* name) {
  return cmd.has(name) ? std::optional<T>(cmd.vm()[name].as<T>()) : std::nullopt;
}

// Finite and physically possible, before anything reaches the solver: a usage error naming the
// flag, not an internal error from the engine.
void check_range(const Command& cmd, const char* flag, double lo, double hi, const char* what) {
  if (!cmd.has(flag)) return;
  const double v = cmd.vm()[flag].as<double>();
  if (!(std::isfinite(v) && v >= lo && v <= hi)) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", v);
    throw_bad_usage(std::string("--") + flag, text, what);
  }
}

std::vector<std::int64_t> resolve_sizes(const Command& cmd) {
  const auto& vm = cmd.vm();
  if (cmd.has("bytes")) {
    if (cmd.has("minbytes") || cmd.has("maxbytes")) throw UsageError("collective: --bytes excludes -b/-e");
    return {parse_size_bytes(vm["bytes"].as<std::string>(), "--bytes")};
  }
  if (!cmd.has("minbytes") || !cmd.has("maxbytes")) throw UsageError("collective: give --bytes S or -b MIN -e MAX [-f FACTOR]");
  return sim::sweep_sizes(parse_size_bytes(vm["minbytes"].as<std::string>(), "--minbytes"),
                          parse_size_bytes(vm["maxbytes"].as<std::string>(), "--maxbytes"),
                          vm["stepfactor"].as<std::int64_t>());
}

// On a cluster outside the record: every published cluster held out by the others' errors
// (validate-collectives --intervals' model-form range, here over the whole record), as dionsim / measured.
std::string outside_record_line() {
  char line[240];
  std::snprintf(line, sizeof line,
                "# on a cluster outside the record (every published cluster, validate-collectives --intervals): 90 %% "
                "of rows %.2f-%.2f / %.2f-%.2f / %.2f-%.2f (latency / middle / bandwidth)\n",
                1.0 / analysis::kCollectiveRecordHigh[0], 1.0 / analysis::kCollectiveRecordLow[0],
                1.0 / analysis::kCollectiveRecordHigh[1], 1.0 / analysis::kCollectiveRecordLow[1],
                1.0 / analysis::kCollectiveRecordHigh[2], 1.0 / analysis::kCollectiveRecordLow[2]);
  return line;
}

// The published track record of the model on `preset` (analysis/calibration/published_evidence.hpp),
// as the lines under the table.
std::string evidence_footer(const std::string& preset, const std::optional<analysis::PresetEvidence>& e, bool calibrated) {
  if (!e) {
    return "# no published nccl-tests rows on " + preset +
           " (validate-collectives): the model is unvalidated on this fabric; treat its times as estimates\n" +
           outside_record_line();
  }
  const std::string whose = e->preset == preset                     ? "its"
                            : preset.find('@') != std::string::npos ? e->preset + "'s, the same racks',"
                                                                    : e->preset + "'s, the same fabric's,";
  std::string out = "# track record on " + preset + " (validate-collectives on " + whose +
                    " published nccl-tests rows, every shape and collective" +
                    (calibrated ? "; the uncalibrated model's" : "") + "), dionsim / measured time:\n";
  static const char* kGoal[3] = {"within x1.5", "within 25 %", "within 10 %"};
  for (int k = 0; k < 3; ++k) {
    const auto& r = e->regimes[static_cast<std::size_t>(k)];
    char line[200];
    if (r.rows == 0) {
      std::snprintf(line, sizeof line, "#   %-22s no rows\n", analysis::to_string(static_cast<analysis::SizeRegime>(k)));
    } else {
      std::snprintf(line, sizeof line, "#   %-22s %4d rows, %3.0f %% %s, median %.2f, 90 %% of rows %.2f-%.2f\n",
                    analysis::to_string(static_cast<analysis::SizeRegime>(k)), r.rows, 100.0 * r.within_goal / r.rows,
                    kGoal[k], r.median_ratio, r.ratio_low, r.ratio_high);
    }
    out += line;
  }
  return out + outside_record_line();
}

}  // namespace

int run_collective(std::span<const std::string> args) {
  Command cmd("collective",
              "--op OP --nodes N --gpus-per-node G (--fabric P | --topology F | --nvlink-GBps X --nic-GBps Y) "
              "(--bytes S | -b MIN -e MAX -f FACTOR)",
              "Simulates one collective on a fabric and prints an nccl-tests style table: size = bytes of each "
              "rank's buffer (all-to-all: sent in total; all-gather: gathered; reduce-scatter: reduced), "
              "time in us, algbw = size/time and busbw = algbw*(n-1)/n in GB/s (1e9).");
  std::string presets;
  for (const auto& n : topo::preset_names()) presets += (presets.empty() ? "" : ", ") + n;
  cmd.options().add_options()
      ("op", po::value<std::string>()->required(), "alltoall | allgather | reducescatter | allreduce | sendrecv")
      ("algo", po::value<std::string>()->default_value("auto"),
       "NCCL algorithm(s) allowed, as NCCL_ALGO: ring, tree, nvls, nvlstree, pat, a comma list, ^list, "
       "NCCL >= 2.24's per-function entries (\"ring;allreduce:tree\"), or auto")
      ("proto", po::value<std::string>()->default_value("auto"),
       "NCCL protocol(s) allowed, as NCCL_PROTO: ll, ll128, simple, lists and per-function entries as --algo, or auto")
      ("nccl-model", "also print NCCL's own tuning-model prediction (time, algorithm, protocol)")
      ("calibration", po::value<std::string>()->value_name("CALIB.json"),
       "apply the collective parameters of a `calibrate --nccl-tests` calibration to the fabric and the model")
      ("algorithm", po::value<std::string>(), "raw max-min DES of the messages instead of the collective model: direct | ring")
      ("nodes", po::value<std::int64_t>(), "number of nodes")
      ("ranks", po::value<std::int64_t>(), "number of ranks (instead of --nodes; a multiple of --gpus-per-node)")
      ("gpus-per-node", po::value<std::int64_t>()->required(), "GPUs per node (on one NVSwitch)")
      ("fabric", po::value<std::string>(),
       ("fabric preset: " + presets + "; an NVL72 preset takes @<GPUs per rack> (gb200-nvl72@64: 16 of 18 trays)").c_str())
      ("topology", po::value<std::string>(), "topology file (TOML, docs/simulator.md)")
      ("nvlink-GBps", po::value<double>(), "custom fabric: NVLink GB/s per GPU and direction")
      ("nic-GBps", po::value<double>(), "custom fabric: NIC GB/s per GPU and direction")
      ("oversubscription", po::value<double>(), "leaf oversubscription ratio R >= 1 (overrides the fabric's)")
      ("latency-us", po::value<double>(), "per-message latency, NVLink and network (overrides the fabric's; the model adds the network's to every inter-node hop)")
      ("bytes", po::value<std::string>(), "one size S (K/M/G suffixes, powers of 1024)")
      ("minbytes,b", po::value<std::string>(), "smallest size of a sweep")
      ("maxbytes,e", po::value<std::string>(), "largest size of a sweep")
      ("stepfactor,f", po::value<std::int64_t>()->default_value(2), "size multiplier of a sweep")
      ("src", po::value<std::int64_t>(),
       "sendrecv: price one message from this rank to --dst (default: nccl-tests' sendrecv, every rank r to r+1; "
       "with --algorithm: 0)")
      ("dst", po::value<std::int64_t>(), "sendrecv: the receiving rank of --src's message (with --algorithm: 1)")
      ("mode", po::value<std::string>()->default_value("fast"), "fast (symmetry where provable) | exact (one flow per message)")
      ("dump-topology", po::value<std::string>(), "write the fabric as GraphViz to this .dot file");
  cmd.offer_csv();
  if (!cmd.parse(args)) return 0;
  const auto& vm = cmd.vm();
  check_range(cmd, "nvlink-GBps", 1e-9, 1e5, "a bandwidth in (0, 1e5] GB/s");
  check_range(cmd, "nic-GBps", 1e-9, 1e5, "a bandwidth in (0, 1e5] GB/s");
  check_range(cmd, "latency-us", 0, 1e6, "a latency in [0, 1e6] us");
  check_range(cmd, "oversubscription", 1, 1e3, "a ratio in [1, 1000]");

  // Options -> config, everything validated before anything is simulated.
  const std::int64_t g = vm["gpus-per-node"].as<std::int64_t>();
  if (g < 1 || g > 1024) throw_bad_usage("--gpus-per-node", std::to_string(g), "an integer in [1, 1024]");
  if (cmd.has("nodes") == cmd.has("ranks")) throw UsageError("collective: give one of --nodes N or --ranks W");
  std::int64_t nodes = 0;
  if (cmd.has("ranks")) {
    const std::int64_t w = vm["ranks"].as<std::int64_t>();
    if (w < 1 || w % g != 0) throw_bad_usage("--ranks", std::to_string(w), "a positive multiple of --gpus-per-node (" + std::to_string(g) + ")");
    nodes = w / g;
  } else {
    nodes = vm["nodes"].as<std::int64_t>();
  }
  if (nodes < 1 || nodes * g > (1 << 20)) throw_bad_usage("--nodes", std::to_string(nodes), "an integer >= 1 (at most 2^20 ranks)");
  sim::CollectiveSpec spec;
  spec.op = parse_op(vm["op"].as<std::string>());
  // The collective model prices every op; --algorithm asks for the raw DES.
  const bool use_model = !cmd.has("algorithm");
  const sim::NcclChoice choice = sim::NcclChoice::parse(vm["algo"].as<std::string>(), vm["proto"].as<std::string>());
  if (choice.names_collnet()) {
    throw_bad_usage("--algo", vm["algo"].as<std::string>(),
                    "ring, tree, nvls, nvlstree or pat: CollNet (SHARP) is not modelled");
  }
  const bool with_nccl = cmd.has("nccl-model");
  if (!use_model && (with_nccl || !vm["algo"].defaulted() || !vm["proto"].defaulted())) {
    throw UsageError("collective: --algo, --proto and --nccl-model belong to the collective model; drop --algorithm");
  }
  const bool p2p = spec.op == sim::CollectiveOp::alltoall || spec.op == sim::CollectiveOp::sendrecv;
  if (p2p && (!vm["algo"].defaulted() || !vm["proto"].defaulted())) {
    // As NCCL: NCCL_ALGO / NCCL_PROTO choose among collective algorithms; p2p picks its protocol
    // per peer (docs/simulator.md). Priced as NCCL runs it, and said so.
    log(cmd.common(), "collective: --algo / --proto govern NCCL's collectives, not p2p (" +
                          std::string(sim::to_string(spec.op)) + "): NCCL ignores NCCL_ALGO / NCCL_PROTO there, and so does the model");
  }
  const std::string algorithm = cmd.has("algorithm") ? vm["algorithm"].as<std::string>()
                                : spec.op == sim::CollectiveOp::alltoall ? "direct" : "ring";
  if (algorithm != "direct" && algorithm != "ring") throw_bad_usage("--algorithm", algorithm, "direct or ring");
  spec.algorithm = algorithm == "ring" ? sim::Algorithm::ring : sim::Algorithm::direct;
  // One message (--src/--dst, both or neither) or, with the model and neither, nccl-tests' sendrecv.
  if (cmd.has("src") != cmd.has("dst")) throw UsageError("collective: --src and --dst go together");
  if (cmd.has("src") && spec.op != sim::CollectiveOp::sendrecv)
    throw_bad_usage("--src", std::to_string(vm["src"].as<std::int64_t>()), "--src/--dst with --op sendrecv only");
  const bool one_message = cmd.has("src");
  const auto rank_arg = [&](const char* flag) {
    const std::int64_t r = vm[flag].as<std::int64_t>();
    const std::int64_t w = nodes * g;
    if (r < 0 || r >= w) throw_bad_usage(std::string("--") + flag, std::to_string(r), "a rank in [0, " + std::to_string(w - 1) + "]");
    return static_cast<int>(r);
  };
  // Otherwise rank 0 to the next (itself on one rank): the raw DES's message, nccl-tests' first pair.
  const auto first_pair = sim::nccl_tests_sendrecv_pairs(static_cast<int>(nodes * g), 1).front();
  spec.src = one_message ? rank_arg("src") : first_pair.first;
  spec.dst = one_message ? rank_arg("dst") : first_pair.second;
  const std::string mode_name = vm["mode"].as<std::string>();
  if (mode_name != "fast" && mode_name != "exact") throw_bad_usage("--mode", mode_name, "fast or exact");
  const auto mode = mode_name == "fast" ? sim::Mode::fast : sim::Mode::exact;
  topo::FabricSpec fabric = topo::resolve_fabric(
      {get<std::string>(cmd, "fabric"), get<std::string>(cmd, "topology"), get<double>(cmd, "nvlink-GBps"),
       get<double>(cmd, "nic-GBps"), get<double>(cmd, "oversubscription"), get<double>(cmd, "latency-us")},
      static_cast<int>(g));
  sim::ModelOptions model_options;
  if (cmd.has("calibration")) {
    const std::string path = vm["calibration"].as<std::string>();
    if (analysis::apply_collective_calibration(analysis::read_calibration(path), fabric, model_options, path) == 0)
      throw_bad_input(path, "parameters", "(none of the collective model's)", "a `dionsim calibrate --nccl-tests` calibration");
  }
  const std::vector<std::int64_t> sizes = resolve_sizes(cmd);
  const topo::Topology topology(fabric, static_cast<int>(nodes), static_cast<int>(g));
  for (const auto s : sizes) {
    spec.bytes = s;
    sim::validate_spec(spec, topology);
  }
  // The exact path holds one flow per message (~400 B each): refuse what would not fit.
  // The fast path (flow classes, any fabric) takes direct collectives: the model's all-to-all
  // and --algorithm direct.
  const bool fast_ok = mode == sim::Mode::fast && (algorithm == "direct" || use_model);
  const double messages = static_cast<double>(topology.ranks()) * (topology.ranks() - 1);
  if ((!use_model || spec.op == sim::CollectiveOp::alltoall) && spec.op != sim::CollectiveOp::sendrecv && !fast_ok &&
      messages > 3.4e7) {
    throw_bad_usage("--mode", mode_name, "a shape the exact per-flow path can hold (at most ~5800 ranks); --mode fast "
                                         "takes any size with --algorithm direct or the collective model");
  }
  if (cmd.has("dump-topology")) {
    const std::string path = vm["dump-topology"].as<std::string>();
    require_output_file(path, "--dump-topology");
    write_file_atomically(path, [&topology](std::ostream& dot) { topology.write_dot(dot); });
  }

  std::optional<sim::CollectiveModel> model;
  if (use_model) model.emplace(fabric, static_cast<int>(nodes), static_cast<int>(g), model_options);
  nlohmann::json config = sim::collective_config_json(spec, mode_name, nodes, g, topology, fabric);
  if (use_model) config.update({{"algorithm", "model"}, {"algo", vm["algo"].as<std::string>()}, {"proto", vm["proto"].as<std::string>()}});
  if (spec.op == sim::CollectiveOp::sendrecv) {
    if (one_message || !use_model) config.update({{"src", spec.src}, {"dst", spec.dst}});
    else config["pattern"] = "nccl-tests sendrecv: every rank r to r+1";
  }
  log(cmd.common(), "collective: " + config.dump());
  // --db: one run per size, so an interrupted sweep resumes at the first size not stored.
  Recorder recorder(cmd.common(), "collective");
  nlohmann::json rows = nlohmann::json::array();
  if (!cmd.common().machine()) {
    std::cout << sim::collective_table_header(spec, mode_name, nodes, g, topology, fabric, use_model, with_nccl);
  }
  for (const std::int64_t s : sizes) {
    spec.bytes = s;
    nlohmann::json run_config = config;
    run_config["size_bytes"] = s;
    if (recorder.skip(run_config)) continue;
    std::optional<sim::CollectiveCost> cost;
    sim::CollectiveResult r;
    if (use_model) {
      cost = spec.op == sim::CollectiveOp::sendrecv && one_message ? model->sendrecv(s, spec.src, spec.dst, mode)
                                                                    : model->cost(spec.op, s, choice, mode);
      r.time = sim::SimTime::ps(std::llround(cost->time_us * 1e6));
      const auto w = static_cast<std::uint64_t>(topology.ranks());
      r.messages = spec.op == sim::CollectiveOp::alltoall   ? w * (w - 1)
                   : spec.op == sim::CollectiveOp::sendrecv ? (one_message ? 1 : w)
                                                            : 0;
    } else {
      r = sim::simulate_collective(topology, spec, mode);
    }
    const sim::CollectiveRow row = sim::collective_row(spec, r, topology.ranks());
    record_collective(recorder, run_config, spec, row, r, topology.ranks(), nodes);
    if (cmd.common().machine())
      rows.push_back(sim::collective_json_row(config, row, r, cost ? &*cost : nullptr));
    else
      std::cout << sim::collective_table_row(spec.op, row, cost ? &*cost : nullptr, with_nccl);
  }
  // The track record of the nominal preset the rows were priced on (not of a topology file or of a
  // preset whose bandwidths or latency the command line changed: nothing was published for those).
  const bool nominal_preset = cmd.has("fabric") && !cmd.has("nvlink-GBps") && !cmd.has("nic-GBps") &&
                              !cmd.has("latency-us") && !cmd.has("oversubscription");
  if (use_model && nominal_preset) {
    const std::string preset = vm["fabric"].as<std::string>();
    const auto evidence = analysis::published_evidence_of(preset);
    if (cmd.common().machine()) {
      for (auto& row : rows) {
        const auto regime = analysis::regime_of(row["size_bytes"].get<std::int64_t>());
        if (!evidence || evidence->regimes[static_cast<std::size_t>(regime)].rows == 0) continue;
        const auto& r = evidence->regimes[static_cast<std::size_t>(regime)];
        row.update({{"published_rows", r.rows},
                    {"published_within_goal_pct", 100.0 * r.within_goal / r.rows},
                    {"published_median_ratio", r.median_ratio},
                    {"published_ratio_low", r.ratio_low},
                    {"published_ratio_high", r.ratio_high}});
      }
    } else {
      std::cout << evidence_footer(preset, evidence, cmd.has("calibration"));
    }
  }
  if (cmd.common().machine()) print_result(cmd.common(), rows);
  return 0;
}

}  // namespace dionsim::cli
