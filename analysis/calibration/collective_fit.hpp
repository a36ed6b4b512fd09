#pragma once
// `dionsim calibrate --nccl-tests LOG[,LOG…] --fabric F`: the collective model's fabric
// parameters fitted to nccl-tests output of the user's own cluster — every block (all-gather,
// reduce-scatter, all-reduce, all-to-all, send/recv) and every size row — with standard errors.
//
// The model is sim::CollectiveModel on the preset F at each block's shape (nodes x world/nodes);
// the fit frees five parameters:
//   collective_call_overhead_us   once per call (launch, group, proxy wake-up)          [0, 1e4]
//   collective_net_hop_extra_us   on every inter-node step, beyond NCCL's / the fabric's [-2.5, 1e3]
//   nic_efficiency                the NICs' achievable fraction of line rate            [0.05, 1]
//   collective_nvlink_scale       on NCCL's NVLink rate, at most the nominal             (0, 1/fraction]
//   collective_p2p_channel_GBps   one p2p channel's copy rate (send/recv, all-to-all)    [1, 1e3]
// minimising Σ (t_model / t_measured − 1)² (relative errors: a latency-bound row counts as much
// as a bandwidth-bound one) by Levenberg–Marquardt (fit.hpp minimize_least_squares); the
// covariance is σ̂² (JᵀJ)⁻¹ with σ̂² = Σ r² / (n − p). A parameter the rows cannot move (the NICs
// of a single-node log) is left out, named in `unconstrained`, and keeps the preset's value. One
// the rows move but do not determine — its fitted value within two standard errors of the
// preset's (a 95 % test: a per-call overhead fitted to 4–16 GiB rows only, where 40 µs is noise)
// — keeps the preset's value too, named in `undetermined`, and the others are fitted again
// without it: a calibration moves only what its logs measured.
// `nic_efficiency` is the name whatif's step calibration already reads (the fabric's NICs).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "analysis/calibration/fit_calibration.hpp"
#include "analysis/measured/measurements.hpp"
#include "sim/collective_model.hpp"
#include "sim/nccl_env.hpp"
#include "topologies/topology.hpp"

namespace dionsim::analysis {

// One measured call.
struct CollectiveSample {
  sim::CollectiveOp op = sim::CollectiveOp::allgather;
  int nodes = 1;          // hosts
  int gpus_per_node = 1;  // GPUs per host
  std::int64_t bytes = 0;  // nccl-tests size
  double time_us = 0;     // measured (out-of-place)
  sim::NcclEnv nccl;      // the run's NCCL variables: NCCL_ALGO / NCCL_PROTO, NVLS, MNNVL, … (default: none set)
  std::string where;      // file:line, for messages
};

// Every row of every block of the four collectives and send/recv (other blocks — broadcast,
// reduce — are skipped and counted in `skipped_blocks`). InputError for a block whose world is not a multiple
// of its host count.
[[nodiscard]] std::vector<CollectiveSample> samples_from_nccl_tests(const std::vector<NcclTestsRun>& runs,
                                                                    const std::string& source, int* skipped_blocks = nullptr);

struct CollectiveFitParameters {
  double call_overhead_us = 0;
  double net_hop_extra_us = 0;
  double nic_efficiency = 0;   // of the fabric
  double nvlink_scale = 1;
  double p2p_channel_GBps = sim::kP2pChannelGBps;
};
// NCCL's NVLink rate as a fraction of `fabric`'s nominal one (collective_nvlink_scale is a factor
// on it, at most 1 / this).
[[nodiscard]] double nvlink_fraction(const topo::FabricSpec& fabric);
// The parameters of the uncalibrated model on `fabric`.
[[nodiscard]] CollectiveFitParameters default_parameters(const topo::FabricSpec& fabric);
// The model a set of parameters gives at one shape, under a run's NCCL environment.
[[nodiscard]] std::unique_ptr<sim::CollectiveModel> calibrated_model(const topo::FabricSpec& fabric, const CollectiveFitParameters& p,
                                                    int nodes, int gpus_per_node, const sim::NcclEnv& nccl = {});
// The model's time for each sample (one model per shape and NCCL environment).
[[nodiscard]] std::vector<double> predict_samples(const topo::FabricSpec& fabric, const CollectiveFitParameters& p,
                                                  const std::vector<CollectiveSample>& samples);

struct CollectiveModelFit {
  CollectiveFitParameters value, std_error;
  std::vector<std::string> fitted, unconstrained;  // parameter names
  std::vector<std::string> undetermined;           // moved by the rows, but within 2 stderr of the preset's value: kept
  std::vector<std::string> at_bound;               // fitted ones that ended on a bound of their range
  int rows = 0;
  double rms_relative_error = 0;       // after the fit
  double rms_relative_error_before = 0;  // the uncalibrated model on the same rows
  bool converged = false;
  Eigen::MatrixXd covariance;  // of `fitted`, in that order
};
// InputError when there are fewer rows than free parameters + 1.
[[nodiscard]] CollectiveModelFit fit_collective_model(const topo::FabricSpec& fabric,
                                                      const std::vector<CollectiveSample>& samples);

// As a calibration file (calibrate --out), `sources` = the logs, `fabric` in its hardware field.
[[nodiscard]] Calibration calibration_from_collective_fit(const CollectiveModelFit& fit, const topo::FabricSpec& fabric,
                                                          const std::string& name, const std::vector<std::string>& sources,
                                                          const std::string& tool);
// Reads a calibration's collective parameters onto a fabric and the model's options (what
// `collective` / `validate-collectives --calibration` do); parameters it does not know are left.
// Returns how many it applied. InputError naming `where` for a value out of range.
int apply_collective_calibration(const Calibration& calibration, topo::FabricSpec& fabric, sim::ModelOptions& options,
                                 const std::string& where);

}  // namespace dionsim::analysis
