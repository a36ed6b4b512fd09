#include "analysis/calibration/fit.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"

namespace dionsim::analysis {

namespace {

Eigen::VectorXd default_weights(const Eigen::VectorXd& weights, Eigen::Index n, const std::string& what) {
  if (weights.size() == 0) return Eigen::VectorXd::Ones(n);
  if (weights.size() != n) {
    throw InputError(what + ": weights: got " + std::to_string(weights.size()) + " values, expected " +
                     std::to_string(n));
  }
  for (Eigen::Index i = 0; i < n; ++i) {
    if (!std::isfinite(weights[i]) || weights[i] < 0) {
      throw_bad_input(what, "weight " + std::to_string(i), std::to_string(weights[i]), "a finite number >= 0");
    }
  }
  return weights;
}

// Fills covariance, errors, σ̂² and R² of a fit whose params and residuals are set.
void finish_statistics(LinearFit& fit, const Eigen::MatrixXd& jacobian, const Eigen::VectorXd& y,
                       const Eigen::VectorXd& w, const std::string& what) {
  const auto n = jacobian.rows();
  const auto p = jacobian.cols();
  fit.dof = static_cast<int>(n - p);
  const double weighted_ss = (w.array() * fit.residuals.array().square()).sum();
  fit.sigma2 = fit.dof > 0 ? weighted_ss / fit.dof : 0.0;
  // Columns are scaled to unit norm first: inputs like FLOPs (1e12) next to a constant column would
  // otherwise make the normal matrix look singular to any fixed threshold.
  const Eigen::MatrixXd a = w.cwiseSqrt().asDiagonal() * jacobian;
  const Eigen::VectorXd scale = a.colwise().norm().transpose().cwiseMax(1e-300).cwiseInverse();
  const Eigen::MatrixXd scaled = a * scale.asDiagonal();
  const Eigen::FullPivLU<Eigen::MatrixXd> lu(scaled.transpose() * scaled);
  if (!lu.isInvertible()) {
    throw InputError(what + ": the data do not determine all " + std::to_string(p) +
                     " parameters (singular normal matrix); expected points that vary in every input");
  }
  fit.covariance = fit.sigma2 * scale.asDiagonal() * lu.inverse() * scale.asDiagonal();
  fit.std_errors = fit.covariance.diagonal().cwiseMax(0.0).cwiseSqrt();
  const double wsum = w.sum();
  const double mean = wsum > 0 ? (w.array() * y.array()).sum() / wsum : 0.0;
  const double total_ss = (w.array() * (y.array() - mean).square()).sum();
  fit.r_squared = total_ss > 0 ? 1.0 - weighted_ss / total_ss : 1.0;
}

void require_points(Eigen::Index n, Eigen::Index p, const std::string& what) {
  if (n <= p) {
    throw InputError(what + ": got " + std::to_string(n) + " points, expected more than " + std::to_string(p) +
                     " (one per parameter plus at least one to estimate the error)");
  }
}

double max_relative_residual(const Eigen::VectorXd& residuals, const Eigen::VectorXd& y) {
  double worst = 0;
  for (Eigen::Index i = 0; i < y.size(); ++i) worst = std::max(worst, std::abs(residuals[i] / y[i]));
  return worst;
}

// 1/β with its delta-method error, scaled: value = scale / β.
Estimate reciprocal(double beta, double beta_se, double scale) {
  const double value = scale / beta;
  return Estimate{value, std::abs(value) * beta_se / std::abs(beta)};
}

}  // namespace

LinearFit fit_weighted_linear(const Eigen::MatrixXd& design, const Eigen::VectorXd& y, const Eigen::VectorXd& weights,
                              const std::string& what) {
  if (design.rows() != y.size()) {
    throw InputError(what + ": got " + std::to_string(design.rows()) + " design rows for " + std::to_string(y.size()) +
                     " observations, expected equal counts");
  }
  require_points(design.rows(), design.cols(), what);
  if (!design.allFinite() || !y.allFinite()) {
    throw InputError(what + ": got a non-finite input value, expected finite numbers");
  }
  const Eigen::VectorXd w = default_weights(weights, y.size(), what);
  const Eigen::VectorXd sw = w.cwiseSqrt();
  const Eigen::MatrixXd a = sw.asDiagonal() * design;
  // Unit-norm columns so that the rank decision does not depend on the inputs' units.
  const Eigen::VectorXd scale = a.colwise().norm().transpose().cwiseMax(1e-300).cwiseInverse();
  const Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(a * scale.asDiagonal());
  if (qr.rank() < design.cols()) {
    throw InputError(what + ": the data do not determine all " + std::to_string(design.cols()) + " parameters (rank " +
                     std::to_string(qr.rank()) + "); expected points that vary in every input");
  }
  LinearFit fit;
  fit.params = scale.asDiagonal() * qr.solve(sw.asDiagonal() * y);
  fit.residuals = y - design * fit.params;
  finish_statistics(fit, design, y, w, what);
  return fit;
}

NonlinearFit fit_levenberg_marquardt(const ModelFunction& model, const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                     const Eigen::VectorXd& start, const Eigen::VectorXd& weights, int max_iterations,
                                     const std::string& what) {
  const Eigen::Index n = y.size();
  const Eigen::Index p = start.size();
  if (x.rows() != n) {
    throw InputError(what + ": got " + std::to_string(x.rows()) + " input rows for " + std::to_string(n) +
                     " observations, expected equal counts");
  }
  require_points(n, p, what);
  const Eigen::VectorXd w = default_weights(weights, n, what);

  auto residuals_at = [&](const Eigen::VectorXd& params) {
    Eigen::VectorXd r(n);
    for (Eigen::Index i = 0; i < n; ++i) r[i] = y[i] - model(params, x.row(i).transpose());
    return r;
  };
  auto jacobian_at = [&](const Eigen::VectorXd& params) {  // d model / d params
    Eigen::MatrixXd j(n, p);
    for (Eigen::Index k = 0; k < p; ++k) {
      const double h = 1e-6 * std::max(std::abs(params[k]), 1e-8);
      Eigen::VectorXd up = params, down = params;
      up[k] += h;
      down[k] -= h;
      for (Eigen::Index i = 0; i < n; ++i) {
        j(i, k) = (model(up, x.row(i).transpose()) - model(down, x.row(i).transpose())) / (2 * h);
      }
    }
    return j;
  };
  auto cost_of = [&](const Eigen::VectorXd& r) { return (w.array() * r.array().square()).sum(); };

  NonlinearFit fit;
  Eigen::VectorXd params = start;
  Eigen::VectorXd r = residuals_at(params);
  if (!r.allFinite()) throw InputError(what + ": the model is not finite at the starting parameters");
  double cost = cost_of(r);
  double lambda = 1e-3;
  for (fit.iterations = 0; fit.iterations < max_iterations; ++fit.iterations) {
    const Eigen::MatrixXd j = jacobian_at(params);
    const Eigen::MatrixXd jtwj = j.transpose() * w.asDiagonal() * j;
    const Eigen::VectorXd gradient = j.transpose() * (w.asDiagonal() * r);
    bool improved = false;
    for (int attempt = 0; attempt < 30 && !improved; ++attempt) {
      Eigen::MatrixXd damped = jtwj;
      damped.diagonal() += lambda * jtwj.diagonal().cwiseMax(1e-30);
      const Eigen::VectorXd step = damped.ldlt().solve(gradient);
      const Eigen::VectorXd trial = params + step;
      const Eigen::VectorXd trial_r = residuals_at(trial);
      const double trial_cost = trial_r.allFinite() ? cost_of(trial_r) : INFINITY;
      if (trial_cost < cost) {
        const double rel_step = step.norm() / std::max(params.norm(), 1e-30);
        const double rel_cost = (cost - trial_cost) / std::max(cost, 1e-300);
        params = trial;
        r = trial_r;
        cost = trial_cost;
        lambda = std::max(lambda / 10, 1e-12);
        improved = true;
        if (rel_step < 1e-10 || rel_cost < 1e-14) fit.converged = true;
      } else {
        lambda *= 10;
      }
    }
    if (!improved) {
      fit.converged = true;  // no downhill step at any damping: at a minimum to working precision
      break;
    }
    if (fit.converged) break;
  }
  fit.params = params;
  fit.residuals = r;
  finish_statistics(fit, jacobian_at(params), y, w, what);
  return fit;
}

double CollectiveFit::time_us(std::int64_t bytes) const {
  return latency_us.value + static_cast<double>(bytes) / (algbw_GBps.value * 1e3);
}

CollectiveFit fit_collective(const std::string& op, int world, const std::vector<CollectivePoint>& points) {
  const std::string what = "collective fit (" + op + ", world " + std::to_string(world) + ")";
  if (world < 2) throw_bad_input(what, "world", std::to_string(world), "at least 2");
  const auto n = static_cast<Eigen::Index>(points.size());
  Eigen::MatrixXd design(n, 2);
  Eigen::VectorXd y(n), w(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto& pt = points[static_cast<std::size_t>(i)];
    if (!(pt.time_us > 0) || pt.bytes <= 0) {
      throw_bad_input(what, "point " + std::to_string(i),
                      std::to_string(pt.bytes) + " B in " + std::to_string(pt.time_us) + " us",
                      "positive bytes and time");
    }
    design(i, 0) = 1.0;
    design(i, 1) = static_cast<double>(pt.bytes);
    y[i] = pt.time_us;
    w[i] = 1.0 / (pt.time_us * pt.time_us);
  }
  const LinearFit lf = fit_weighted_linear(design, y, w, what);
  if (!(lf.params[1] > 0)) {
    throw InputError(what + ": time does not grow with size (slope " + std::to_string(lf.params[1]) +
                     " us/B); expected larger messages to take longer");
  }
  CollectiveFit fit;
  fit.op = op;
  fit.world = world;
  fit.points = static_cast<int>(n);
  fit.latency_us = Estimate{lf.params[0], lf.std_errors[0]};
  // t in µs, slope in µs per byte: bytes/µs = 1/slope, GB/s = 1e-3 / slope.
  fit.algbw_GBps = reciprocal(lf.params[1], lf.std_errors[1], 1e-3);
  const double bus = (world - 1.0) / world;
  fit.busbw_GBps = Estimate{fit.algbw_GBps.value * bus, fit.algbw_GBps.std_error * bus};
  fit.r_squared = lf.r_squared;
  fit.max_rel_residual = max_relative_residual(lf.residuals, y);
  return fit;
}

double KernelFit::time_us(double flops, double bytes) const {
  double t = overhead_us.value;
  if (has_flops_term) t += flops / (tflops.value * 1e6);
  if (has_bytes_term) t += bytes / (hbm_GBps.value * 1e3);
  return t;
}

KernelFit fit_kernel_time(const std::string& kernel_class, const std::vector<KernelPoint>& points, bool use_bytes) {
  const std::string what = "kernel-time fit (" + kernel_class + ")";
  const auto n = static_cast<Eigen::Index>(points.size());
  bool any_flops = false;
  for (const auto& pt : points) any_flops = any_flops || pt.flops > 0;
  KernelFit fit;
  fit.kernel_class = kernel_class;
  fit.points = static_cast<int>(n);
  fit.has_flops_term = any_flops;
  fit.has_bytes_term = use_bytes;
  if (!fit.has_flops_term && !fit.has_bytes_term) {
    throw InputError(what + ": got no FLOPs and no bytes, expected work to fit the time against");
  }
  const Eigen::Index p = 1 + (fit.has_flops_term ? 1 : 0) + (fit.has_bytes_term ? 1 : 0);
  Eigen::MatrixXd design(n, p);
  Eigen::VectorXd y(n), w(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto& pt = points[static_cast<std::size_t>(i)];
    if (!(pt.time_us > 0) || pt.flops < 0 || pt.bytes < 0) {
      throw_bad_input(what, "point " + std::to_string(i), std::to_string(pt.time_us) + " us",
                      "a positive time and non-negative work");
    }
    Eigen::Index c = 0;
    design(i, c++) = 1.0;
    if (fit.has_flops_term) design(i, c++) = pt.flops;
    if (fit.has_bytes_term) design(i, c++) = pt.bytes;
    y[i] = pt.time_us;
    w[i] = 1.0 / (pt.time_us * pt.time_us);
  }
  const LinearFit lf = fit_weighted_linear(design, y, w, what);
  fit.overhead_us = Estimate{lf.params[0], lf.std_errors[0]};
  Eigen::Index c = 1;
  if (fit.has_flops_term) {
    fit.tflops = reciprocal(lf.params[c], lf.std_errors[c], 1e-6);  // µs per FLOP → TFLOP/s
    ++c;
  }
  if (fit.has_bytes_term) fit.hbm_GBps = reciprocal(lf.params[c], lf.std_errors[c], 1e-3);  // µs per B → GB/s
  fit.r_squared = lf.r_squared;
  fit.max_rel_residual = max_relative_residual(lf.residuals, y);
  return fit;
}

}  // namespace dionsim::analysis
