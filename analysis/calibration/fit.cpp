#include "analysis/calibration/fit.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

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

Eigen::MatrixXd central_jacobian(const ResidualFunction& residuals, const Eigen::VectorXd& theta,
                                 const Eigen::VectorXd& lower, const Eigen::VectorXd& upper,
                                 const LeastSquaresOptions& options) {
  Eigen::MatrixXd J;
  for (Eigen::Index j = 0; j < theta.size(); ++j) {
    const double range = upper[j] - lower[j];
    const double floor = std::isfinite(range) ? options.jacobian_range_floor * range : options.jacobian_unbounded_floor;
    const double h = options.jacobian_step * std::max(std::abs(theta[j]), floor);
    Eigen::VectorXd hi = theta, lo = theta;
    hi[j] = std::min(upper[j], theta[j] + h);
    lo[j] = std::max(lower[j], theta[j] - h);
    const Eigen::VectorXd column = (residuals(hi) - residuals(lo)) / (hi[j] - lo[j]);
    if (j == 0) J.resize(column.size(), theta.size());
    J.col(j) = column;
  }
  return J;
}

LeastSquaresSolution minimize_least_squares(const ResidualFunction& residuals, const Eigen::VectorXd& start,
                                            const Eigen::VectorXd& lower, const Eigen::VectorXd& upper,
                                            const LeastSquaresOptions& options, const std::string& what) {
  const Eigen::Index p = start.size();
  auto clamp = [&](Eigen::VectorXd t) {
    for (Eigen::Index j = 0; j < p; ++j) t[j] = std::clamp(t[j], lower[j], upper[j]);
    return t;
  };
  LeastSquaresSolution s;
  s.theta = clamp(start);
  s.residuals = residuals(s.theta);
  if (!s.residuals.allFinite()) throw InputError(what + ": the model is not finite at the starting parameters");
  s.cost = s.residuals.squaredNorm();
  double lambda = options.initial_damping;
  std::vector<double> history;
  for (s.iterations = 0; s.iterations < options.max_iterations; ++s.iterations) {
    const Eigen::MatrixXd J = central_jacobian(residuals, s.theta, lower, upper, options);
    const Eigen::MatrixXd A = J.transpose() * J;
    const Eigen::VectorXd g = J.transpose() * s.residuals;
    bool accepted = false;
    for (int attempt = 0; attempt < options.attempts && !accepted; ++attempt) {
      Eigen::MatrixXd M = A;
      for (Eigen::Index j = 0; j < p; ++j) M(j, j) += lambda * std::max(A(j, j), options.damping_floor);
      const Eigen::VectorXd next = clamp(s.theta + M.ldlt().solve(-g));
      const Eigen::VectorXd rn = residuals(next);
      const double new_cost = rn.allFinite() ? rn.squaredNorm() : INFINITY;
      if (new_cost < s.cost) {
        accepted = true;
        const double moved = (next - s.theta).norm() / std::max(s.theta.norm(), 1e-30);
        const bool small = s.cost - new_cost < options.relative_cost_tolerance * s.cost + options.absolute_cost_tolerance ||
                           moved < options.relative_step_tolerance;
        s.theta = next;
        s.residuals = rn;
        s.cost = new_cost;
        lambda = std::max(lambda / options.damping_down, options.min_damping);
        if (small) s.converged = true;
      } else {
        lambda *= options.damping_up;
      }
    }
    if (!accepted) s.converged = true;  // no downhill step at any damping: a (bounded) minimum
    if (options.plateau_window > 0) {
      history.push_back(s.cost);
      const auto w = static_cast<std::size_t>(options.plateau_window);
      if (history.size() > w && history[history.size() - w - 1] - s.cost < options.plateau_gain * s.cost)
        s.converged = true;
    }
    if (s.converged) break;
  }
  return s;
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
  const Eigen::VectorXd sqrt_w = w.cwiseSqrt();
  auto values_at = [&](const Eigen::VectorXd& params) {
    Eigen::VectorXd v(n);
    for (Eigen::Index i = 0; i < n; ++i) v[i] = model(params, x.row(i).transpose());
    return v;
  };
  // Weighted residuals √w (ŷ − y): ‖·‖² is the weighted cost.
  const ResidualFunction weighted = [&](const Eigen::VectorXd& params) {
    return Eigen::VectorXd(sqrt_w.cwiseProduct(values_at(params) - y));
  };
  LeastSquaresOptions options;  // the defaults are this fit's: unbounded, tight convergence
  options.max_iterations = max_iterations;
  const Eigen::VectorXd unbounded = Eigen::VectorXd::Constant(p, INFINITY);
  const auto solution = minimize_least_squares(weighted, start, -unbounded, unbounded, options, what);

  NonlinearFit fit;
  fit.iterations = solution.iterations;
  fit.converged = solution.converged;
  fit.params = solution.theta;
  fit.residuals = y - values_at(fit.params);
  const ResidualFunction values = [&](const Eigen::VectorXd& params) { return values_at(params); };
  finish_statistics(fit, central_jacobian(values, fit.params, -unbounded, unbounded, options), y, w, what);
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
