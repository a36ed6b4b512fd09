#pragma once
// Prediction intervals of the what-if step model: a central value and a 90 % interval for every
// predicted time metric, from these sources of error, each propagated by perturbing the model's
// inputs and re-running the model (never by scaling the result):
//
//   (a) the fitted parameters' covariance (a `dionsim calibrate` file, schema 2): linearised — the
//       model's gradient along each principal direction of C by central differences of a tenth of
//       that direction's standard deviation, var = gᵀ C g (the report's extrapolation study does
//       the same; sampling C is not used because weakly determined HBM groups have standard errors
//       wider than their (0, 1] range, docs/calibration.md);
//   (b) model-form error: what the calibration's own leave-one-configuration-out residuals show,
//       the relative rms error per metric (stored in the calibration as "model_error"); a metric
//       the leave-one-out has no cells of takes the largest time metric's; a calibration without
//       them takes kDefaultModelError (the seed calibration's, docs/calibration.md);
//   (b') what the leave-one-out cannot show: at more nodes than the calibration's runs had, the
//       inter-node link's drift with the node count (node_scaling: how far measured / modelled of
//       one published cluster moves per doubling of its nodes), the link at exp(±q·√doublings);
//   (c) fabric variability between node sets of one cluster: the inter-node bandwidth (the NIC
//       efficiency, which the FSDP rings and the all-to-all both run at) at exp(±z·s), with s
//       from public evidence (kPublishedFabricSpread, fabric_spread_from_published) or
//       `--fabric-spread`; it moves only what crosses nodes.
// and, for a parameter the calibration does not hold (no calibration at all, or a one-node
// calibration asked about several nodes): that parameter's prior (parameter_priors(): a 90 % range
// from public evidence and dionsim's own calibrations), the model evaluated at both ends. That is
// the "widen honestly" rule: nothing the data did not constrain is treated as known. The
// inter-node link is one prior ("inter_node_link": one factor on the bandwidth that the FSDP
// rings and the all-to-all share, so that both reach their ends together) plus the all-to-all's
// own share of it ("alltoall_inter_efficiency"); its range is what the published clusters show
// against the fabric dionsim assumed for them (inter_node_prior_from_published), because a
// measurement CSV does not state its fabric: the calibration's fabric is an assumption. Those
// rows are bandwidth-bound; what latency-bound calls (the norms all-gather, the all-to-alls'
// rounds) cost per network step has its own prior ("collective_net_hop_extra_us", from the
// latency-bound rows: net_hop_prior_from_published), held only by a calibration from nccl-tests.
//
// Combination: each source contributes an upward and a downward deviation (a source evaluated at
// its 90 % ends contributes |Δ|/z as a standard deviation on its side; a linearised one the same on
// both sides); the sides add in quadrature to sd_hi and sd_lo, and the interval is
// [value − z·sd_lo, value + z·sd_hi] (a split normal), clamped at 0 for a time. Differences of two
// configurations on one node set (scope vs scope) perturb both together, so the common parameters,
// the fabric factor and the priors cancel as far as the model says they do; their model-form
// errors are taken as independent (the leave-one-out cannot tell how they correlate: conservative).
#include <Eigen/Dense>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/calibration/fit_calibration.hpp"
#include "analysis/measured/nccl_published.hpp"
#include "optimizer/inventory.hpp"
#include "sim/whatif.hpp"
#include "sim/whatif_calibration.hpp"

namespace dionsim::analysis {

inline constexpr double kIntervalLevel = 0.90;
inline constexpr double kIntervalZ = 1.6448536269514722;  // Φ⁻¹(0.95): two-sided 90 %

// A prediction and its 90 % interval. sd_lo / sd_hi: the standard deviations of the two sides
// (split normal around value).
struct Interval {
  double value = 0, lo = 0, hi = 0;
  double sd_lo = 0, sd_hi = 0;
  [[nodiscard]] double half_width() const { return 0.5 * (hi - lo); }
  [[nodiscard]] bool covers(double x) const { return lo <= x && x <= hi; }
  // P(true value > x) under the split normal (value, sd_lo, sd_hi): for a difference a − b of
  // step times, probability_above(0) is the probability that b is really the faster.
  [[nodiscard]] double probability_above(double x) const;
};
// "582.3 ± 16.1" (half the interval's width; `precision` digits after the point).
[[nodiscard]] std::string format_interval(const Interval& interval, int precision = 1);

// (c) The relative standard deviation of inter-node bandwidth between repeated measurements of
// one size on one cluster in the published nccl-tests rows (../shared/data/nccl-published):
// bandwidth-bound rows (>= 32 MiB, >= 2 nodes); pooled over repeated runs of one cluster (one
// repository's files of one GPU label; same nodes, world, collective, size, placement) and over back-to-back repeats
// (out-of-place vs in-place of one printed line), sd of log time. The larger of the two is used.
struct FabricSpreadEstimate {
  double across_runs = 0;      // pooled sd between runs of one cluster
  int across_runs_dof = 0;
  double back_to_back = 0;     // pooled sd between the two placements of one line
  int back_to_back_pairs = 0;
  [[nodiscard]] double spread() const { return std::max(across_runs, back_to_back); }
};
[[nodiscard]] FabricSpreadEstimate fabric_spread_from_published(const std::vector<PublishedRow>& rows);
// fabric_spread_from_published on the committed CSV, rounded to 3 decimals (a test checks it).
inline constexpr double kPublishedFabricSpread = 0.024;

// The inter-node link of an unseen cluster, from the published nccl-tests rows
// (../shared/data/nccl-published): bandwidth-bound rows (>= 64 MiB, >= 2 nodes) predicted by
// validate-collectives on the fabric preset the cluster table assumes for the row's GPU, grouped
// by (cluster = one repository's rows of one GPU label, nodes, GPUs per node); a group's value is
// its median measured / modelled time.
//   link: the ring collectives' group medians; the 90 % range is the distribution-free prediction
//         interval for one more group, [x(k), x(n+1-k)] with k = max(1, floor(0.05 (n+1)))
//         (a new draw falls between the k-th smallest and largest of n with probability
//         (n+1-2k)/(n+1));
//   alltoall_vs_ring: a group's all-to-all median over its ring median, where it has both (the
//         all-to-all's own share of the link), the same rule;
//   node_scaling: per (cluster, GPUs per node, ring or all-to-all), between consecutive node
//         counts, |Δ log(measured / modelled)| / √(log2 of the node ratio); the 90 % end is the
//         k-th largest of m with k = max(1, floor(0.1 (m+1))).
// The distribution-free 90 % prediction interval of one more draw from n values: [x(k), x(n+1-k)]
// of the sorted values with k = max(1, floor(0.05 (n+1))), which holds >= 90 % once n >= 19 and
// (n-1)/(n+1) below (the widest the sample can say); (1, 1) for none. Every prior below and the
// model-form range of published_intervals.hpp take it.
[[nodiscard]] std::pair<double, double> prediction_range(std::vector<double> values);

struct InterNodePriorEstimate {
  double link_time_low = 1, link_time_high = 1;  // time factors on the assumed fabric's model
  int link_groups = 0;
  double alltoall_vs_ring_low = 1, alltoall_vs_ring_high = 1;
  int alltoall_pairs = 0;
  double node_scaling = 0;  // 90 % end of |Δ log time| per √doubling
  int node_scaling_steps = 0;
};
[[nodiscard]] InterNodePriorEstimate inter_node_prior_from_published(const std::vector<PublishedRow>& rows);
// inter_node_prior_from_published on the committed CSV, rounded to 3 decimals (a test checks them).
inline constexpr double kLinkTimeLow = 0.780, kLinkTimeHigh = 3.198;          // 25 groups
inline constexpr double kAlltoallVsRingLow = 0.759, kAlltoallVsRingHigh = 2.572;  // 12 pairs
inline constexpr double kNodeScaling = 0.384;                                     // 11 steps

// The NVLink domain of an unseen cluster, from the same rows and by the same rules as the
// inter-node link above: bandwidth-bound rows (>= 64 MiB) whose ranks share one NVLink domain
// (an HGX node, trays of one NVL72 rack), grouped by (cluster, nodes, GPUs per node).
//   link: the ring / tree / NVLS collectives' group medians (the whatif parameter
//         collective_nvlink_scale: one factor on NCCL's NVLink rate, which FSDP's collectives and
//         the one-domain all-to-all share);
//   alltoall_vs_ring: a group's all-to-all median over its collectives' median, where it has both
//         (the all-to-all's own share: alltoall_intra_efficiency).
struct IntraDomainPriorEstimate {
  double link_time_low = 1, link_time_high = 1;
  int link_groups = 0;
  double alltoall_vs_ring_low = 1, alltoall_vs_ring_high = 1;
  int alltoall_pairs = 0;
};
[[nodiscard]] IntraDomainPriorEstimate intra_domain_prior_from_published(const std::vector<PublishedRow>& rows);
// intra_domain_prior_from_published on the committed CSV, rounded to 3 decimals (a test checks them).
inline constexpr double kIntraLinkTimeLow = 1.004, kIntraLinkTimeHigh = 1.100;              // 8 groups
inline constexpr double kIntraAlltoallVsRingLow = 0.910, kIntraAlltoallVsRingHigh = 1.070;  // 6 pairs

// The cost of one network step of an unseen cluster's collectives, from the same rows: the
// latency-bound ones (<= 64 KiB, where a call is its steps' latencies) whose ranks span NVLink
// domains (ring / tree / NVLS collectives: the file has no all-to-all that small across domains),
// grouped by (cluster, nodes, GPUs per node). Per row, the extra cost per network step that would make
// the model's time the measured one, (measured − modelled) / network steps, the steps being what
// the model's time moves by per µs of collective_net_hop_extra_us (`calibrate --nccl-tests`'s
// parameter, the one a calibration from the user's own logs fixes); a group's median; the range
// the distribution-free rule above gives over the groups.
struct NetHopPriorEstimate {
  double extra_low_us = 0, extra_high_us = 0;  // per network step, beyond the model's
  int groups = 0;
};
[[nodiscard]] NetHopPriorEstimate net_hop_prior_from_published(const std::vector<PublishedRow>& rows);
// net_hop_prior_from_published on the committed CSV, rounded to 0.1 us (a test checks them).
inline constexpr double kNetHopExtraLowUs = -0.6, kNetHopExtraHighUs = 64.1;  // 8 groups

// (b) without a calibration's own leave-one-out: relative rms error per whatif metric of the
// seed calibration's leave-one-out (5 configurations; docs/calibration.md; a test recomputes it).
[[nodiscard]] const std::map<std::string, double>& default_model_error();

// The prior of a step-model parameter that no calibration fixes: its 90 % range, as a factor on
// the preset value (efficiencies, slowdowns; clamped to the parameter's bounds) or as absolute
// values (times whose preset is 0).
struct ParameterPrior {
  // the calibration parameter ("hbm_efficiency" for every class; "inter_node_link" for the NIC's
  // effective rate, held by a calibration holding nic_efficiency or alltoall_inter_efficiency;
  // "collective_net_hop_extra_us", held by a calibration from nccl-tests logs)
  std::string name;
  bool relative = true;
  double low = 1, high = 1;  // factors (relative) or values
  std::string evidence;      // where the range comes from (docs/calibration.md)
};
[[nodiscard]] const std::vector<ParameterPrior>& parameter_priors();

// A fit's parameter covariance C combined with the prior the fit ran under, a normal of variance
// prior_variance[i] per parameter (a uniform over its bounds has sd range/√12): (C⁻¹ + P⁻¹)⁻¹,
// computed as C − C (C + P)⁻¹ C so that a singular C (a pseudo-inverse's) needs no inverse. It
// shrinks what the data leave open towards the prior and keeps what they determine.
[[nodiscard]] Eigen::MatrixXd covariance_with_prior(const Eigen::MatrixXd& covariance,
                                                    const Eigen::VectorXd& prior_variance);

struct IntervalOptions {
  double fabric_spread = kPublishedFabricSpread;  // --fabric-spread (relative sd, >= 0)
  // --inter-node-prior LO,HI: the 90 % range of the inter-node link's time as a factor on the
  // assumed fabric's model, for a calibration without inter-node parameters (default: the
  // published clusters', kLinkTimeLow..kLinkTimeHigh).
  double link_time_low = kLinkTimeLow, link_time_high = kLinkTimeHigh;
  // --net-step-prior LO,HI: the 90 % range of the cost of one network step beyond the model's
  // (us), for a calibration without collective_net_hop_extra_us (default: the published
  // clusters', kNetHopExtraLowUs..kNetHopExtraHighUs).
  double net_step_low_us = kNetHopExtraLowUs, net_step_high_us = kNetHopExtraHighUs;
  // (b') the link's 90 % drift per √doubling of nodes beyond the calibration's (kNodeScaling).
  double node_scaling = kNodeScaling;
  // The largest node count of the calibration's runs; 0 = not known (a calibration file does not
  // record it): then 2 for a calibration holding inter-node parameters (the fewest it has seen)
  // or none, 1 for one without.
  int calibrated_nodes = 0;
  // (b) beyond calibrated_nodes: model-form error per whatif metric of the calibration's own
  // node-count extrapolation (extrapolation.hpp node_count_model_error); empty = not known, then
  // every metric there takes the largest time metric's leave-one-out error (the leave-one-out
  // has no cells at that node count, as for a metric without cells).
  std::map<std::string, double> beyond_model_error;
  // Step parameters the command line set (fwd_bwd_ms, rank_skew_ms, host_launch_us,
  // collective_hbm_slowdown): the user's value is an input, not uncertain.
  std::set<std::string> fixed;
};

// UsageError naming --fabric-spread for a spread outside [0, 1], --inter-node-prior for a range
// that is not 0 < LO <= HI <= 100, --net-step-prior for one that is not -2.5 <= LO <= HI <= 1000
// (the bounds `calibrate --nccl-tests` fits the parameter in), and a negative node_scaling.
void check_interval_options(const IntervalOptions& options);
// "LO,HI" of --inter-node-prior / --net-step-prior into options (UsageError naming the flag and
// the text).
void parse_inter_node_prior(const std::string& text, IntervalOptions& options);
void parse_net_step_prior(const std::string& text, IntervalOptions& options);
// The options a command line can set (--fabric-spread, --inter-node-prior, --net-step-prior) where
// they differ from the defaults, as JSON for a stored run's configuration (its hash: a run with
// other intervals is another run); null when all are the defaults.
[[nodiscard]] nlohmann::json interval_options_json(const IntervalOptions& options);

// Everything uncertain about predictions made with one calibration (or none).
struct Uncertainty {
  std::string calibration;  // its name; "" = none
  // (a) the fitted parameters (names of the calibration file) and their covariance
  std::map<std::string, double> parameters;
  std::vector<std::string> covariance_parameters;
  Eigen::MatrixXd covariance;
  std::vector<ParameterPrior> priors;         // parameters the calibration does not hold
  std::map<std::string, double> model_error;  // (b) whatif metric -> relative sd
  std::string model_error_source;
  double fabric_spread = kPublishedFabricSpread;  // (c)
  // (b) at nodes > calibrated_nodes: max(the metric's leave-one-out error, beyond_model_error's)
  int calibrated_nodes = 1;
  std::map<std::string, double> beyond_model_error;
  std::string beyond_model_error_source;
  // (b') at nodes > scaling_from_nodes, when the calibration holds inter-node parameters (0: no
  // such term — the link prior covers unseen node counts too).
  int scaling_from_nodes = 0;
  double node_scaling = kNodeScaling;
  std::set<std::string> fixed;
  std::vector<std::string> notes;  // what was widened and why (for stderr, once)
};
// `fitted` null: no calibration (or a kernel-calibration JSON, which carries no uncertainty).
[[nodiscard]] Uncertainty uncertainty_of(const Calibration* fitted, const IntervalOptions& options);

// The whatif metrics that get intervals (the times and the shares derived from them).
[[nodiscard]] const std::vector<std::string>& interval_metrics();
[[nodiscard]] bool has_interval_metric(const std::string& whatif_metric);

// Intervals of whatif predictions made with `calibration` (the kernel calibration whatif runs
// with; a calibrate file's parameters already applied) on GPU `hardware`.
class IntervalModel {
 public:
  IntervalModel(sim::KernelCalibration calibration, sim::Hardware hardware, Uncertainty uncertainty);
  // The interval of every interval_metrics() metric the configuration defines. `config` as whatif
  // ran it (calibration applied).
  [[nodiscard]] std::map<std::string, Interval> intervals(const sim::WhatifConfig& config,
                                                          const opt::Inventory& inventory) const;
  // a − b of every interval metric, both perturbed together (one node set: same fabric and
  // nodes; InputError otherwise).
  [[nodiscard]] std::map<std::string, Interval> differences(const sim::WhatifConfig& a, const sim::WhatifConfig& b,
                                                            const opt::Inventory& inventory) const;
  [[nodiscard]] const Uncertainty& uncertainty() const { return uncertainty_; }

 private:
  struct Source;
  using Perturbation = std::pair<const Source*, int>;  // a source and its side (-1, +1)
  [[nodiscard]] std::vector<Source> sources(const sim::WhatifConfig& config) const;
  // Applies one side of a source to the kernel calibration and the configurations; false when
  // that side is the central value itself.
  bool perturb(const Source& source, int side, sim::KernelCalibration& kc, std::vector<sim::WhatifConfig>& cs) const;
  // Every interval metric of every configuration with the perturbations applied in order; empty
  // when none changes anything (the central prediction). No perturbation: the central prediction.
  [[nodiscard]] std::vector<double> evaluate(const std::vector<sim::WhatifConfig>& configs, const opt::Inventory& inventory,
                                             const std::vector<Perturbation>& perturbations) const;
  sim::KernelCalibration calibration_;
  sim::Hardware hardware_;
  Uncertainty uncertainty_;
};

// <metric>_lo / <metric>_hi of every interval into a flat JSON row (beside <metric>).
void add_interval_json(nlohmann::json& row, const std::map<std::string, Interval>& intervals);
[[nodiscard]] nlohmann::json to_json(const Interval& interval);
// metric -> half the interval's width (for sim::table_row).
[[nodiscard]] std::map<std::string, double> half_widths(const std::map<std::string, Interval>& intervals);

}  // namespace dionsim::analysis
