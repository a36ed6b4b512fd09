#include "analysis/calibration/published_collectives.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <regex>

#include "analysis/calibration/collective_fit.hpp"
#include "common/error.hpp"
#include "common/parse.hpp"
#include "sim/collective_model.hpp"
#include "sim/step_collectives.hpp"
#include "topologies/topology.hpp"

namespace dionsim::analysis {

using namespace dionsim::sim;  // the collective model and its fabric

namespace {

bool contains(const std::string& text, const char* needle) { return lower(text).find(lower(needle)) != std::string::npos; }

// NEEDLE at the start of a word of TEXT, any case ("EFAv2", "RoCE:"; not the "efa" in "default").
bool starts_word(const std::string& text, const char* needle) {
  const std::string t = lower(text), n = lower(needle);
  for (std::size_t at = t.find(n); at != std::string::npos; at = t.find(n, at + 1))
    if (at == 0 || !std::isalnum(static_cast<unsigned char>(t[at - 1]))) return true;
  return false;
}

// The value of KEY= in an env text ("A=1 B=2; -n 20", "export A='x y'", "A=1, B=2"), empty when
// absent: a whole word (not the tail of XKEY= or MY_KEY=), the last assignment as a shell takes
// it, a quoted value without its quotes, an unquoted one up to a blank or ';' less a trailing
// ',' or ')' (the prose around it: "A=1, HPC-X").
std::string env_value(const std::string& env, const std::string& key) {
  std::string value;
  const std::string assign = key + "=";
  for (std::size_t at = env.find(assign); at != std::string::npos; at = env.find(assign, at + 1)) {
    if (at > 0 && (std::isalnum(static_cast<unsigned char>(env[at - 1])) || env[at - 1] == '_')) continue;
    const auto from = at + assign.size();
    if (from < env.size() && (env[from] == '"' || env[from] == '\'')) {
      const auto close = env.find(env[from], from + 1);
      value = env.substr(from + 1, close == std::string::npos ? std::string::npos : close - from - 1);
      continue;
    }
    const auto to = env.find_first_of(" ;\t", from);
    value = env.substr(from, to == std::string::npos ? std::string::npos : to - from);
    while (!value.empty() && (value.back() == ',' || value.back() == ')')) value.pop_back();
  }
  return value;
}

std::string where_of(const PublishedRow& row) {
  return (row.file.empty() ? std::string("measurements.csv") : row.file) + ":" + std::to_string(row.line);
}

}  // namespace

sim::NcclEnv nccl_env_of(const PublishedRow& row) {
  return sim::NcclEnv::read([&](const std::string& key) { return env_value(row.env, key); }, where_of(row));
}

const std::vector<ClusterPreset>& cluster_presets() {
  // The issue's table ("today's clusters"), AWS's other EFA instances and HGX B300 (ConnectX-8 at
  // 800 Gb/s, its reference NIC). The first match wins, so instance types come before GPU names,
  // NVL72 racks before B200/B300, and EFA or RoCE in the NIC column before the InfiniBand default
  // (an EFA cluster named by its GPU only takes that GPU's EFA instance: H200 the current p5en).
  static const std::vector<ClusterPreset> table = {
      // GH200 nodes join their GPUs without NVSwitch (Grace Hopper superchips, NVLink in pairs or
      // quads): no preset models them, and the "H200" below must not take them.
      {"GH200", "", ""},
      {"p5en", "", "p5en-efa"},          {"p5e.", "", "p5e-efa"},          {"p5.48xlarge", "", "p5-efa"},
      {"p4d", "", "p4d-efa"},            {"p6-b200", "", "p6-b200-efa"},   {"p6-b300", "", "p6-b300-efa"},
      {"p6e-gb200", "", "gb200-nvl72-efa"}, {"GB300", "", "gb300-nvl72"},   {"GB200", "EFA", "gb200-nvl72-efa"},
      {"GB200", "", "gb200-nvl72"},      {"B300", "EFA", "p6-b300-efa"},
      {"B300", "", "b300-xdr800"},       {"B200", "EFA", "p6-b200-efa"},   {"B200", "RoCE", "b200-roce400"},
      {"B200", "", "b200-ndr400"},       {"H200", "EFA", "p5en-efa"},      {"H200", "RoCE", "h200-roce400"},
      {"H200", "", "h200-ndr400"},       {"H100", "EFA", "p5-efa"},        {"H100", "RoCE", "h100-roce400"},
      {"H100", "", "h100-ndr400"},       {"A100", "EFA", "p4d-efa"},       {"A100", "RoCE", "a100-roce100"},
      {"A100", "", "a100-hdr200"},
      // China's export variants: H800 and A800 are H100 and A100 with 8 NVLinks (400 GB/s); H20
      // keeps H100's 18 (900 GB/s). After H200, which contains "H20".
      {"H800", "RoCE", "h800-roce400"},  {"H800", "", "h800-ndr400"},    {"A800", "", "a800-hdr200"},
      {"H20", "RoCE", "h100-roce400"},   {"H20", "", "h100-ndr400"},
  };
  return table;
}

std::optional<std::string> preset_for(const PublishedRow& row) {
  if (!row.preset.empty()) return row.preset;  // the user's own logs on the fabric they named
  for (const auto& e : cluster_presets()) {
    if (contains(row.gpu, e.gpu) && (e.nic[0] == '\0' || starts_word(row.nic, e.nic)))
      return e.preset[0] == '\0' ? std::nullopt : std::optional<std::string>(e.preset);
  }
  return std::nullopt;
}

std::optional<int> nvlink_domains_of(const PublishedRow& row) {
  const auto preset = preset_for(row);
  if (!preset || row.gpus_per_node < 1) return std::nullopt;
  const int nodes = std::max(1, row.world / row.gpus_per_node);
  // The domains only: the forced algorithm (CollNet on rows that are out of scope) leaves them be.
  const sim::NcclEnv env = sim::NcclEnv::read(
      [&](const std::string& key) { return key == "NCCL_ALGO" || key == "NCCL_PROTO" ? std::string{} : env_value(row.env, key); },
      where_of(row));
  return sim::comm_shape(env.applied(topo::preset(*preset, "nvlink_domains_of")), nodes, row.gpus_per_node).nodes;
}

std::optional<double> stated_nic_GBps_per_gpu(const std::string& nic, int gpus_per_node) {
  const std::string text = lower(nic);
  if (gpus_per_node < 1 || text.find("not stated") != std::string::npos) return std::nullopt;
  static const std::regex ports(R"((\d+)\s*x\s*(?:efa\s*v?\d*\s+)?(\d+(?:\.\d+)?)\s*gb/s\s+per\s+(?:node|tray|instance))");
  static const std::regex total(R"((\d+(?:\.\d+)?)\s*tb/s\s+per\s+(?:node|tray|instance))");
  std::smatch m;
  double gbit = 0;
  if (std::regex_search(text, m, ports)) {
    gbit = std::stod(m[1].str()) * std::stod(m[2].str());
  } else if (std::regex_search(text, m, total)) {
    gbit = std::stod(m[1].str()) * 1000.0;
  } else {
    return std::nullopt;
  }
  if (!(gbit > 0 && std::isfinite(gbit))) return std::nullopt;
  return gbit / 8.0 / gpus_per_node;
}

std::string cluster_of(const PublishedRow& row) { return row.source.substr(0, row.source.find(' ')) + "|" + row.gpu; }

SizeRegime regime_of(std::int64_t size_bytes) {
  switch (sim::size_regime_index(size_bytes)) {  // the collective model's own thresholds
    case 0: return SizeRegime::latency;
    case 2: return SizeRegime::bandwidth;
    default: return SizeRegime::middle;
  }
}

const char* to_string(SizeRegime r) {
  switch (r) {
    case SizeRegime::latency: return "latency (<= 64 KiB)";
    case SizeRegime::middle: return "middle";
    case SizeRegime::bandwidth: return "bandwidth (>= 64 MiB)";
  }
  return "?";
}

bool within_goal(SizeRegime r, double ratio) {
  if (!(ratio > 0)) return false;
  switch (r) {
    case SizeRegime::latency: return ratio <= 1.5 && ratio >= 1 / 1.5;
    case SizeRegime::middle: return std::abs(ratio - 1) <= 0.25;
    case SizeRegime::bandwidth: return std::abs(ratio - 1) <= 0.10;
  }
  return false;
}

namespace {


bool is_modelled(const PublishedRow& row) {
  return row.collective == "allgather" || row.collective == "reducescatter" || row.collective == "allreduce" ||
         row.collective == "alltoall" || row.collective == "sendrecv";
}

CollectiveOp op_of(const PublishedRow& row) {
  if (row.collective == "allgather") return CollectiveOp::allgather;
  if (row.collective == "reducescatter") return CollectiveOp::reducescatter;
  if (row.collective == "allreduce") return CollectiveOp::allreduce;
  if (row.collective == "alltoall") return CollectiveOp::alltoall;
  if (row.collective == "sendrecv") return CollectiveOp::sendrecv;
  throw std::logic_error("op_of: '" + row.collective + "' is no collective the model prices");
}


// nccl-tests' sendrecv (rank r to r + 1) as the raw DES of one message per pair prices it, before
// the collective model priced send/recv: its slowest pair, one inside an NVLink domain of
// `domain` ranks and one across domains.
double raw_sendrecv_us(const topo::FabricSpec& spec, int nodes, int gpus_per_node, int domain, std::int64_t bytes) {
  const auto topology = topo::shared_topology(spec, nodes, gpus_per_node);
  const int w = topology->ranks();
  if (w < 2 || bytes <= 0) return 0;
  CollectiveSpec message;
  message.op = CollectiveOp::sendrecv;
  message.bytes = bytes;
  message.pxn = true;
  double slowest = 0;
  for (const auto& [src, dst] : sim::nccl_tests_sendrecv_pairs(w, domain)) {
    message.src = src;
    message.dst = dst;
    slowest = std::max(slowest, simulate_collective(*topology, message, Mode::fast).time.to_us());
  }
  return slowest;
}

}  // namespace

topo::FabricSpec row_fabric(const RowPrediction& p) {
  topo::FabricSpec spec = topo::preset(p.preset, where_of(*p.row) + ": preset");
  // A NIC the source states is the cluster's (the issue's rule; unstated: the preset's). Only
  // its bandwidth: the transport stays the preset's (NVL72 racks have no RoCE preset).
  if (p.stated_nic_GBps) spec.nic_GBps = *p.stated_nic_GBps;
  return nccl_env_of(*p.row).applied(std::move(spec));
}

CollectiveSample row_sample(const RowPrediction& p) {
  const PublishedRow& row = *p.row;
  CollectiveSample s;
  s.op = op_of(row);
  s.gpus_per_node = row.gpus_per_node;
  s.nodes = row.world / row.gpus_per_node;  // the ratio-checked rank count
  s.bytes = row.size_bytes;
  s.time_us = row.time_us;
  s.nccl = nccl_env_of(row);
  s.where = where_of(row);
  return s;
}

std::vector<RowPrediction> predict_published(const std::vector<PublishedRow>& rows, const Calibration* calibration,
                                             const ModelPerturbation* perturbation) {
  std::vector<RowPrediction> out;
  std::map<std::string, std::unique_ptr<CollectiveModel>> models;  // per preset and shape
  for (const auto& row : rows) {
    RowPrediction p;
    p.row = &row;
    const auto preset = preset_for(row);
    if (!preset) {
      // A cluster no preset describes is reported, not guessed and not fatal to the other rows.
      p.skipped = "no fabric preset for GPU '" + row.gpu + "' (docs/simulator.md: the cluster -> preset table)";
      out.push_back(std::move(p));
      continue;
    }
    p.preset = *preset;
    if (!is_modelled(row)) {
      p.skipped = "not modelled: " + row.collective +
                  " (dionsim prices all-gather, reduce-scatter, all-reduce, all-to-all and send/recv)";
      out.push_back(std::move(p));
      continue;
    }
    // CollNet/SHARP rows are out of scope (issue 16): those whose NCCL_ALGO names CollNet for the
    // row's collective (any, for an all-to-all) or that set NCCL_COLLNET_ENABLE=1, and those whose
    // source shows SHARP at work (its log's SHARP trees: NCCL ran CollNet without an env forcing
    // it, so the measured time is of an algorithm the model does not price).
    const sim::NcclEnv nccl = nccl_env_of(row);
    const CollectiveOp op = op_of(row);
    if (sim::names_collnet(nccl.forced, op) || env_value(row.env, "NCCL_COLLNET_ENABLE") == "1") {
      p.skipped = "CollNet/SHARP (out of scope)";
      out.push_back(std::move(p));
      continue;
    }
    if (contains(row.nic, "SHARP active") || contains(row.notes, "SHARP in use")) {
      p.skipped = "CollNet/SHARP (out of scope): the source shows SHARP in use";
      out.push_back(std::move(p));
      continue;
    }
    if (row.world % row.gpus_per_node != 0) {
      // Ranks spread unevenly over the nodes (12 ranks on nodes of 8 GPUs): a real run, but one
      // whose NCCL graphs the model has no shape for. Reported, not fatal to the other rows.
      p.skipped = "uneven ranks per node: world " + std::to_string(row.world) + " is no multiple of " +
                  std::to_string(row.gpus_per_node) + " GPUs per node (not modelled)";
      out.push_back(std::move(p));
      continue;
    }
    const int nodes = row.world / row.gpus_per_node;  // the ratio-checked rank count
    p.stated_nic_GBps = stated_nic_GBps_per_gpu(row.nic, row.gpus_per_node);
    topo::FabricSpec spec = row_fabric(p);  // with the env applied
    sim::ModelOptions options;
    nccl.apply(options);
    if (calibration) apply_collective_calibration(*calibration, spec, options, calibration->name);
    if (perturbation) {
      spec.nic_efficiency = std::clamp(spec.nic_efficiency * perturbation->nic_efficiency_factor, 1e-6, 1.0);
      options.nvlink_scale = std::min(options.nvlink_scale * perturbation->nvlink_scale_factor, 1.0 / nvlink_fraction(spec));
      options.net_hop_extra_us = std::clamp(options.net_hop_extra_us + perturbation->net_hop_extra_us, -2.5, 1e6);
    }
    // One model per preset, shape, stated NIC and NCCL environment (every field a row can change).
    const std::string key = p.preset + "/" + std::to_string(nodes) + "x" + std::to_string(row.gpus_per_node) + "/" +
                            std::to_string(spec.nic_GBps) + nccl.key();
    auto& model = models[key];
    if (!model) model = std::make_unique<CollectiveModel>(spec, nodes, row.gpus_per_node, options);
    p.nvlink_domains = model->shape().nodes;
    // An env whose NCCL_ALGO / NCCL_PROTO leave NCCL nothing it enables here (NVLS across NVLink
    // domains runs only with CollNet; a tree all-gather never): NCCL refuses such a call, or ran
    // one the model does not price. Reported, not fatal to the other rows.
    const bool p2p = op == CollectiveOp::alltoall || op == CollectiveOp::sendrecv;  // NCCL_ALGO governs no p2p
    if (!p2p && model->ranks() > 1 && row.size_bytes > 0 &&
        !model->nccl().choose(sim::to_nccl(op), row.size_bytes, nccl.forced)) {
      p.skipped = "its env's NCCL_ALGO / NCCL_PROTO ('" + env_value(row.env, "NCCL_ALGO") + "' / '" +
                  env_value(row.env, "NCCL_PROTO") + "') leave no algorithm NCCL runs without CollNet for " +
                  row.collective + " on " + std::to_string(model->shape().nodes) + " x " +
                  std::to_string(model->shape().ranks_per_node) + " ranks";
      out.push_back(std::move(p));
      continue;
    }
    const CollectiveCost c = model->cost(op, row.size_bytes, nccl.forced, Mode::fast);
    p.algorithm = c.algorithm;
    p.protocol = c.protocol;
    p.chosen_by = c.chosen_by;
    p.dionsim_us = c.time_us;
    if (c.nccl) {
      p.baseline = "nccl";
      p.baseline_us = c.nccl->time_us;
      p.nccl_algorithm = to_string(c.nccl->algo);
      p.nccl_protocol = to_string(c.nccl->proto);
    } else if (op == CollectiveOp::sendrecv) {
      // Send/recv: the raw DES `collective --algorithm` prices a message with (the fabric's own
      // per-message latency and efficiency), for the pattern's slowest pair.
      p.baseline = "closed-form";
      p.baseline_us = raw_sendrecv_us(spec, nodes, row.gpus_per_node, model->shape().ranks_per_node, row.size_bytes);
    } else {
      // All-to-all: the closed form whatif used before this model (max(intra, inter) + latency).
      p.baseline = "closed-form";
      const SymmetricFabricTimer old(step_fabric(spec, nodes, row.gpus_per_node));
      const std::int64_t per_peer = row.size_bytes / row.world;
      p.baseline_us = static_cast<double>(old.time_ns({StepCollective::all_to_all, row.size_bytes, per_peer})) / 1e3;
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<RegimeSummary> summarize(const std::vector<RowPrediction>& predictions) {
  std::vector<RegimeSummary> out;
  for (const auto regime : {SizeRegime::latency, SizeRegime::middle, SizeRegime::bandwidth}) {
    RegimeSummary s;
    s.regime = regime;
    std::vector<double> dion, base;
    for (const auto& p : predictions) {
      if (!p.skipped.empty() || regime_of(p.row->size_bytes) != regime) continue;
      ++s.rows;
      const double rd = p.dionsim_us / p.row->time_us, rb = p.baseline_us / p.row->time_us;
      s.dionsim_within += within_goal(regime, rd);
      s.baseline_within += within_goal(regime, rb);
      dion.push_back(std::abs(rd - 1));
      base.push_back(std::abs(rb - 1));
    }
    const auto median = [](std::vector<double> v) {
      if (v.empty()) return 0.0;
      std::sort(v.begin(), v.end());
      const std::size_t m = v.size() / 2;
      return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
    };
    s.dionsim_median_abs_err = median(dion);
    s.baseline_median_abs_err = median(base);
    out.push_back(s);
  }
  return out;
}

namespace {
template <class Key>
std::map<std::string, std::vector<RegimeSummary>> summarize_grouped(const std::vector<RowPrediction>& predictions,
                                                                    Key key) {
  std::map<std::string, std::vector<RowPrediction>> by;
  for (const auto& p : predictions) by[key(p)].push_back(p);
  std::map<std::string, std::vector<RegimeSummary>> out;
  for (const auto& [group, rows] : by) {
    for (const auto& s : summarize(rows))
      if (s.rows > 0) out[group].push_back(s);
  }
  return out;
}
}  // namespace

std::map<std::string, std::vector<RegimeSummary>> summarize_by_preset(const std::vector<RowPrediction>& predictions) {
  return summarize_grouped(predictions, [](const RowPrediction& p) { return p.preset; });
}

std::map<std::string, std::vector<RegimeSummary>> summarize_by_collective(const std::vector<RowPrediction>& predictions) {
  return summarize_grouped(predictions, [](const RowPrediction& p) { return p.row->collective; });
}

}  // namespace dionsim::analysis
