#include "analysis/calibration/step_fit.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "analysis/calibration/parameters.hpp"
#include "common/config_match.hpp"
#include "common/error.hpp"
#include "optimizer/inventory.hpp"
#include "optimizer/plan.hpp"
#include "sim/whatif.hpp"
#include "sim/whatif_calibration.hpp"
#include "sim/whatif_metrics.hpp"
#include "topologies/topology.hpp"

namespace dionsim::analysis {

using nlohmann::json;

namespace {

constexpr const char* kHbmPrefix = "hbm_efficiency.";
constexpr const char* kKnownModels =
    "a model dionsim knows the inventory of: seed-5120x8, gpt-<h>x<L>, gpt-1b, gpt-14b or a .json inventory file";

// The kernel-model GPU preset and default fabric of a measured hardware label.
GpuPreset preset_of(const std::string& label, const std::string& where) {
  if (auto p = gpu_preset_of(label)) return *p;
  throw_bad_input(where, "hardware", label, known_gpu_labels());
}

// A free parameter of the fit; `classes` for an HBM-efficiency group.
// `variant`: the NS variant a kernel-rate parameter is fitted for ("" = every variant).
struct Param {
  std::string name, units;
  double lower = 0, upper = 0, start = 0;
  std::vector<std::string> classes;
  std::string variant;
};

// "@gram+triton" for a variant parameter, "" for a shared one.
std::string at_variant(const std::string& variant) { return variant.empty() ? "" : "@" + variant; }

class Predictor {
 public:
  Predictor(const std::vector<MeasuredConfiguration>& configurations, const StepFitOptions& options)
      : configs_(configurations) {
    if (configs_.empty()) throw InputError("calibrate: no measured configurations to fit");
    label_ = configs_.front().config.hardware;
    const std::string where = configs_.front().config.label();
    const GpuPreset preset = preset_of(label_, where);
    hardware_ = preset.hardware;
    fabric_ = options.fabric.empty() ? preset.fabric : options.fabric;
    fixed_ = options.fixed;
    hw_ = sim::hardware_preset(hardware_, "hardware");
    for (const auto& m : configs_) {  // one GPU for all, before anything else
      if (preset_of(m.config.hardware, m.config.label()).hardware != hardware_) {
        throw_bad_input(m.config.label(), "hardware", m.config.hardware,
                        "the GPU of the other selected runs (" + label_ + "); select one GPU with --where hardware=…");
      }
    }
    for (const auto& m : configs_) {
      const auto& c = m.config;
      const std::string at = c.label();
      // The variant keys the kernel rates; its numerics give the plan's NS FLOPs.
      const NsVariant variant = parse_ns_variant(c.ns, at);
      sim::WhatifConfig w;
      w.model = c.model;
      try {
        w.plan.optimizer = opt::parse_optimizer(c.optimizer, "optimizer");
        w.plan.ns = opt::parse_ns(variant.numerics, "ns");
        w.plan.scope = opt::parse_scope(c.scope, "scope");
      } catch (const UsageError& e) {
        throw InputError(at + ": " + e.what());
      }
      w.plan.fraction = c.fraction;
      w.plan.capacity_factor = c.scope == "global_capped" ? c.capacity_factor : std::nullopt;
      w.nodes = c.nodes;
      w.gpus_per_node = c.gpus_per_node;
      w.fabric = sim::resolve_fabric(fabric_, c.gpus_per_node);
      w.hardware = hardware_;
      w.tokens_per_gpu = options.tokens_per_gpu;
      if (!inventories_.contains(c.model)) {
        try {
          inventories_.emplace(c.model, opt::load_inventory(c.model));
        } catch (const UsageError&) {
          throw_bad_input(at, "model", c.model, kKnownModels);
        }
      }
      base_.push_back(std::move(w));
      // An optimizer step timed alone by the host (opt.step() of a benchmark, its time the only
      // metric: no training step around it, no kernel times) has no GPU work queued before it: the
      // host is not ahead, its launches can hold up the GPU. Runs with kernel times (dionsim
      // measure: CUDA events) keep the calibration's host-ahead reading.
      host_behind_.push_back(m.metrics.count("opt_step_ms") != 0 &&
                             std::none_of(m.metrics.begin(), m.metrics.end(), [](const auto& kv) {
                               return kv.first == "step_wall_ms" || kv.first == "step_gpu_ms" ||
                                      kv.first == "ns_gemm_ms" || kv.first == "non_gemm_ms" || kv.first == "a2a_ms" ||
                                      kv.first == "opt_gpu_ms";
                             }));
      variants_.push_back(variant.text());
      if (std::find(variant_list_.begin(), variant_list_.end(), variant.text()) == variant_list_.end())
        variant_list_.push_back(variant.text());
    }
  }

  // whatif's result of every configuration at these parameters (metrics: sim/whatif_metrics.hpp).
  [[nodiscard]] std::vector<sim::WhatifResult> predict(const std::map<std::string, double>& parameters) const {
    // One kernel model per NS variant: its own rates where the parameters have them.
    std::map<std::string, std::pair<sim::KernelCalibration, sim::KernelModel>> by_variant;
    // Measured parameters (traces, nccl-tests, anchors) are held at their values under the fitted ones.
    std::map<std::string, double> all = fixed_;
    for (const auto& [k, value] : parameters) all[k] = value;
    for (const auto& v : variant_list_) {
      auto cal = kernel_calibration_from_parameters("fit", label_, parameters_for_ns(all, v), hw_);
      sim::KernelModel kernels(cal.config, cal.measured);
      by_variant.emplace(v, std::pair{std::move(cal), std::move(kernels)});
    }
    std::vector<sim::WhatifResult> out;
    for (std::size_t i = 0; i < base_.size(); ++i) {
      const auto& [cal, kernels] = by_variant.at(variants_[i]);
      sim::WhatifConfig w = as_fitted(base_[i], host_behind_[i], cal);
      auto result = sim::run_whatif(w, inventories_.at(w.model), kernels);
      if (!collected_) collect_classes(result, i);
      out.push_back(std::move(result));
    }
    collected_ = true;
    return out;
  }

  // Non-GEMM kernel classes by the scopes that use them, per NS variant (filled by the first predict()).
  [[nodiscard]] std::map<std::string, std::map<std::string, std::set<std::string>>> classes() const {
    return classes_;
  }
  [[nodiscard]] const std::vector<MeasuredConfiguration>& configs() const { return configs_; }
  [[nodiscard]] const std::vector<std::string>& variants() const { return variant_list_; }
  [[nodiscard]] const std::string& hardware() const { return hardware_; }
  [[nodiscard]] const std::string& fabric() const { return fabric_; }
  [[nodiscard]] const std::string& label() const { return label_; }
  [[nodiscard]] const sim::Hardware& hw() const { return hw_; }
  [[nodiscard]] const std::vector<sim::WhatifConfig>& base() const { return base_; }
  [[nodiscard]] const std::vector<bool>& host_behind() const { return host_behind_; }
  [[nodiscard]] const std::map<std::string, opt::Inventory>& inventories() const { return inventories_; }

 private:
  void collect_classes(const sim::WhatifResult& result, std::size_t index) const {
    for (const auto& e : result.opt.events) {
      if (e.stream == sim::StreamKind::compute && e.name != "ns_gemm")
        classes_[variants_[index]][e.name].insert(configs_[index].config.scope);
    }
  }

  std::vector<MeasuredConfiguration> configs_;
  std::vector<sim::WhatifConfig> base_;
  std::map<std::string, opt::Inventory> inventories_;
  std::vector<std::string> variants_;      // of each configuration
  std::vector<bool> host_behind_;          // of each configuration: an optimizer step timed alone
  std::vector<std::string> variant_list_;  // distinct, in order of first appearance
  std::string label_, hardware_, fabric_;
  std::map<std::string, double> fixed_;
  sim::Hardware hw_;
  mutable std::map<std::string, std::map<std::string, std::set<std::string>>> classes_;
  mutable bool collected_ = false;
};

double metric_value(const sim::WhatifResult& predicted, const std::string& name) {
  return sim::metric_value(predicted, name).value_or(std::nan(""));
}

// Residual layout: (configuration, metric) of every fitted measured metric.
struct Residuals {
  std::vector<std::pair<std::size_t, const StepMetric*>> cells;
  std::vector<double> measured;
};

Residuals residual_cells(const std::vector<MeasuredConfiguration>& configs) {
  Residuals r;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    for (const auto& m : step_metrics()) {
      if (!m.fitted) continue;
      const auto it = configs[i].metrics.find(m.measured);
      if (it == configs[i].metrics.end() || !(it->second > 0.0)) continue;
      r.cells.emplace_back(i, &m);
      r.measured.push_back(it->second);
    }
  }
  return r;
}

std::map<std::string, double> expand(const std::vector<Param>& params, const Eigen::VectorXd& theta) {
  std::map<std::string, double> out{{"launch_gap_us", 0.0}};
  for (std::size_t j = 0; j < params.size(); ++j) {
    const double v = theta[static_cast<Eigen::Index>(j)];
    if (params[j].classes.empty()) {
      out[params[j].name] = v;
    } else {
      for (const auto& c : params[j].classes) out[kHbmPrefix + c + at_variant(params[j].variant)] = v;
    }
  }
  return out;
}

}  // namespace

const std::vector<StepMetric>& step_metrics() {
  static const std::vector<StepMetric> metrics = {
      {"step_wall_ms", "step_wall_ms", true},
      {"opt_gpu_window_ms", "opt_wall_ms", true},
      {"opt_stream_window_ms", "opt_comm_window_ms", true},
      {"opt_wall_ms", "opt_wall_ms", true},
      {"opt_step_ms", "opt_wall_ms", true},
      {"a2a_ms", "a2a_ms", true},
      {"ns_gemm_ms", "ns_gemm_ms", true},
      {"opt_window_gemm_ms", "ns_gemm_ms", true},
      {"non_gemm_ms", "non_gemm_ms", true},
      {"opt_gpu_ms", "opt_gpu_ms", true},
      {"opt_cpu_span_ms", "opt_cpu_span_ms", true},
      {"opt_gpu_idle_pct", "opt_gpu_idle_pct", false},
      {"mfu_pct", "mfu_pct", false},
      {"a2a_payload_MB", "a2a_payload_MB", false},
      {"opt_kernel_launches", "opt_kernel_launches", false},
  };
  return metrics;
}

const std::string& predicted_metric(const MeasuredConfiguration& configuration, const StepMetric& metric) {
  // A run's idle share is relative to the window it measured: the collective stream's for a run
  // that reports `opt_stream_window_ms` (the seed's 2-node runs: 1 − opt_gpu_ms / that window).
  static const std::string idle_of_comm_window = "opt_gpu_idle_comm_window_pct";
  if (metric.measured == "opt_gpu_idle_pct" && configuration.metrics.count("opt_stream_window_ms") != 0 &&
      configuration.metrics.count("opt_gpu_window_ms") == 0) {
    return idle_of_comm_window;
  }
  return metric.predicted;
}

std::vector<MeasuredConfiguration> select_configurations(const std::vector<MeasuredConfiguration>& all,
                                                         const std::vector<std::string>& where, const std::string& source) {
  std::map<std::string, std::vector<ConfigMatch>> by_key;
  for (const auto& w : where) {
    const auto m = ConfigMatch::parse(w);
    by_key[m.key].push_back(m);
  }
  std::vector<MeasuredConfiguration> out;
  for (const auto& c : all) {
    const json j = to_json(c);
    bool ok = true;
    for (const auto& [key, alternatives] : by_key) {
      if (!std::any_of(alternatives.begin(), alternatives.end(), [&](const ConfigMatch& m) { return m.matches(j); }))
        ok = false;
    }
    if (ok) out.push_back(c);
  }
  if (out.empty()) {
    std::string conditions;
    for (const auto& w : where) conditions += (conditions.empty() ? "" : " ") + w;
    // What there is to select: the values of the keys asked about (a CSV whose header has two
    // columns swapped shows it here).
    std::string there;
    for (const auto& [key, alternatives] : by_key) {
      std::set<std::string> values;
      for (const auto& c : all) {
        const json j = to_json(c);
        if (j.contains(key)) values.insert(j.at(key).is_string() ? j.at(key).get<std::string>() : j.at(key).dump());
      }
      std::string list;
      int shown = 0;
      for (const auto& v : values) {
        if (shown++ == 8) {
          list += ", …";
          break;
        }
        list += (list.empty() ? "" : ", ") + v;
      }
      there += (there.empty() ? "" : "; ") + key + ": " + (values.empty() ? "no such column" : list);
    }
    throw_bad_input("--where", "", conditions,
                    "conditions that select at least one measured configuration" +
                        (source.empty() ? std::string() : " of " + source) + " (" + there + ")");
  }
  return out;
}





StepFitResult fit_step_model(const std::vector<MeasuredConfiguration>& configurations, const StepFitOptions& options) {
  const Predictor predictor(configurations, options);
  const Residuals cells = residual_cells(predictor.configs());
  const auto n = static_cast<Eigen::Index>(cells.cells.size());

  // Candidate parameters: the table's fitted rows in its order, fwd_bwd_ms started at the runs'
  // step wall minus their optimizer window, the HBM family as one parameter per group of kernel
  // classes used by the same scopes (a first prediction finds them).
  std::vector<Param> params;
  double fwd_start = 0;
  int fwd_count = 0;
  for (const auto& c : predictor.configs()) {
    const auto s = c.metrics.find("step_wall_ms");
    if (s == c.metrics.end()) continue;
    double opt = 0;
    for (const char* k : {"opt_gpu_window_ms", "opt_stream_window_ms", "opt_wall_ms"}) {
      if (c.metrics.count(k)) opt = c.metrics.at(k);
    }
    fwd_start += s->second - opt;
    ++fwd_count;
  }
  std::map<std::string, double> probe{{"launch_gap_us", 0.0}, {"fwd_bwd_ms", 400.0}};
  (void)predictor.predict(probe);
  // Kernel rates are per NS variant when the runs have several (docs/calibration.md, "NS variants"):
  // "gram+triton" has gram's FLOPs but its own kernels.
  const std::vector<std::string> kernel_variants =
      predictor.variants().size() > 1 ? predictor.variants() : std::vector<std::string>{""};
  for (const auto& spec : calibration_parameters()) {
    if (!spec.fit) continue;
    const FitBounds& b = *spec.fit;
    if (!spec.family()) {
      double start = b.start;
      if (spec.name == "fwd_bwd_ms" && fwd_count) start = std::max(1.0, fwd_start / fwd_count);
      // Per implementation: its NS kernel rate and its host cost per launch.
      if (spec.name == "ns_gemm_efficiency" || spec.name == "host_launch_us") {
        for (const auto& v : kernel_variants)
          params.push_back({std::string(spec.name) + at_variant(v), std::string(spec.unit), b.lower, b.upper, start, {}, v});
        continue;
      }
      params.push_back({std::string(spec.name), std::string(spec.unit), b.lower, b.upper, start, {}, ""});
      continue;
    }
    for (const auto& v : kernel_variants) {
      std::map<std::set<std::string>, std::vector<std::string>> groups;
      const auto all = predictor.classes();
      const auto of_variant = all.find(v.empty() ? predictor.variants().front() : v);
      if (of_variant == all.end()) continue;
      // Runs that time only the whole optimizer step (no kernel-time metric) cannot tell kernel
      // classes apart: their non-GEMM classes share one efficiency.
      const bool breakdown = std::any_of(predictor.configs().begin(), predictor.configs().end(), [&](const auto& m) {
        if (!v.empty() && parse_ns_variant(m.config.ns, m.config.label()).text() != v) return false;
        return m.metrics.count("non_gemm_ms") + m.metrics.count("ns_gemm_ms") + m.metrics.count("opt_window_gemm_ms") +
                   m.metrics.count("opt_gpu_ms") !=
               0;
      });
      for (const auto& [cls, scopes] : of_variant->second)
        groups[breakdown ? scopes : std::set<std::string>{}].push_back(cls);
      for (const auto& [scopes, classes] : groups) {
        std::string name = kHbmPrefix;
        for (std::size_t k = 0; k < classes.size(); ++k) name += (k ? "+" : "") + classes[k];
        params.push_back({name + at_variant(v), std::string(spec.unit), b.lower, b.upper, b.start, classes, v});
      }
    }
  }

  auto theta_of = [&](const std::vector<Param>& ps) {
    Eigen::VectorXd t(static_cast<Eigen::Index>(ps.size()));
    for (std::size_t j = 0; j < ps.size(); ++j) t[static_cast<Eigen::Index>(j)] = ps[j].start;
    return t;
  };
  auto residuals = [&](const std::vector<Param>& ps, const Eigen::VectorXd& theta) {
    const auto predicted = predictor.predict(expand(ps, theta));
    Eigen::VectorXd r(n);
    for (Eigen::Index i = 0; i < n; ++i) {
      const auto& [config, metric] = cells.cells[static_cast<std::size_t>(i)];
      const double p = metric_value(predicted[config], predicted_metric(predictor.configs()[config], *metric));
      r[i] = (p - cells.measured[static_cast<std::size_t>(i)]) / cells.measured[static_cast<std::size_t>(i)];
    }
    return r;
  };
  auto bounds = [](const std::vector<Param>& ps) {
    Eigen::VectorXd lo(static_cast<Eigen::Index>(ps.size())), hi(static_cast<Eigen::Index>(ps.size()));
    for (std::size_t j = 0; j < ps.size(); ++j) {
      lo[static_cast<Eigen::Index>(j)] = ps[j].lower;
      hi[static_cast<Eigen::Index>(j)] = ps[j].upper;
    }
    return std::pair{lo, hi};
  };
  // The simulator is smooth only at the scale of its integer nanoseconds: steps of 1e-3 of the
  // parameter (at least 1 % of its range), a gentle damping schedule, and a crawl along a nearly
  // flat valley (weakly separated HBM groups) — under 0.02 % of the cost gained over 10 iterations
  // — taken as the minimum it is for every practical purpose.
  LeastSquaresOptions lm;
  lm.max_iterations = options.max_iterations;
  lm.attempts = 12;
  lm.initial_damping = 1e-2;
  lm.damping_down = 3.0;
  lm.damping_up = 4.0;
  lm.min_damping = 1e-9;
  lm.damping_floor = 1e-12;
  lm.relative_cost_tolerance = 1e-7;
  lm.absolute_cost_tolerance = 1e-14;
  lm.relative_step_tolerance = 0.0;
  lm.plateau_window = 10;
  lm.plateau_gain = 2e-4;
  lm.jacobian_step = 1e-3;
  lm.jacobian_range_floor = 0.01;
  auto jacobian = [&](const std::vector<Param>& ps, const Eigen::VectorXd& theta) {
    const auto [lo, hi] = bounds(ps);
    return central_jacobian([&](const Eigen::VectorXd& t) { return residuals(ps, t); }, theta, lo, hi, lm);
  };

  // A parameter held at a measured value is not fitted.
  params.erase(std::remove_if(params.begin(), params.end(), [&](const Param& q) { return options.fixed.contains(q.name); }),
               params.end());
  // Parameters the selected runs do not constrain are left out.
  StepFitResult fit;
  fit.hardware = predictor.hardware();
  fit.hardware_label = predictor.label();
  fit.fabric = predictor.fabric();
  fit.ns_variants = predictor.variants();
  {
    const auto J0 = jacobian(params, theta_of(params));
    std::vector<Param> kept;
    for (std::size_t j = 0; j < params.size(); ++j) {
      const double scale = std::max(std::abs(params[j].start), 0.01 * (params[j].upper - params[j].lower));
      if (J0.col(static_cast<Eigen::Index>(j)).norm() * scale < 1e-6)
        fit.unconstrained.push_back(params[j].name);
      else
        kept.push_back(params[j]);
    }
    params = kept;
  }
  const auto p = static_cast<Eigen::Index>(params.size());
  if (n <= p) {
    throw_bad_input("calibrate", "measured metrics", std::to_string(n),
                    "more fitted metrics than free parameters (" + std::to_string(p) + ")");
  }

  const auto [lower, upper] = bounds(params);
  const auto solve = [&](const std::vector<Param>& ps) {
    return minimize_least_squares([&](const Eigen::VectorXd& t) { return residuals(ps, t); }, theta_of(ps), lower,
                                  upper, lm, "calibrate");
  };
  auto solution = solve(params);
  // The inter-node all-to-all depends on nic_efficiency x alltoall_inter_efficiency, FSDP's
  // collectives on the NIC alone: a curved valley along which the damped steps stall (on the
  // seed's runs from 0.7 anywhere in 0.35-0.63, within about one standard error). A second start
  // at a slow NIC, the lower cost kept, reaches its floor (docs/calibration.md).
  const auto nic = std::find_if(params.begin(), params.end(), [](const Param& q) { return q.name == "nic_efficiency"; });
  if (nic != params.end()) {
    auto slow = params;
    slow[static_cast<std::size_t>(nic - params.begin())].start = 0.4;
    auto other = solve(slow);
    if (other.cost < solution.cost) solution = std::move(other);
  }
  const Eigen::VectorXd& theta = solution.theta;
  const double cost = solution.cost;
  fit.iterations = solution.iterations;
  fit.converged = solution.converged;

  // Covariance over the parameters inside their bounds (those on a bound are held there).
  const Eigen::MatrixXd J = jacobian(params, theta);
  std::vector<Eigen::Index> free;
  for (Eigen::Index j = 0; j < p; ++j) {
    const auto& q = params[static_cast<std::size_t>(j)];
    const double tol = 1e-6 * (q.upper - q.lower);
    if (theta[j] <= q.lower + tol || theta[j] >= q.upper - tol)
      fit.at_bound.push_back(q.name);
    else
      free.push_back(j);
  }
  fit.covariance = Eigen::MatrixXd::Zero(p, p);
  const auto dof = static_cast<double>(n - static_cast<Eigen::Index>(free.size()));
  if (!free.empty()) {
    Eigen::MatrixXd Jf(n, static_cast<Eigen::Index>(free.size()));
    for (std::size_t k = 0; k < free.size(); ++k) Jf.col(static_cast<Eigen::Index>(k)) = J.col(free[k]);
    Eigen::VectorXd scale = Jf.colwise().norm().transpose();
    for (Eigen::Index k = 0; k < scale.size(); ++k) scale[k] = scale[k] > 0 ? 1.0 / scale[k] : 1.0;
    const Eigen::MatrixXd Js = Jf * scale.asDiagonal();
    const Eigen::MatrixXd inv = (Js.transpose() * Js).completeOrthogonalDecomposition().pseudoInverse();
    const Eigen::MatrixXd cov = scale.asDiagonal() * inv * scale.asDiagonal() * (cost / dof);
    for (std::size_t a = 0; a < free.size(); ++a)
      for (std::size_t b = 0; b < free.size(); ++b)
        fit.covariance(free[a], free[b]) = cov(static_cast<Eigen::Index>(a), static_cast<Eigen::Index>(b));
  }
  fit.values = theta;
  fit.std_errors = fit.covariance.diagonal().cwiseMax(0.0).cwiseSqrt();
  for (const auto& q : params) {
    fit.names.push_back(q.name);
    fit.units.push_back(q.units);
    std::vector<std::string> sets;
    for (const auto& c : q.classes) sets.push_back(kHbmPrefix + c + at_variant(q.variant));
    if (sets.empty()) sets.push_back(q.name);
    fit.sets.push_back(std::move(sets));
  }
  fit.parameters = expand(params, theta);
  fit.residuals = static_cast<int>(n);
  fit.rms_relative_error = std::sqrt(cost / static_cast<double>(n));
  return fit;
}

RunsByHardware split_by_hardware(const std::vector<MeasuredConfiguration>& configurations) {
  RunsByHardware out;
  std::map<std::string, bool> loadable;  // model -> known inventory (each loaded once)
  for (const auto& m : configurations) {
    const auto& c = m.config;
    const std::string at = c.label();
    try {
      const GpuPreset gpu = preset_of(c.hardware, at);
      const NsVariant ns = parse_ns_variant(c.ns, at);
      try {
        (void)opt::parse_optimizer(c.optimizer, "optimizer");
        (void)opt::parse_ns(ns.numerics, "ns");
        (void)opt::parse_scope(c.scope, "scope");
      } catch (const UsageError& e) {
        throw InputError(at + ": " + e.what());
      }
      if (!loadable.contains(c.model)) {
        try {
          (void)opt::load_inventory(c.model);
          loadable[c.model] = true;
        } catch (const UsageError&) {
          throw_bad_input(at, "model", c.model, kKnownModels);
        }
      }
      const bool fitted = std::any_of(step_metrics().begin(), step_metrics().end(), [&](const StepMetric& s) {
        const auto it = m.metrics.find(s.measured);
        return s.fitted && it != m.metrics.end() && it->second > 0.0;
      });
      if (!fitted) {
        std::string has;
        for (const auto& [k, v] : m.metrics) has += (has.empty() ? "" : ", ") + k;
        throw_bad_input(at, "metrics", has, "at least one metric the step model fits (docs/calibration.md)");
      }
      auto it = std::find_if(out.hardware.begin(), out.hardware.end(),
                             [&](const HardwareRuns& h) { return h.hardware == gpu.hardware; });
      if (it == out.hardware.end()) it = out.hardware.insert(out.hardware.end(), HardwareRuns{gpu.hardware, {}});
      it->configurations.push_back(m);
    } catch (const InputError& e) {
      out.skipped.push_back({at, c.hardware, e.what()});
    }
  }
  return out;
}

StepCalibrations calibrate_by_hardware(const std::vector<MeasuredConfiguration>& selected, const std::string& name,
                                       const std::vector<std::string>& sources, const std::string& tool,
                                       const StepFitOptions& options, const std::vector<Calibration>& measured) {
  const RunsByHardware split = split_by_hardware(selected);
  std::set<std::string> gpus;
  for (const auto& m : selected) {
    const auto gpu = gpu_preset_of(m.config.hardware);
    gpus.insert(gpu ? gpu->hardware : m.config.hardware);
  }
  StepCalibrations out;
  out.skipped = split.skipped;
  // Each measured calibration joins the fit of its GPU.
  for (const auto& m : measured) {
    const auto gpu = gpu_preset_of(m.hardware);
    const bool joins = gpu && std::any_of(split.hardware.begin(), split.hardware.end(),
                                          [&](const HardwareRuns& h) { return h.hardware == gpu->hardware; });
    if (!joins) {
      throw_bad_input(m.sources.empty() ? m.name : m.sources.front(), "hardware", m.hardware,
                      "the GPU of a selected measured run (its parameters join that GPU's step-model fit)");
    }
  }
  for (const auto& h : split.hardware) {
    try {
      HardwareCalibration c;
      StepFitOptions o = options;
      std::vector<std::string> all_sources = sources;
      std::map<std::string, std::pair<CalibrationParameter, std::string>> held;  // name -> (value, source)
      for (const auto& m : measured) {
        if (gpu_preset_of(m.hardware)->hardware != h.hardware) continue;
        for (const auto& src : m.sources) all_sources.push_back(src);
        for (const auto& [pname, p] : m.parameters) {
          if (held.contains(pname)) {
            throw_bad_input(m.sources.empty() ? m.name : m.sources.front(), "parameters", pname,
                            "each measured parameter from one input (also in " + held.at(pname).second + ")");
          }
          held[pname] = {p, m.sources.empty() ? m.name : m.sources.front()};
          o.fixed[pname] = p.value;
        }
      }
      c.fit = fit_step_model(h.configurations, o);
      c.calibration =
          calibration_from_step_fit(c.fit, gpus.size() > 1 ? name + "-" + h.hardware : name, all_sources, tool);
      if (!held.empty()) {
        c.calibration.method += "; held at their measured values (not fitted):";
        for (const auto& [pname, p] : held) {
          c.calibration.parameters[pname] = p.first;
          c.calibration.method += " " + pname;
        }
      }
      c.in_sample = compare_predictions(h.configurations, c.fit.parameters, o);
      out.fitted.push_back(std::move(c));
    } catch (const InputError& e) {
      for (const auto& m : h.configurations)
        out.skipped.push_back({m.config.label(), m.config.hardware, std::string("the fit of ") + h.hardware + ": " + e.what()});
    }
  }
  if (out.fitted.empty()) {
    const auto& first = out.skipped.front();
    throw InputError(first.reason + " (" + std::to_string(out.skipped.size()) +
                     " selected configurations skipped, none can be fitted)");
  }
  return out;
}

json to_json(const SkippedConfiguration& s) {
  return {{"configuration", s.configuration}, {"hardware", s.hardware}, {"reason", s.reason}};
}

Calibration calibration_from_step_fit(const StepFitResult& fit, const std::string& name,
                                      const std::vector<std::string>& sources, const std::string& tool) {
  std::string variants;
  for (const auto& v : fit.ns_variants) variants += (variants.empty() ? "" : ", ") + v;
  Calibration c;
  c.name = name;
  c.hardware = fit.hardware_label;
  c.fabric = fit.fabric;
  c.sources = sources;
  c.tool = tool;
  c.method =
      "step model (dionsim whatif) fitted to measured metrics: least squares on relative residuals, bounded "
      "Levenberg-Marquardt with central-difference Jacobians; covariance sigma^2 (J^T J)^-1 (parameters on a "
      "bound held); launch_gap_us fixed at 0; runs modelled on " + fit.fabric + "; NS variants " + variants + "; " +
      std::to_string(fit.residuals) + " residuals, rms relative error " + std::to_string(fit.rms_relative_error);
  c.parameters["launch_gap_us"] = {0.0, 0.0, "us"};
  // Expanded names -> index of the fitted parameter.
  std::vector<std::pair<std::string, Eigen::Index>> rows;
  for (std::size_t j = 0; j < fit.names.size(); ++j) {
    const auto J = static_cast<Eigen::Index>(j);
    if (j >= fit.sets.size()) {
      rows.emplace_back(fit.names[j], J);
      continue;
    }
    for (const auto& set : fit.sets[j]) rows.emplace_back(set, J);
  }
  c.covariance = Eigen::MatrixXd(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(rows.size()));
  for (std::size_t a = 0; a < rows.size(); ++a) {
    const auto j = rows[a].second;
    c.parameters[rows[a].first] = {fit.values[j], fit.std_errors[j], fit.units[static_cast<std::size_t>(j)]};
    c.covariance_parameters.push_back(rows[a].first);
    for (std::size_t b = 0; b < rows.size(); ++b)
      c.covariance(static_cast<Eigen::Index>(a), static_cast<Eigen::Index>(b)) = fit.covariance(j, rows[b].second);
  }
  return c;
}

const StepMetric* find_step_metric(const std::string& measured) {
  for (const auto& m : step_metrics())
    if (m.measured == measured) return &m;
  return nullptr;
}

StepModelSetup step_model_setup(const std::vector<MeasuredConfiguration>& configurations,
                                const StepFitOptions& options) {
  const Predictor predictor(configurations, options);
  return {predictor.hardware(), predictor.label(), predictor.hw(), predictor.base(), predictor.inventories(),
          predictor.host_behind()};
}

sim::WhatifConfig as_fitted(sim::WhatifConfig config, bool host_behind, const sim::KernelCalibration& calibration) {
  (void)sim::apply_step_calibration(calibration.step, config);
  if (host_behind) config.host_ahead = false;
  // An all-to-all measured at this world (nccl-tests, anchors) is replayed, as whatif does.
  const auto pinned = calibration.alltoall_algbw_GBps_by_world.find(config.shard_world());
  if (pinned != calibration.alltoall_algbw_GBps_by_world.end() && !config.alltoall_algbw_GBps)
    config.alltoall_algbw_GBps = pinned->second;
  if (!config.fwd_bwd_ms) config.fwd_bwd_ms = 400.0;  // no step wall selected: it does not matter
  return config;
}

std::vector<PredictionRow> compare_predictions(const std::vector<MeasuredConfiguration>& configurations,
                                               const std::map<std::string, double>& parameters,
                                               const StepFitOptions& options) {
  const Predictor predictor(configurations, options);
  const auto predicted = predictor.predict(parameters);
  std::vector<PredictionRow> rows;
  for (std::size_t i = 0; i < configurations.size(); ++i) {
    const auto& c = configurations[i];
    for (const auto& m : step_metrics()) {
      const auto it = c.metrics.find(m.measured);
      if (it == c.metrics.end()) continue;
      PredictionRow row{c.config.label(),
                        c.config.scope,
                        c.config.nodes,
                        m.measured,
                        it->second,
                        metric_value(predicted[i], predicted_metric(c, m)),
                        0.0,
                        m.fitted};
      row.error_pct = it->second != 0.0 ? 100.0 * (row.predicted - row.measured) / row.measured : 0.0;
      rows.push_back(row);
    }
  }
  return rows;
}

std::vector<MetricSummary> summarize(const std::vector<PredictionRow>& rows) {
  std::vector<MetricSummary> out;
  for (const auto& m : step_metrics()) {
    MetricSummary s{m.measured, 0, 0.0, 0.0};
    for (const auto& r : rows) {
      if (r.metric != m.measured || !std::isfinite(r.error_pct)) continue;
      ++s.count;
      s.mean_abs_error_pct += std::abs(r.error_pct);
      s.max_abs_error_pct = std::max(s.max_abs_error_pct, std::abs(r.error_pct));
    }
    if (s.count == 0) continue;
    s.mean_abs_error_pct /= s.count;
    out.push_back(s);
  }
  return out;
}

std::vector<PredictionRow> leave_one_out(const std::vector<MeasuredConfiguration>& configurations,
                                         const StepFitOptions& options) {
  if (configurations.size() < 2)
    throw_bad_input("validate", "configurations", std::to_string(configurations.size()),
                    "at least two measured configurations (one is held out)");
  std::vector<PredictionRow> rows;
  for (std::size_t k = 0; k < configurations.size(); ++k) {
    std::vector<MeasuredConfiguration> train;
    for (std::size_t i = 0; i < configurations.size(); ++i)
      if (i != k) train.push_back(configurations[i]);
    const auto fit = fit_step_model(train, options);
    for (auto& row : compare_predictions({configurations[k]}, fit.parameters, options)) rows.push_back(row);
  }
  return rows;
}


json to_json(const PredictionRow& r) {
  return {{"configuration", r.configuration},
          {"scope", r.scope},
          {"nodes", r.nodes},
          {"metric", r.metric},
          {"measured", r.measured},
          {"predicted", r.predicted},
          {"error_pct", r.error_pct},
          {"fitted_metric", r.fitted}};
}

json to_json(const MetricSummary& s) {
  return {{"metric", s.metric},
          {"count", s.count},
          {"mean_abs_error_pct", s.mean_abs_error_pct},
          {"max_abs_error_pct", s.max_abs_error_pct}};
}

}  // namespace dionsim::analysis
