#pragma once
// The calibration file: fitted parameters with standard errors and units, what they were fitted
// from, under a name and a hardware label. Schema-versioned JSON, read strictly (unknown keys and
// other schema versions are errors), so that whatif never silently uses a file it misreads.
//
//   {"schema_version": 3, "name": "h200-anchors", "hardware": "H200", "fabric": "h200-ndr400",
//    "parameters": {"nccl_all_to_all_w2_busbw_GBps": {"value": 360.1, "stderr": 12.0, "units": "GB/s"}, …},
//    "provenance": {"sources": ["…/h200-anchors.csv"], "method": "…", "tool": "dionsim 0.1.0"},
//    "covariance": {"parameters": ["fwd_bwd_ms", …], "matrix": [[…], …]},     optional (schema 2)
//    "model_error": {"method": "…", "configurations": 5, "relative_rms": {"step_wall_ms": 0.02, …}}}  optional
//
// Schema 2 added the optional "covariance" of the fitted parameters (the step-model fit of
// analysis/calibration/step_fit.hpp). Schema 3 (written now) adds "fabric": the fabric preset the
// calibration was fitted on — its fabric-scoped parameters (parameters.hpp, ParameterScope) apply
// there only. "hardware" must name a GPU with a preset (parameters.hpp gpu_preset_of) when the
// file has parameters that whatif uses. Files of schemas 1 and 2 are still read; they have no
// fabric and are read as fitted on their GPU's default fabric (gpu_preset_of), which is what
// every calibrate before schema 3 modelled.
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/calibration/fit.hpp"
#include "analysis/measured/kineto.hpp"
#include "analysis/measured/measurements.hpp"

namespace dionsim::analysis {

inline constexpr int kCalibrationSchemaVersion = 3;
inline constexpr int kOldestCalibrationSchemaVersion = 1;  // still read

// Published peaks the efficiencies are relative to (per GPU, one direction for NVLink).
inline constexpr double kH200NvlinkGBps = 450.0;       // NVLink 4: 18 links × 25 GB/s
inline constexpr double kH200DenseBf16Tflops = 989.4;  // H100/H200 SXM dense BF16 tensor core

struct CalibrationParameter {
  double value = 0;
  double std_error = 0;  // "stderr" in the file
  std::string units;
};

struct Calibration {
  int schema_version = kCalibrationSchemaVersion;
  std::string name;
  std::string hardware;
  std::string fabric;  // fabric preset it was fitted on ("" only without fabric-scoped parameters)
  std::map<std::string, CalibrationParameter> parameters;
  std::vector<std::string> sources;  // provenance: the files the fits used
  std::string method;                // provenance: how (model and weighting)
  std::string tool;                  // provenance: "dionsim <version>"
  // Joint covariance of some parameters (names index rows/columns); empty when not known.
  std::vector<std::string> covariance_parameters;
  Eigen::MatrixXd covariance;
  // Model-form error (schema 2, optional "model_error"): the relative rms error per whatif metric
  // of a leave-one-configuration-out over the calibration's runs (analysis/calibration/intervals.hpp);
  // empty when not known.
  std::map<std::string, double> model_error;
  int model_error_configurations = 0;
};

[[nodiscard]] nlohmann::json to_json(const Calibration& calibration);
// Strict: `where` names the source in errors (InputError).
[[nodiscard]] Calibration calibration_from_json(const nlohmann::json& value, const std::string& where);
void write_calibration(const std::filesystem::path& path, const Calibration& calibration);  // IoError
[[nodiscard]] Calibration read_calibration(const std::filesystem::path& path);              // IoError / InputError

// Fits (a) every (collective, world) of the anchors and (b) the GEMM anchors; parameters named
// nccl_<op>_w<world>_{latency_us,algbw_GBps,busbw_GBps,busbw_efficiency} and
// gemm_bf16_{overhead_us,tflops,efficiency} (efficiencies against the H200 peaks above).
struct AnchorFits {
  std::vector<CollectiveFit> collectives;
  KernelFit gemm;
};
// `source`: the file the anchors came from; a fit the rows cannot make is refused naming it.
[[nodiscard]] AnchorFits fit_anchors(const Anchors& anchors, const std::string& source = "");
[[nodiscard]] Calibration calibration_from_anchors(const AnchorFits& fits, const std::string& name,
                                                   const std::string& source, const std::string& tool);

// (c) per-kernel points of one role from traces: GEMMs carry FLOPs and bytes from their aten op
// (GEMMs whose shape is unknown are skipped). An NCCL kernel running on the same GPU occupies SMs
// (it spins while it waits for its peer), so compute kernels that overlap one run slower: the
// filter separates the two populations.
enum class CollectiveOverlap { any, overlapping, isolated };
[[nodiscard]] std::vector<KernelPoint> kernel_points(const KinetoTrace& trace, KernelRole role,
                                                     CollectiveOverlap overlap = CollectiveOverlap::any);

// NS GEMM throughput and per-kernel overhead from traces (pooled), split by overlap with an NCCL
// kernel: ns_gemm_{isolated,overlapped}_{overhead_us,tflops}. A population with fewer than three
// kernels is left out. Traces of several ranks of one run (group_into_runs) with all-to-alls of at
// least two sizes also give nccl_all_to_all_w<W>_kernel_{latency_us,algbw_GBps,busbw_GBps}: kernel
// transfer time without host overhead or waiting. InputError when nothing can be fitted.
[[nodiscard]] Calibration calibration_from_traces(const std::vector<KinetoTrace>& traces, const std::string& name,
                                                  const std::vector<std::string>& sources, const std::string& tool);

// (a) on nccl-tests stdout: one collective fit per block (out-of-place times), parameters
// nccl_<op>_w<W>_n<N>_{latency_us, algbw_GBps, busbw_GBps} with N the number of hosts; the
// bus-bandwidth factor is nccl-tests' own (busbw / algbw of the rows). InputError when two blocks
// have the same op, world and nodes (split such a log) or a block has fewer than three sizes.
[[nodiscard]] std::vector<CollectiveFit> fit_nccl_tests(const std::vector<NcclTestsRun>& runs);
[[nodiscard]] Calibration calibration_from_nccl_tests(const std::vector<NcclTestsRun>& runs, const std::string& name,
                                                      const std::string& source, const std::string& tool);

}  // namespace dionsim::analysis
