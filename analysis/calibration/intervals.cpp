#include "analysis/calibration/intervals.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <nlohmann/json.hpp>
#include <tuple>
#include <type_traits>

#include "analysis/calibration/collective_fit.hpp"
#include "analysis/calibration/parameters.hpp"
#include "analysis/calibration/published_collectives.hpp"
#include "common/parse.hpp"
#include "common/error.hpp"
#include "sim/whatif_metrics.hpp"

namespace dionsim::analysis {

using nlohmann::json;

namespace {

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// A metric without leave-one-out cells of its own takes the error of the measured metric nearest
// in kind (docs/calibration.md, "Intervals"); one whose stand-in is missing too, the largest.
const std::map<std::string, std::string>& model_error_stand_ins() {
  static const std::map<std::string, std::string> m = {
      {"fwd_bwd_ms", "step_wall_ms"},          {"fwd_bwd_compute_ms", "step_wall_ms"},
      {"mfu_pct", "step_wall_ms"},             {"opt_critical_path_ms", "opt_wall_ms"},
      {"opt_comm_window_ms", "opt_wall_ms"},   {"rank_wait_ms", "a2a_ms"},
      {"norms_allgather_ms", "a2a_ms"},        {"opt_exposed_comm_ms", "a2a_ms"},
      {"exposed_comm_ms", "a2a_ms"},           {"fsdp_comm_ms", "a2a_ms"},
      {"fsdp_exposed_ms", "a2a_ms"},           {"replica_reduce_ms", "a2a_ms"},
      {"opt_gpu_idle_comm_window_pct", "opt_gpu_idle_pct"},
  };
  return m;
}

double error_in(const std::map<std::string, double>& errors, const std::string& metric) {
  if (auto it = errors.find(metric); it != errors.end()) return it->second;
  if (auto s = model_error_stand_ins().find(metric); s != model_error_stand_ins().end()) {
    if (auto it = errors.find(s->second); it != errors.end()) return it->second;
  }
  double largest = 0;
  for (const auto& [name, e] : errors) largest = std::max(largest, e);
  return largest;
}

// (b) of `metric` at `nodes`: the leave-one-out's; beyond the calibration's node counts no
// smaller than what its own node-count extrapolation showed (when it has one: runs of two node
// counts at least). Without one there is no evidence of the model's node-count error other than
// the link's, which the inter-node prior and the node-scaling term carry through the model; a
// blanket inflation (e.g. every metric at the largest time metric's error) was tried and made
// scope differences of the step ±270 ms on the seed — independent errors on two step walls
// that share their whole forward/backward (docs/calibration.md).
double model_error_of(const Uncertainty& u, const std::string& metric, int nodes) {
  const double e = error_in(u.model_error, metric);
  if (nodes <= u.calibrated_nodes || u.beyond_model_error.empty()) return e;
  return std::max(e, error_in(u.beyond_model_error, metric));
}

// Sets the step part of a calibration on a configuration unconditionally (apply_step_calibration
// keeps what the command line set; here the caller has removed those parameters already).
void set_step(const sim::StepCalibration& s, sim::WhatifConfig& c, const std::set<std::string>& fixed) {
  if (s.fwd_bwd_ms && !c.mfu && !fixed.count("fwd_bwd_ms")) c.fwd_bwd_ms = s.fwd_bwd_ms;
  if (s.nic_efficiency) c.fabric.nic_efficiency = *s.nic_efficiency;
  if (s.alltoall_intra_efficiency) c.alltoall_intra_efficiency = *s.alltoall_intra_efficiency;
  if (s.alltoall_inter_efficiency) c.alltoall_inter_efficiency = *s.alltoall_inter_efficiency;
  if (s.alltoall_latency_us) c.alltoall_latency_us = *s.alltoall_latency_us;
  if (s.collective_call_overhead_us) c.collective_options.call_overhead_us = *s.collective_call_overhead_us;
  if (s.collective_net_hop_extra_us) c.collective_options.net_hop_extra_us = *s.collective_net_hop_extra_us;
  if (s.collective_nvlink_scale) c.collective_options.nvlink_scale = *s.collective_nvlink_scale;
  if (s.collective_p2p_channel_GBps) c.collective_options.p2p_channel_GBps = *s.collective_p2p_channel_GBps;
  if (s.rank_skew_ms && !fixed.count("rank_skew_ms")) c.rank_skew_ms = s.rank_skew_ms;
  if (s.collective_hbm_slowdown && !fixed.count("collective_hbm_slowdown"))
    c.collective_hbm_slowdown = s.collective_hbm_slowdown;
  // host_ahead stays as the configuration has it: as_fitted (step_fit.hpp) runs a step timed alone
  // with the host not ahead, whatever the calibration.
  if (s.host_launch_us && !fixed.count("host_launch_us")) c.host_launch_us = *s.host_launch_us;
}

// The fit bounds of a calibration parameter (its row of the parameter table), or its valid range.
std::pair<double, double> bounds_of(const std::string& name) {
  const ParameterSpec* spec = find_parameter(name);
  if (spec && spec->fit) return {spec->fit->lower, spec->fit->upper};
  if (spec && spec->range == ParameterRange::efficiency) return {1e-6, 1.0};
  return {0.0, 1e300};
}

double clamp_efficiency(double v) { return std::clamp(v, 1e-6, 1.0); }

// A prior's value on one side applied to (kernel calibration, configuration). Returns false when
// this side is the preset itself (nothing to evaluate).
bool apply_prior(const ParameterPrior& p, int side, sim::KernelCalibration& kc, sim::WhatifConfig& c) {
  const double v = side < 0 ? p.low : p.high;
  if (p.relative && v == 1.0) return false;
  auto& k = kc.config;
  if (p.name == "ns_gemm_efficiency") {
    if (auto it = k.TFLOPs_by_kernel.find("ns_gemm"); it != k.TFLOPs_by_kernel.end())
      it->second *= v;
    else
      k.gemm_efficiency_scale *= v;
  } else if (p.name == "hbm_efficiency") {
    k.hardware.hbm_efficiency = clamp_efficiency(k.hardware.hbm_efficiency * v);
    for (auto& [cls, e] : k.hbm_efficiency_by_kernel) e = clamp_efficiency(e * v);
  } else if (p.name == "inter_node_link") {
    // One factor on the inter-node bandwidth: the FSDP rings and the all-to-all's network part
    // both run at the NIC's effective rate (the DES all-to-all sees fabric.nic_efficiency).
    c.fabric.nic_efficiency = clamp_efficiency(c.fabric.nic_efficiency * v);
  } else if (p.name == "collective_nvlink_scale") {
    // One factor on NCCL's NVLink rate: FSDP's collectives and the one-domain all-to-all both run
    // at it (the collective model's links); at most the nominal rate.
    c.collective_options.nvlink_scale = std::min(c.collective_options.nvlink_scale * v, 1.0 / nvlink_fraction(c.fabric));
  } else if (p.name == "alltoall_intra_efficiency") {
    c.alltoall_intra_efficiency = clamp_efficiency(c.alltoall_intra_efficiency * v);
  } else if (p.name == "alltoall_inter_efficiency") {
    c.alltoall_inter_efficiency = clamp_efficiency(c.alltoall_inter_efficiency * v);
  } else if (p.name == "collective_net_hop_extra_us") {
    // Every network step of the collectives and of the all-to-all's network rounds (the collective
    // model's one term for it; a calibration from nccl-tests logs fits the same term).
    if (v == c.collective_options.net_hop_extra_us) return false;
    c.collective_options.net_hop_extra_us = v;
  } else if (p.name == "alltoall_latency_us") {
    if (v <= c.alltoall_latency_us) return false;
    c.alltoall_latency_us = v;
  } else if (p.name == "rank_skew_ms") {
    if (v <= c.rank_skew_ms.value_or(0.0)) return false;
    c.rank_skew_ms = v;
  } else if (p.name == "ns_gemm_overlap_slowdown") {
    const auto it = k.overlap_slowdown_by_kernel.find("ns_gemm");
    if (v <= (it == k.overlap_slowdown_by_kernel.end() ? 1.0 : it->second)) return false;
    k.overlap_slowdown_by_kernel["ns_gemm"] = v;
  } else if (p.name == "host_launch_us") {
    if (v <= c.host_launch_us) return false;
    c.host_launch_us = v;
    c.host_ahead = true;
  } else {
    throw InputError("intervals: no prior rule for parameter '" + p.name + "'");
  }
  return true;
}

}  // namespace

Eigen::MatrixXd covariance_with_prior(const Eigen::MatrixXd& covariance, const Eigen::VectorXd& prior_variance) {
  if (covariance.rows() != covariance.cols() || covariance.rows() != prior_variance.size())
    throw InputError("intervals: a " + std::to_string(covariance.rows()) + " x " + std::to_string(covariance.cols()) +
                     " covariance with " + std::to_string(prior_variance.size()) + " prior variances");
  for (Eigen::Index i = 0; i < prior_variance.size(); ++i)
    if (!(std::isfinite(prior_variance[i]) && prior_variance[i] > 0))
      throw InputError("intervals: prior variance " + std::to_string(i) + " is " + std::to_string(prior_variance[i]) +
                       ", expected a finite value > 0");
  const Eigen::MatrixXd c = 0.5 * (covariance + covariance.transpose());
  const Eigen::MatrixXd with_prior = c + Eigen::MatrixXd(prior_variance.asDiagonal());
  const Eigen::MatrixXd posterior = c - c * with_prior.ldlt().solve(c);
  return 0.5 * (posterior + posterior.transpose());
}

double Interval::probability_above(double x) const {
  const double a = std::max(sd_lo, 0.0), b = std::max(sd_hi, 0.0);
  if (a + b <= 0) return value > x ? 1.0 : 0.0;
  // Split normal: mass a/(a+b) below the mode, b/(a+b) above.
  double below;
  if (x < value)
    below = a > 0 ? 2.0 * a / (a + b) * normal_cdf((x - value) / a) : 0.0;
  else
    below = a / (a + b) + (b > 0 ? 2.0 * b / (a + b) * (normal_cdf((x - value) / b) - 0.5) : b / (a + b));
  return std::clamp(1.0 - below, 0.0, 1.0);
}

std::string format_interval(const Interval& interval, int precision) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f ± %.*f", precision, interval.value, precision, interval.half_width());
  return buf;
}

FabricSpreadEstimate fabric_spread_from_published(const std::vector<PublishedRow>& rows) {
  constexpr std::int64_t kMinBytes = std::int64_t{32} << 20;
  // Across runs: rows of one (cluster, nodes, world, collective, size, placement) from several files.
  std::map<std::tuple<std::string, int, int, std::string, std::int64_t, std::string>, std::vector<double>> runs;
  // Back to back: the two placements of one printed line (source, collective, world, size).
  std::map<std::tuple<std::string, std::string, int, int, std::int64_t>, std::map<std::string, double>> lines;
  for (const auto& r : rows) {
    if (r.nodes < 2 || r.size_bytes < kMinBytes || !(r.time_us > 0)) continue;
    if (r.placement != "out-of-place" && r.placement != "in-place") continue;
    if (nvlink_domains_of(r).value_or(r.nodes) < 2) continue;  // the trays of one NVL72 rack: no network
    // One cluster = one repository's rows of one GPU label: "github.com/KeitaW/p5-nccl-test-2024-07-19"
    // holds three runs (NCCL 2.20 / 2.22 / 2.22 with tuner) of one pair of p5 nodes.
    runs[{cluster_of(r), r.nodes, r.world, r.collective, r.size_bytes, r.placement}].push_back(
        std::log(r.time_us));
    lines[{r.source, r.collective, r.nodes, r.world, r.size_bytes}][r.placement] = std::log(r.time_us);
  }
  FabricSpreadEstimate e;
  double ss = 0;
  for (const auto& [key, v] : runs) {
    if (v.size() < 2) continue;
    double mean = 0;
    for (double x : v) mean += x / static_cast<double>(v.size());
    for (double x : v) ss += (x - mean) * (x - mean);
    e.across_runs_dof += static_cast<int>(v.size()) - 1;
  }
  if (e.across_runs_dof > 0) e.across_runs = std::sqrt(ss / e.across_runs_dof);
  double dd = 0;
  for (const auto& [key, p] : lines) {
    if (p.size() != 2) continue;
    const double d = p.at("out-of-place") - p.at("in-place");
    dd += d * d;
    ++e.back_to_back_pairs;
  }
  // Var(x1 − x2) = 2σ² for two measurements of one quantity.
  if (e.back_to_back_pairs > 0) e.back_to_back = std::sqrt(dd / (2.0 * e.back_to_back_pairs));
  return e;
}

std::pair<double, double> prediction_range(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  if (n == 0) return {1.0, 1.0};
  const std::size_t k = std::max<std::size_t>(1, static_cast<std::size_t>(std::floor(0.05 * static_cast<double>(n + 1))));
  return {v[std::min(k, n) - 1], v[n - std::min(k, n)]};
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

InterNodePriorEstimate inter_node_prior_from_published(const std::vector<PublishedRow>& rows) {
  constexpr std::int64_t kMinBytes = std::int64_t{64} << 20;  // validate-collectives' bandwidth regime
  std::vector<PublishedRow> bandwidth;
  for (const auto& r : rows) {
    if (r.nodes < 2 || r.size_bytes < kMinBytes || !(r.time_us > 0)) continue;
    if (r.placement != "out-of-place" && r.placement != "in-place") continue;
    bandwidth.push_back(r);
  }
  // (cluster, GPUs per node, all-to-all?) -> nodes -> measured / modelled of its rows. Only rows
  // whose ranks span NVLink domains: the trays of one NVL72 rack are hosts, but no network.
  std::map<std::tuple<std::string, int, bool>, std::map<int, std::vector<double>>> groups;
  for (const auto& p : predict_published(bandwidth)) {
    if (!p.skipped.empty() || !(p.dionsim_us > 0) || p.nvlink_domains < 2) continue;
    const auto& r = *p.row;
    const std::string cluster = cluster_of(r);
    groups[{cluster, r.gpus_per_node, r.collective == "alltoall"}][r.nodes].push_back(r.time_us / p.dionsim_us);
  }
  InterNodePriorEstimate e;
  std::vector<double> link, a2a_vs_ring, drift;
  for (const auto& [key, by_nodes] : groups) {
    const auto& [cluster, gpn, a2a] = key;
    std::optional<std::pair<int, double>> previous;
    for (const auto& [nodes, ratios] : by_nodes) {
      const double m = median(ratios);
      if (!a2a) link.push_back(m);
      if (a2a) {
        const auto ring = groups.find({cluster, gpn, false});
        if (ring != groups.end())
          if (const auto at = ring->second.find(nodes); at != ring->second.end()) a2a_vs_ring.push_back(m / median(at->second));
      }
      if (previous) {
        const double doublings = std::log2(static_cast<double>(nodes) / previous->first);
        drift.push_back(std::abs(std::log(m / previous->second)) / std::sqrt(doublings));
      }
      previous = {{nodes, m}};
    }
  }
  std::tie(e.link_time_low, e.link_time_high) = prediction_range(link);
  e.link_groups = static_cast<int>(link.size());
  std::tie(e.alltoall_vs_ring_low, e.alltoall_vs_ring_high) = prediction_range(a2a_vs_ring);
  e.alltoall_pairs = static_cast<int>(a2a_vs_ring.size());
  if (!drift.empty()) {
    std::sort(drift.begin(), drift.end());
    const std::size_t k =
        std::max<std::size_t>(1, static_cast<std::size_t>(std::floor(0.10 * static_cast<double>(drift.size() + 1))));
    e.node_scaling = drift[drift.size() - std::min(k, drift.size())];
  }
  e.node_scaling_steps = static_cast<int>(drift.size());
  return e;
}

NetHopPriorEstimate net_hop_prior_from_published(const std::vector<PublishedRow>& rows) {
  std::vector<PublishedRow> latency;
  for (const auto& r : rows) {
    if (r.nodes < 2 || r.size_bytes <= 0 || regime_of(r.size_bytes) != SizeRegime::latency || !(r.time_us > 0)) continue;
    if (r.collective == "alltoall" || r.collective == "sendrecv") continue;
    if (r.placement != "out-of-place" && r.placement != "in-place") continue;
    latency.push_back(r);
  }
  // The model's network steps per row: its time's derivative in collective_net_hop_extra_us (the
  // model is linear in it: the algorithm NCCL's tuner picks does not see dionsim's extras).
  Calibration probe;
  probe.name = "network-step probe";
  probe.parameters["collective_net_hop_extra_us"] = {1.0, 0.0, "us"};
  const auto nominal = predict_published(latency);
  const auto probed = predict_published(latency, &probe);
  std::map<std::tuple<std::string, int, int>, std::vector<double>> groups;
  for (std::size_t i = 0; i < nominal.size(); ++i) {
    const auto& p = nominal[i];
    if (!p.skipped.empty() || !(p.dionsim_us > 0) || p.nvlink_domains < 2) continue;
    const double steps = probed[i].dionsim_us - p.dionsim_us;
    if (steps < 0.5) continue;  // no network step in the chosen algorithm
    const auto& r = *p.row;
    groups[{cluster_of(r), r.nodes, r.gpus_per_node}].push_back((r.time_us - p.dionsim_us) / steps);
  }
  std::vector<double> extra;
  for (const auto& [key, v] : groups) extra.push_back(median(v));
  NetHopPriorEstimate e;
  if (extra.empty()) return e;
  std::tie(e.extra_low_us, e.extra_high_us) = prediction_range(extra);
  e.groups = static_cast<int>(extra.size());
  return e;
}

IntraDomainPriorEstimate intra_domain_prior_from_published(const std::vector<PublishedRow>& rows) {
  constexpr std::int64_t kMinBytes = std::int64_t{64} << 20;  // validate-collectives' bandwidth regime
  std::vector<PublishedRow> bandwidth;
  for (const auto& r : rows) {
    if (r.size_bytes < kMinBytes || !(r.time_us > 0)) continue;
    if (r.placement != "out-of-place" && r.placement != "in-place") continue;
    bandwidth.push_back(r);
  }
  // (cluster, nodes, GPUs per node) -> all-to-all? -> measured / modelled of its one-domain rows.
  std::map<std::tuple<std::string, int, int>, std::map<bool, std::vector<double>>> groups;
  for (const auto& p : predict_published(bandwidth)) {
    if (!p.skipped.empty() || !(p.dionsim_us > 0) || p.nvlink_domains != 1) continue;
    const auto& r = *p.row;
    groups[{cluster_of(r), r.nodes, r.gpus_per_node}][r.collective == "alltoall"]
        .push_back(r.time_us / p.dionsim_us);
  }
  std::vector<double> link, a2a_vs_ring;
  for (const auto& [key, kinds] : groups) {
    const auto ring = kinds.find(false), a2a = kinds.find(true);
    if (ring != kinds.end()) link.push_back(median(ring->second));
    if (ring != kinds.end() && a2a != kinds.end()) a2a_vs_ring.push_back(median(a2a->second) / median(ring->second));
  }
  IntraDomainPriorEstimate e;
  std::tie(e.link_time_low, e.link_time_high) = prediction_range(link);
  e.link_groups = static_cast<int>(link.size());
  std::tie(e.alltoall_vs_ring_low, e.alltoall_vs_ring_high) = prediction_range(a2a_vs_ring);
  e.alltoall_pairs = static_cast<int>(a2a_vs_ring.size());
  return e;
}

const std::map<std::string, double>& default_model_error() {
  // Relative rms of the leave-one-out errors of the seed calibration (docs/calibration.md, five
  // configurations), by whatif metric; test_intervals recomputes them.
  static const std::map<std::string, double> m = {
      {"step_wall_ms", 0.0147},       {"opt_wall_ms", 0.0625},     {"opt_comm_window_ms", 0.0779},
      {"a2a_ms", 0.1405},             {"ns_gemm_ms", 0.0263},      {"non_gemm_ms", 0.1081},
      {"opt_gpu_ms", 0.0176},         {"opt_cpu_span_ms", 0.0626}, {"opt_gpu_idle_comm_window_pct", 0.1505},
      {"mfu_pct", 0.0079},
  };
  return m;
}

const std::vector<ParameterPrior>& parameter_priors() {
  // 90 % ranges; docs/calibration.md ("Intervals") gives the evidence in full.
  static const std::vector<ParameterPrior> p = {
      {"ns_gemm_efficiency", true, 0.80, 1.25,
       "NS GEMM throughput of this repository's five step calibrations: 0.73-1.0 of dense peak"},
      {"hbm_efficiency", true, 0.50, 1.10, "fitted HBM efficiencies of the kernel classes: 0.46-1.0 (one 0.11)"},
      {"inter_node_link", true, 1.0 / kLinkTimeHigh, 1.0 / kLinkTimeLow,
       "published clusters against the fabric assumed for them: ring collectives >= 64 MiB, median measured / "
       "modelled time per (cluster, nodes, GPUs per node), distribution-free 90 % range"},
      {"alltoall_inter_efficiency", true, 1.0 / kAlltoallVsRingHigh, 1.0 / kAlltoallVsRingLow,
       "published clusters: all-to-all over ring median time ratio per (cluster, nodes, GPUs per node), "
       "distribution-free 90 % range"},
      {"collective_nvlink_scale", true, 1.0 / kIntraLinkTimeHigh, 1.0 / kIntraLinkTimeLow,
       "published collectives >= 64 MiB inside one NVLink domain (H100 nodes, GB200/GB300 trays and racks) against the "
       "model: median measured / modelled time per (cluster, nodes, GPUs per node), distribution-free 90 % range"},
      {"alltoall_intra_efficiency", true, 1.0 / kIntraAlltoallVsRingHigh, 1.0 / kIntraAlltoallVsRingLow,
       "published NVLink domains: all-to-all over collective median time ratio per (cluster, nodes, GPUs per node), "
       "distribution-free 90 % range"},
      {"collective_net_hop_extra_us", false, kNetHopExtraLowUs, kNetHopExtraHighUs,
       "published clusters against the model: collectives <= 64 KiB across NVLink domains, the extra cost per "
       "network step that meets the measured time, median per (cluster, nodes, GPUs per node), distribution-free "
       "90 % range"},
      {"alltoall_latency_us", false, 0.0, 300.0, "fitted per-all-to-all cost of five calibrations: 91-304 us"},
      {"rank_skew_ms", false, 0.0, 3.5, "fitted arrival skew of five calibrations: 1.1-3.5 ms"},
      {"ns_gemm_overlap_slowdown", false, 1.0, 1.87,
       "seed fit 1.70; H200 traces 753 / 402 TFLOP/s = 1.87 (docs/measurements.md)"},
      {"host_launch_us", false, 0.0, 20.0, "seed fit 16.3 us per plan launch; an eager x.add_ enqueues in 8 us"},
  };
  return p;
}

void check_interval_options(const IntervalOptions& options) {
  auto text = [](double v) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", v);
    return std::string(got);
  };
  if (!(options.fabric_spread >= 0 && options.fabric_spread <= 1))
    throw_bad_usage("--fabric-spread", text(options.fabric_spread),
                    "a relative spread in [0, 1] (the standard deviation of log bandwidth, e.g. 0.024)");
  if (!(options.link_time_low > 0 && options.link_time_low <= options.link_time_high && options.link_time_high <= 100))
    throw_bad_usage("--inter-node-prior", text(options.link_time_low) + "," + text(options.link_time_high),
                    "LO,HI with 0 < LO <= HI <= 100: the 90 % range of the inter-node link's time as a factor on the "
                    "assumed fabric's (e.g. 0.526,3.816)");
  if (!(options.net_step_low_us >= -2.5 && options.net_step_low_us <= options.net_step_high_us &&
        options.net_step_high_us <= 1000))
    throw_bad_usage("--net-step-prior", text(options.net_step_low_us) + "," + text(options.net_step_high_us),
                    "LO,HI with -2.5 <= LO <= HI <= 1000: the 90 % range of one network step's cost beyond the "
                    "model's, in us (e.g. 0,10)");
  if (!(options.node_scaling >= 0 && options.node_scaling <= 10))
    throw_bad_usage("node_scaling", text(options.node_scaling), "a log drift per doubling of nodes in [0, 10]");
  if (options.calibrated_nodes < 0)
    throw_bad_usage("calibrated_nodes", std::to_string(options.calibrated_nodes), "a node count >= 0 (0 = not known)");
}

namespace {

// "LO,HI" of a prior's flag into (low, high) of a copy of options, checked, then stored.
void parse_prior_range(const std::string& text, const char* flag, const std::string& expected,
                       double IntervalOptions::*low, double IntervalOptions::*high, IntervalOptions& options) {
  const auto comma = text.find(',');
  if (comma == std::string::npos || text.find(',', comma + 1) != std::string::npos)
    throw_bad_usage(flag, text, expected);
  IntervalOptions o = options;
  try {
    o.*low = parse_double(text.substr(0, comma), flag);
    o.*high = parse_double(text.substr(comma + 1), flag);
  } catch (const UsageError&) {
    throw_bad_usage(flag, text, expected);
  }
  check_interval_options(o);
  options = o;
}

}  // namespace

void parse_inter_node_prior(const std::string& text, IntervalOptions& options) {
  parse_prior_range(text, "--inter-node-prior",
                    "LO,HI: two numbers, 0 < LO <= HI <= 100 (time factors on the assumed fabric's inter-node model)",
                    &IntervalOptions::link_time_low, &IntervalOptions::link_time_high, options);
}

void parse_net_step_prior(const std::string& text, IntervalOptions& options) {
  parse_prior_range(text, "--net-step-prior",
                    "LO,HI: two numbers, -2.5 <= LO <= HI <= 1000 (us per network step beyond the model's)",
                    &IntervalOptions::net_step_low_us, &IntervalOptions::net_step_high_us, options);
}

json interval_options_json(const IntervalOptions& options) {
  const IntervalOptions defaults;
  json j;
  if (options.fabric_spread != defaults.fabric_spread) j["fabric_spread"] = options.fabric_spread;
  if (options.link_time_low != defaults.link_time_low || options.link_time_high != defaults.link_time_high)
    j["inter_node_prior"] = {options.link_time_low, options.link_time_high};
  if (options.net_step_low_us != defaults.net_step_low_us || options.net_step_high_us != defaults.net_step_high_us)
    j["net_step_prior_us"] = {options.net_step_low_us, options.net_step_high_us};
  return j;
}

Uncertainty uncertainty_of(const Calibration* fitted, const IntervalOptions& options) {
  check_interval_options(options);
  Uncertainty u;
  u.fabric_spread = options.fabric_spread;
  u.fixed = options.fixed;
  bool has_hbm = false;
  if (fitted != nullptr) {
    u.calibration = fitted->name;
    for (const auto& [name, p] : fitted->parameters) {
      u.parameters[name] = p.value;
      has_hbm = has_hbm || name.starts_with("hbm_efficiency.");
    }
    u.covariance_parameters = fitted->covariance_parameters;
    u.covariance = fitted->covariance;
    if (u.covariance_parameters.empty())
      u.notes.push_back("calibration '" + fitted->name +
                        "' has no covariance: its fitted parameters are taken as exact");
    if (!fitted->model_error.empty()) {
      u.model_error = fitted->model_error;
      u.model_error_source = "leave-one-out of calibration '" + fitted->name + "' (" +
                             std::to_string(fitted->model_error_configurations) + " configurations)";
    }
  } else {
    u.notes.push_back("no step calibration: every step-model parameter takes its prior range (docs/calibration.md, "
                      "Intervals) — wide intervals");
  }
  if (u.model_error.empty()) {
    u.model_error = default_model_error();
    u.model_error_source = "the seed calibration's leave-one-out (no leave-one-out of " +
                           (fitted ? "'" + fitted->name + "'" : std::string("a calibration")) + ")";
    if (fitted) u.notes.push_back("calibration '" + fitted->name + "' has no leave-one-out errors: model-form error " +
                                  "from the seed calibration's");
  }
  // A calibration with either inter-node parameter was fitted on runs across nodes: it knows its
  // link (at the node counts it saw); one without has only seen NVLink.
  const bool inter_node = u.parameters.count("nic_efficiency") != 0 || u.parameters.count("alltoall_inter_efficiency") != 0;
  // Likewise NVLink: a calibration holding the one-domain all-to-all's efficiency has priced what
  // the NVLink link moves of its runs (the all-to-all; its FSDP sits in its measured fwd/bwd).
  const bool nvlink = u.parameters.count("collective_nvlink_scale") != 0 ||
                      u.parameters.count("alltoall_intra_efficiency") != 0;
  std::string priors;
  for (auto p : parameter_priors()) {
    const bool held = p.name == "hbm_efficiency"            ? has_hbm
                      : p.name == "inter_node_link"         ? inter_node
                      : p.name == "collective_nvlink_scale" ? nvlink
                                                            : u.parameters.count(p.name) != 0;
    if (held || options.fixed.count(p.name)) continue;
    if (p.name == "inter_node_link" &&
        (options.link_time_low != kLinkTimeLow || options.link_time_high != kLinkTimeHigh)) {
      p.low = 1.0 / options.link_time_high;
      p.high = 1.0 / options.link_time_low;
      p.evidence = "--inter-node-prior";
    }
    if (p.name == "collective_net_hop_extra_us" &&
        (options.net_step_low_us != kNetHopExtraLowUs || options.net_step_high_us != kNetHopExtraHighUs)) {
      p.low = options.net_step_low_us;
      p.high = options.net_step_high_us;
      p.evidence = "--net-step-prior";
    }
    u.priors.push_back(p);
    priors += (priors.empty() ? "" : ", ") + p.name;
  }
  if (fitted && !priors.empty())
    u.notes.push_back("calibration '" + fitted->name + "' does not hold " + priors +
                      ": their prior ranges widen the intervals where they matter (e.g. inter-node ones at several nodes)");
  u.calibrated_nodes = options.calibrated_nodes > 0 ? options.calibrated_nodes : (inter_node || !fitted ? 2 : 1);
  if (fitted && !options.beyond_model_error.empty()) {
    u.beyond_model_error = options.beyond_model_error;
    u.beyond_model_error_source = "node-count extrapolation of calibration '" + fitted->name + "'";
  }
  if (inter_node) {
    u.scaling_from_nodes = u.calibrated_nodes;
    u.node_scaling = options.node_scaling;
  }
  return u;
}

const std::vector<std::string>& interval_metrics() {
  static const std::vector<std::string> m = {
      "step_wall_ms",   "opt_wall_ms",        "opt_critical_path_ms", "opt_comm_window_ms", "opt_cpu_span_ms",
      "rank_wait_ms",   "opt_gpu_ms",         "opt_gpu_idle_pct",     "opt_gpu_idle_comm_window_pct",
      "ns_gemm_ms",     "non_gemm_ms",        "a2a_ms",               "norms_allgather_ms", "opt_exposed_comm_ms",
      "exposed_comm_ms", "fwd_bwd_ms",        "fsdp_comm_ms",         "fsdp_exposed_ms",    "replica_reduce_ms",
      "mfu_pct",
  };
  return m;
}

bool has_interval_metric(const std::string& whatif_metric) {
  const auto& m = interval_metrics();
  return std::find(m.begin(), m.end(), whatif_metric) != m.end();
}

// One source of error: a principal direction of the covariance (1σ step in parameter space), a
// prior, or the fabric factor.
struct IntervalModel::Source {
  enum class Kind { direction, prior, fabric, scaling } kind = Kind::direction;
  std::vector<std::pair<std::string, double>> direction;  // parameter, 1σ displacement
  double step_minus = 0, step_plus = 0;                   // in units of the direction, inside bounds
  ParameterPrior prior;
};

IntervalModel::IntervalModel(sim::KernelCalibration calibration, sim::Hardware hardware, Uncertainty uncertainty)
    : calibration_(std::move(calibration)), hardware_(std::move(hardware)), uncertainty_(std::move(uncertainty)) {}

std::vector<IntervalModel::Source> IntervalModel::sources(const sim::WhatifConfig& config) const {
  std::vector<Source> out;
  const auto& u = uncertainty_;
  // (a) principal directions of the covariance over the parameters the command line did not fix.
  std::vector<Eigen::Index> live;
  for (std::size_t j = 0; j < u.covariance_parameters.size(); ++j) {
    const auto& name = u.covariance_parameters[j];
    if (u.fixed.count(name)) continue;
    if (name == "fwd_bwd_ms" && config.mfu) continue;
    live.push_back(static_cast<Eigen::Index>(j));
  }
  if (!live.empty()) {
    const auto k = static_cast<Eigen::Index>(live.size());
    Eigen::MatrixXd C(k, k);
    for (Eigen::Index a = 0; a < k; ++a)
      for (Eigen::Index b = 0; b < k; ++b) C(a, b) = u.covariance(live[a], live[b]);
    // The fit's covariance combined with the prior it was fitted under (covariance_with_prior). A
    // cap on each principal direction of C instead would also shrink the well-determined
    // parameters mixed into a direction with an open HBM group (the 1-node seed fit's
    // GEMM-beside-collective slowdown, σ 0.40: 0.21 that way, 0.28 here).
    Eigen::VectorXd prior_variance(k);
    for (Eigen::Index a = 0; a < k; ++a) {
      const auto [lo, hi] = bounds_of(u.covariance_parameters[static_cast<std::size_t>(live[a])]);
      const double uniform_sd = (std::min(hi, 1e12) - lo) / std::sqrt(12.0);
      prior_variance[a] = uniform_sd * uniform_sd;
    }
    const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(covariance_with_prior(C, prior_variance));
    const double largest = eig.eigenvalues().cwiseAbs().maxCoeff();
    constexpr double kStep = 0.1;  // of a standard deviation: linear, yet far above the ns rounding
    for (Eigen::Index e = 0; e < k; ++e) {
      const double lambda = eig.eigenvalues()[e];
      if (!(lambda > 1e-12 * largest) || lambda <= 0) continue;
      Source s;
      s.kind = Source::Kind::direction;
      const Eigen::VectorXd d = eig.eigenvectors().col(e) * std::sqrt(lambda);
      s.step_minus = s.step_plus = kStep;
      for (Eigen::Index a = 0; a < k; ++a) {
        if (std::abs(d[a]) < 1e-15) continue;
        const auto& name = u.covariance_parameters[static_cast<std::size_t>(live[a])];
        const double v = u.parameters.at(name);
        const auto [lo, hi] = bounds_of(name);
        // Largest t in [0, kStep] with lo <= v ± t·d <= hi.
        auto room = [&](double sign) {
          const double delta = sign * d[a];
          if (delta > 0) return std::max(0.0, (hi - v) / delta);
          return std::max(0.0, (v - lo) / -delta);
        };
        s.step_plus = std::min(s.step_plus, room(1.0));
        s.step_minus = std::min(s.step_minus, room(-1.0));
        s.direction.emplace_back(name, d[a]);
      }
      if (s.step_plus + s.step_minus > 1e-9 && !s.direction.empty()) out.push_back(std::move(s));
    }
  }
  for (const auto& p : u.priors) {
    Source s;
    s.kind = Source::Kind::prior;
    s.prior = p;
    out.push_back(s);
  }
  if (u.fabric_spread > 0 && config.nodes > 1) {
    Source s;
    s.kind = Source::Kind::fabric;
    out.push_back(s);
  }
  if (u.scaling_from_nodes > 0 && config.nodes > u.scaling_from_nodes && u.node_scaling > 0) {
    Source s;
    s.kind = Source::Kind::scaling;
    // The drift of a random walk in log2(nodes): its 90 % end grows with √doublings.
    s.step_plus = s.step_minus =
        u.node_scaling * std::sqrt(std::log2(static_cast<double>(config.nodes) / u.scaling_from_nodes));
    out.push_back(s);
  }
  return out;
}

bool IntervalModel::perturb(const Source& source, int side, sim::KernelCalibration& kc,
                            std::vector<sim::WhatifConfig>& cs) const {
  if (source.kind == Source::Kind::direction) {
    const double t = side < 0 ? -source.step_minus : source.step_plus;
    sim::KernelCalibration stepped = kc;
    stepped.step = {};
    for (const auto& [name, d] : source.direction) {
      std::string suffix;
      const ParameterSpec* spec = find_parameter(name, &suffix);
      if (spec == nullptr || spec->apply == nullptr) continue;
      spec->apply(uncertainty_.parameters.at(name) + t * d, suffix, stepped, hardware_);
    }
    kc.config = stepped.config;
    kc.alltoall_algbw_GBps_by_world = stepped.alltoall_algbw_GBps_by_world;
    for (auto& c : cs) set_step(stepped.step, c, uncertainty_.fixed);
    return true;
  }
  if (source.kind == Source::Kind::prior) {
    const sim::KernelCalibration before = kc;
    bool changed = false;
    for (auto& c : cs) {
      sim::KernelCalibration per = before;  // a factor on the kernels applies once, not per configuration
      changed = apply_prior(source.prior, side, per, c) || changed;
      kc.config = per.config;
    }
    return changed;
  }
  // The inter-node bandwidth: the NIC's effective rate, which the FSDP rings and the DES
  // all-to-all both run at (scaling alltoall_inter_efficiency too would count the all-to-all twice).
  const double log_f = source.kind == Source::Kind::fabric ? kIntervalZ * uncertainty_.fabric_spread : source.step_plus;
  const double f = std::exp(side * log_f);
  for (auto& c : cs) c.fabric.nic_efficiency = clamp_efficiency(c.fabric.nic_efficiency * f);
  return true;
}

std::vector<double> IntervalModel::evaluate(const std::vector<sim::WhatifConfig>& configs, const opt::Inventory& inventory,
                                            const std::vector<Perturbation>& perturbations) const {
  sim::KernelCalibration kc = calibration_;
  std::vector<sim::WhatifConfig> cs = configs;
  bool changed = perturbations.empty();
  // A direction first: it sets the step parameters (nic_efficiency among them) that a link
  // factor then scales.
  for (const auto& [source, side] : perturbations) changed = perturb(*source, side, kc, cs) || changed;
  std::vector<double> out;
  if (!changed) return out;  // this side is the central prediction
  const sim::KernelModel kernels(kc.config, kc.measured);
  for (const auto& c : cs) {
    const auto r = sim::run_whatif(c, inventory, kernels);
    for (const auto& m : interval_metrics()) out.push_back(sim::metric_value(r, m).value_or(std::nan("")));
  }
  return out;
}

namespace {

// Combines the sources' deviations of each output (index) into intervals around `central`.
struct Accumulator {
  std::vector<double> up, down;  // variances
  explicit Accumulator(std::size_t n) : up(n, 0.0), down(n, 0.0) {}
  void linear(std::size_t i, double sd) {
    up[i] += sd * sd;
    down[i] += sd * sd;
  }
  void ends(std::size_t i, double minus, double plus) {  // deviations at the 90 % ends
    const double hi = std::max({0.0, minus, plus}) / kIntervalZ;
    const double lo = std::max({0.0, -minus, -plus}) / kIntervalZ;
    up[i] += hi * hi;
    down[i] += lo * lo;
  }
};

// The source that moves the inter-node link furthest: the link's prior (a calibration without
// inter-node runs), else its drift beyond the calibrated node counts; null for neither.
template <class Sources>
const typename Sources::value_type* link_source(const Sources& sources) {
  using Kind = typename Sources::value_type::Kind;
  for (const auto& s : sources)
    if (s.kind == Kind::prior && s.prior.name == "inter_node_link") return &s;
  for (const auto& s : sources)
    if (s.kind == Kind::scaling) return &s;
  return nullptr;
}

// Every source's − and + perturbation through the model (evaluate({{&source, ±1}})), as variances
// below and above the central value of each metric that value(evaluation, i) reads.
//
// The model is not linear across sources: a GEMM-beside-collective slowdown costs more the longer
// the FSDP rings run, so a parameter direction's gradient at the central link understates it where
// the link is slow. Each linearised direction is therefore also differentiated at both ends of the
// link's own uncertainty (link_source), and each side of a metric takes the larger of the central
// gradient and the gradient at the link end that moves the metric that way.
template <class Sources, class Evaluate, class Value>
Accumulator propagate(const Sources& sources, std::size_t n, const std::vector<double>& central,
                      const Evaluate& evaluate, const Value& value) {
  using Kind = typename Sources::value_type::Kind;
  Accumulator acc(n);
  // Only a linearised direction is differentiated at the link's ends: without one, no link term.
  const bool any_direction =
      std::any_of(sources.begin(), sources.end(), [](const auto& s) { return s.kind == Kind::direction; });
  const auto* link = any_direction ? link_source(sources) : nullptr;
  std::vector<double> link_minus, link_plus;
  if (link) {
    link_minus = evaluate({{link, -1}});
    link_plus = evaluate({{link, +1}});
  }
  auto deviation = [&](const std::vector<double>& v, std::size_t i) {
    return v.empty() ? 0.0 : value(v, i) - value(central, i);
  };
  for (const auto& s : sources) {
    const auto minus = evaluate({{&s, -1}});
    const auto plus = evaluate({{&s, +1}});
    if (s.kind != Kind::direction) {
      for (std::size_t i = 0; i < n; ++i) {
        const double dm = deviation(minus, i), dp = deviation(plus, i);
        if (std::isfinite(dm) && std::isfinite(dp)) acc.ends(i, dm, dp);
      }
      continue;
    }
    const double span = s.step_plus + s.step_minus;
    auto gradient = [&](const std::vector<double>& lo, const std::vector<double>& hi, std::size_t i) {
      return ((hi.empty() ? value(central, i) : value(hi, i)) - (lo.empty() ? value(central, i) : value(lo, i))) / span;
    };
    // The gradient at each end of the link (side -1 and +1).
    std::vector<double> at_link[2][2];
    if (link) {
      for (int e = 0; e < 2; ++e) {
        const int link_side = e == 0 ? -1 : 1;
        at_link[e][0] = evaluate({{&s, -1}, {link, link_side}});
        at_link[e][1] = evaluate({{&s, +1}, {link, link_side}});
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      const double g = gradient(minus, plus, i);
      if (!std::isfinite(g)) continue;
      double up = g * g, down = g * g;
      if (link) {
        const double dl[2] = {deviation(link_minus, i), deviation(link_plus, i)};
        const double g_end[2] = {gradient(at_link[0][0], at_link[0][1], i), gradient(at_link[1][0], at_link[1][1], i)};
        const int up_end = dl[1] >= dl[0] ? 1 : 0, down_end = 1 - up_end;
        if (dl[up_end] > 0 && std::isfinite(g_end[up_end])) up = std::max(up, g_end[up_end] * g_end[up_end]);
        if (dl[down_end] < 0 && std::isfinite(g_end[down_end])) down = std::max(down, g_end[down_end] * g_end[down_end]);
      }
      acc.up[i] += up;
      acc.down[i] += down;
    }
  }
  return acc;
}

Interval make_interval(double value, double var_lo, double var_hi, bool non_negative) {
  Interval iv;
  iv.value = value;
  iv.sd_lo = std::sqrt(var_lo);
  iv.sd_hi = std::sqrt(var_hi);
  iv.lo = value - kIntervalZ * iv.sd_lo;
  iv.hi = value + kIntervalZ * iv.sd_hi;
  // A time cannot go below 0; a metric whose central value is already negative (the idle share of
  // a window shorter than the GPU's busy time) is left as it is.
  if (non_negative && value >= 0) iv.lo = std::max(0.0, iv.lo);
  return iv;
}

}  // namespace

std::map<std::string, Interval> IntervalModel::intervals(const sim::WhatifConfig& config,
                                                         const opt::Inventory& inventory) const {
  const std::vector<sim::WhatifConfig> cs{config};
  const auto central = evaluate(cs, inventory, {});
  const std::size_t n = central.size();
  auto acc = propagate(
      sources(config), n, central,
      [&](const std::vector<Perturbation>& perturbations) { return evaluate(cs, inventory, perturbations); },
      [](const std::vector<double>& v, std::size_t i) { return v[i]; });
  std::map<std::string, Interval> out;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(central[i])) continue;
    const auto& metric = interval_metrics()[i];
    const double e = model_error_of(uncertainty_, metric, config.nodes) * std::abs(central[i]);
    acc.linear(i, e);
    out[metric] = make_interval(central[i], acc.down[i], acc.up[i], true);
  }
  return out;
}

std::map<std::string, Interval> IntervalModel::differences(const sim::WhatifConfig& a, const sim::WhatifConfig& b,
                                                           const opt::Inventory& inventory) const {
  if (a.nodes != b.nodes || a.gpus_per_node != b.gpus_per_node || a.fabric.name != b.fabric.name)
    throw InputError("intervals: a difference is taken on one node set: got " + std::to_string(a.nodes) + " x " +
                     std::to_string(a.gpus_per_node) + " on " + a.fabric.name + " vs " + std::to_string(b.nodes) +
                     " x " + std::to_string(b.gpus_per_node) + " on " + b.fabric.name);
  const std::vector<sim::WhatifConfig> cs{a, b};
  const auto central = evaluate(cs, inventory, {});
  const std::size_t n = central.size() / 2;
  auto diff = [n](const std::vector<double>& v, std::size_t i) { return v[i] - v[n + i]; };
  auto acc = propagate(
      sources(a), n, central,
      [&](const std::vector<Perturbation>& perturbations) { return evaluate(cs, inventory, perturbations); }, diff);
  std::map<std::string, Interval> out;
  for (std::size_t i = 0; i < n; ++i) {
    const double d0 = diff(central, i);
    if (!std::isfinite(d0)) continue;
    const auto& metric = interval_metrics()[i];
    const double e = model_error_of(uncertainty_, metric, a.nodes);
    acc.linear(i, e * std::abs(central[i]));      // the two configurations' model-form errors,
    acc.linear(i, e * std::abs(central[n + i]));  // taken as independent
    out[metric] = make_interval(d0, acc.down[i], acc.up[i], false);
  }
  return out;
}

void add_interval_json(json& row, const std::map<std::string, Interval>& intervals) {
  for (const auto& [metric, iv] : intervals) {
    row[metric + "_lo"] = iv.lo;
    row[metric + "_hi"] = iv.hi;
  }
}

std::map<std::string, double> half_widths(const std::map<std::string, Interval>& intervals) {
  std::map<std::string, double> out;
  for (const auto& [metric, iv] : intervals) out[metric] = iv.half_width();
  return out;
}

json to_json(const Interval& iv) {
  return {{"value", iv.value}, {"lo", iv.lo}, {"hi", iv.hi}, {"sd_lo", iv.sd_lo}, {"sd_hi", iv.sd_hi}};
}

}  // namespace dionsim::analysis
