#include "analysis/calibration/collective_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <memory>

#include "analysis/calibration/fit.hpp"
#include "analysis/calibration/parameters.hpp"
#include "common/error.hpp"

namespace dionsim::analysis {

namespace {

constexpr int kParams = 5;
constexpr const char* kNames[kParams] = {"collective_call_overhead_us", "collective_net_hop_extra_us", "nic_efficiency",
                                         "collective_nvlink_scale", "collective_p2p_channel_GBps"};
constexpr const char* kUnits[kParams] = {"us", "us", "", "", "GB/s"};

Eigen::VectorXd to_vector(const CollectiveFitParameters& p) {
  Eigen::VectorXd v(kParams);
  v << p.call_overhead_us, p.net_hop_extra_us, p.nic_efficiency, p.nvlink_scale, p.p2p_channel_GBps;
  return v;
}
CollectiveFitParameters from_vector(const Eigen::VectorXd& v) {
  return {v[0], v[1], v[2], v[3], v[4]};
}

}  // namespace

double nvlink_fraction(const topo::FabricSpec& fabric) {
  return sim::nccl_nvlink_fraction(sim::comm_shape(fabric, 1, fabric.gpus_per_host).arch);
}

std::vector<CollectiveSample> samples_from_nccl_tests(const std::vector<NcclTestsRun>& runs, const std::string& source,
                                                      int* skipped_blocks) {
  static const std::map<std::string, sim::CollectiveOp> ops = {{"all_gather", sim::CollectiveOp::allgather},
                                                               {"reduce_scatter", sim::CollectiveOp::reducescatter},
                                                               {"all_reduce", sim::CollectiveOp::allreduce},
                                                               {"all_to_all", sim::CollectiveOp::alltoall},
                                                               {"alltoall", sim::CollectiveOp::alltoall},
                                                               {"send_recv", sim::CollectiveOp::sendrecv}};
  std::vector<CollectiveSample> out;
  int skipped = 0;
  for (const auto& run : runs) {
    const auto op = ops.find(run.op);
    if (op == ops.end()) {
      ++skipped;
      continue;
    }
    const std::string where = source + ":" + std::to_string(run.line);
    // What the run's NCCL reported reading from its environment (NCCL_DEBUG=INFO): a forced
    // NCCL_ALGO ran that choice, NCCL_NVLS_ENABLE=0 no NVLS, … — the fit prices what ran.
    const sim::NcclEnv nccl = sim::NcclEnv::read(
        [&](const std::string& key) {
          const auto it = run.env.find(key);
          return it == run.env.end() ? std::string{} : it->second;
        },
        where);
    if (sim::names_collnet(nccl.forced, op->second)) {
      throw_bad_input(where, "NCCL_ALGO", run.env.at("NCCL_ALGO"),
                      "no CollNet algorithm: CollNet (SHARP) runs are not modelled, drop this log");
    }
    const int hosts = std::max(1, run.nodes);
    if (run.world < 1 || run.world % hosts != 0) {
      throw_bad_input(where, "ranks", std::to_string(run.world),
                      "a multiple of the host count (" + std::to_string(hosts) + "): the same GPUs on every host");
    }
    for (const auto& row : run.rows) {
      if (row.bytes <= 0 || !(row.time_us > 0)) continue;  // nccl-tests prints a 0-byte row
      CollectiveSample s;
      s.op = op->second;
      s.nodes = hosts;
      s.gpus_per_node = run.world / hosts;
      s.bytes = row.bytes;
      s.time_us = row.time_us;
      s.nccl = nccl;
      s.where = source + ":" + std::to_string(row.line);
      out.push_back(s);
    }
  }
  if (skipped_blocks) *skipped_blocks = skipped;
  return out;
}

CollectiveFitParameters default_parameters(const topo::FabricSpec& fabric) {
  CollectiveFitParameters p;
  p.nic_efficiency = fabric.nic_efficiency;
  return p;
}

std::unique_ptr<sim::CollectiveModel> calibrated_model(const topo::FabricSpec& fabric, const CollectiveFitParameters& p, int nodes,
                                      int gpus_per_node, const sim::NcclEnv& nccl) {
  topo::FabricSpec spec = nccl.applied(fabric);
  spec.nic_efficiency = p.nic_efficiency;
  sim::ModelOptions options;
  nccl.apply(options);
  options.call_overhead_us = p.call_overhead_us;
  options.net_hop_extra_us = p.net_hop_extra_us;
  options.nvlink_scale = p.nvlink_scale;
  options.p2p_channel_GBps = p.p2p_channel_GBps;
  return std::make_unique<sim::CollectiveModel>(spec, nodes, gpus_per_node, options);
}

std::vector<double> predict_samples(const topo::FabricSpec& fabric, const CollectiveFitParameters& p,
                                    const std::vector<CollectiveSample>& samples) {
  std::map<std::tuple<int, int, std::string>, std::unique_ptr<sim::CollectiveModel>> models;
  std::vector<double> out;
  out.reserve(samples.size());
  for (const auto& s : samples) {
    auto& m = models[{s.nodes, s.gpus_per_node, s.nccl.key()}];
    if (!m) m = calibrated_model(fabric, p, s.nodes, s.gpus_per_node, s.nccl);
    out.push_back(m->cost(s.op, s.bytes, s.nccl.forced, sim::Mode::fast).time_us);
  }
  return out;
}

CollectiveModelFit fit_collective_model(const topo::FabricSpec& fabric, const std::vector<CollectiveSample>& samples) {
  const CollectiveFitParameters start = default_parameters(fabric);
  Eigen::VectorXd lower(kParams), upper(kParams);
  lower << 0, -2.5, 0.05, 0.05, 1;
  upper << 1e4, 1e3, 1.0, 1.0 / nvlink_fraction(fabric), 1e3;
  const auto residuals_at = [&](const Eigen::VectorXd& theta) {
    const auto t = predict_samples(fabric, from_vector(theta), samples);
    Eigen::VectorXd r(static_cast<Eigen::Index>(samples.size()));
    for (std::size_t i = 0; i < samples.size(); ++i) r[static_cast<Eigen::Index>(i)] = t[i] / samples[i].time_us - 1;
    return r;
  };
  // Which parameters the rows move at all (the NICs of a single-node log do not): a column of
  // the Jacobian at the start that is zero.
  LeastSquaresOptions options;
  options.jacobian_step = 1e-4;  // the model is piecewise smooth (protocol switch points): a coarse step
  options.jacobian_range_floor = 1e-3;
  Eigen::VectorXd theta0 = to_vector(start);
  const Eigen::MatrixXd j0 = central_jacobian(residuals_at, theta0, lower, upper, options);
  std::vector<int> free;
  CollectiveModelFit fit;
  for (int k = 0; k < kParams; ++k) {
    if (j0.col(k).norm() > 1e-9) {
      free.push_back(k);
    } else {
      fit.unconstrained.push_back(kNames[k]);
    }
  }
  fit.rows = static_cast<int>(samples.size());
  if (fit.rows < static_cast<int>(free.size()) + 1) {
    throw InputError("nccl-tests: " + std::to_string(fit.rows) + " rows cannot fit " + std::to_string(free.size()) +
                     " parameters (give more sizes or more collectives)");
  }
  fit.rms_relative_error_before = std::sqrt(residuals_at(theta0).squaredNorm() / fit.rows);
  Eigen::VectorXd theta = theta0;
  Eigen::VectorXd errors = Eigen::VectorXd::Zero(kParams);
  fit.converged = true;
  // Fit the free parameters; the one the rows determine least (the smallest distance from the
  // preset's value in standard errors), if within two, goes back to the preset's value and the
  // rest are fitted again (backward elimination), until every one left is determined. At most
  // kParams rounds: each drops one.
  while (!free.empty()) {
    const auto embed = [&](const Eigen::VectorXd& sub) {
      Eigen::VectorXd full = theta0;
      for (std::size_t i = 0; i < free.size(); ++i) full[free[i]] = sub[static_cast<Eigen::Index>(i)];
      return full;
    };
    const auto n_free = static_cast<Eigen::Index>(free.size());
    Eigen::VectorXd sub_start(n_free), sub_lower(n_free), sub_upper(n_free);
    for (Eigen::Index i = 0; i < n_free; ++i) {
      sub_start[i] = theta0[free[static_cast<std::size_t>(i)]];
      sub_lower[i] = lower[free[static_cast<std::size_t>(i)]];
      sub_upper[i] = upper[free[static_cast<std::size_t>(i)]];
    }
    const ResidualFunction sub_residuals = [&](const Eigen::VectorXd& sub) { return residuals_at(embed(sub)); };
    const auto solution =
        minimize_least_squares(sub_residuals, sub_start, sub_lower, sub_upper, options, "the collective model fit");
    fit.converged = solution.converged;
    theta = embed(solution.theta);
    const Eigen::MatrixXd j = central_jacobian(sub_residuals, solution.theta, sub_lower, sub_upper, options);
    std::optional<std::size_t> drop;  // index into `free` of the parameter that goes back to the preset's value
    // Parameters the rows move only together (a 2-node all-to-all's per-call and per-hop costs:
    // one network round, both added once) are not separable: (JᵀJ)⁻¹ does not exist and its
    // pseudo-inverse would report small errors for values the rows cannot tell apart. The rank of
    // J with unit columns finds them; the first dependent column in pivot order is dropped.
    Eigen::MatrixXd unit = j;
    for (Eigen::Index c = 0; c < unit.cols(); ++c)
      if (unit.col(c).norm() > 0) unit.col(c) /= unit.col(c).norm();
    Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(unit);
    qr.setThreshold(1e-6);
    errors.setZero();
    if (qr.rank() < n_free) {
      drop = static_cast<std::size_t>(qr.colsPermutation().indices()[qr.rank()]);
    } else {
      const int dof = fit.rows - static_cast<int>(n_free);
      const double sigma2 = solution.cost / std::max(1, dof);
      const Eigen::MatrixXd jtj = j.transpose() * j;
      fit.covariance = sigma2 * jtj.completeOrthogonalDecomposition().pseudoInverse();
      double weakest_z = 2;  // standard errors
      for (Eigen::Index i = 0; i < n_free; ++i) {
        const int k = free[static_cast<std::size_t>(i)];
        errors[k] = std::sqrt(std::max(0.0, fit.covariance(i, i)));
        // A zero standard error (rows the model meets exactly) determines the value, whatever it is.
        const double z = errors[k] > 0 ? std::abs(theta[k] - theta0[k]) / errors[k]
                                       : std::numeric_limits<double>::infinity();
        if (z < weakest_z) weakest_z = z, drop = static_cast<std::size_t>(i);
      }
    }
    if (!drop) break;
    fit.undetermined.push_back(kNames[free[*drop]]);
    free.erase(free.begin() + static_cast<std::ptrdiff_t>(*drop));
    theta = theta0;
    fit.covariance.resize(0, 0);
    errors.setZero();
  }
  for (const int k : free) fit.fitted.push_back(kNames[k]);
  fit.value = from_vector(theta);
  for (const int k : free) {
    if (std::abs(theta[k] - lower[k]) <= 1e-9 * (1 + std::abs(lower[k])) ||
        std::abs(theta[k] - upper[k]) <= 1e-9 * (1 + std::abs(upper[k])))
      fit.at_bound.push_back(kNames[k]);
  }
  fit.std_error = from_vector(errors);
  fit.rms_relative_error = std::sqrt(residuals_at(theta).squaredNorm() / fit.rows);
  return fit;
}

Calibration calibration_from_collective_fit(const CollectiveModelFit& fit, const topo::FabricSpec& fabric,
                                            const std::string& name, const std::vector<std::string>& sources,
                                            const std::string& tool) {
  Calibration c;
  c.name = name;
  // The fabric it was fitted on (its parameters apply there: collective, whatif) and the GPU of
  // that fabric's nodes (a calibration names its GPU; this one holds no GPU parameter).
  c.fabric = fabric.name.substr(0, fabric.name.find('@'));
  c.hardware = gpu_label_of_fabric(fabric.name).value_or(fabric.name);
  c.sources = sources;
  c.tool = tool;
  c.method = "collective model (sim/collective_model.hpp) on fabric " + fabric.name +
             ", every size row of the nccl-tests blocks, Levenberg-Marquardt on relative errors (t_model/t - 1); "
             "stderr from sigma^2 (J^T J)^-1; " + std::to_string(fit.rows) + " rows, rms relative error " +
             std::to_string(fit.rms_relative_error_before) + " before, " + std::to_string(fit.rms_relative_error) +
             " after" + (fit.unconstrained.empty() ? std::string() : "; not constrained by the rows (preset kept):");
  for (const auto& u : fit.unconstrained) c.method += " " + u;
  if (!fit.undetermined.empty()) c.method += "; not determined by the rows (within 2 stderr of the preset's value, kept):";
  for (const auto& u : fit.undetermined) c.method += " " + u;
  const Eigen::VectorXd v = to_vector(fit.value), e = to_vector(fit.std_error);
  for (int k = 0; k < kParams; ++k) {
    if (std::find(fit.fitted.begin(), fit.fitted.end(), kNames[k]) == fit.fitted.end()) continue;
    c.parameters[kNames[k]] = CalibrationParameter{v[k], e[k], kUnits[k]};
  }
  c.covariance_parameters = fit.fitted;
  c.covariance = fit.covariance;
  return c;
}

int apply_collective_calibration(const Calibration& calibration, topo::FabricSpec& fabric, sim::ModelOptions& options,
                                 const std::string& where) {
  int applied = 0;
  const double fraction = nvlink_fraction(fabric);
  for (const auto& [name, p] : calibration.parameters) {
    const double v = p.value;
    const auto bad = [&](const char* expected) { throw_bad_input(where, name, std::to_string(v), expected); };
    if (name == kNames[0]) {
      if (!(std::isfinite(v) && v >= 0 && v <= 1e4)) bad("a latency in [0, 1e4] us");
      options.call_overhead_us = v;
    } else if (name == kNames[1]) {
      if (!(std::isfinite(v) && v >= -2.5 && v <= 1e3)) bad("a latency in [-2.5, 1e3] us");
      options.net_hop_extra_us = v;
    } else if (name == kNames[2]) {
      if (!(std::isfinite(v) && v > 0 && v <= 1)) bad("an efficiency in (0, 1]");
      fabric.nic_efficiency = v;
    } else if (name == kNames[3]) {
      if (!(std::isfinite(v) && v > 0 && v * fraction <= 1 + 1e-9)) bad("a factor in (0, 1 / NCCL's NVLink fraction]");
      options.nvlink_scale = std::min(v, 1.0 / fraction);
    } else if (name == kNames[4]) {
      if (!(std::isfinite(v) && v >= 1 && v <= 1e3)) bad("a rate in [1, 1e3] GB/s");
      options.p2p_channel_GBps = v;
    } else {
      continue;
    }
    ++applied;
  }
  return applied;
}

}  // namespace dionsim::analysis
