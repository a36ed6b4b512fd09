#include "analysis/calibration/fit_calibration.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include "analysis/calibration/parameters.hpp"
#include "common/files.hpp"
#include "topologies/topology.hpp"
#include "common/json_input.hpp"
#include "common/error.hpp"

namespace dionsim::analysis {

using nlohmann::json;

namespace {

void require_keys(const json& object, const std::string& where, const std::set<std::string>& allowed) {
  if (!object.is_object()) throw_bad_input(where, "", object.dump().substr(0, 60), "a JSON object");
  std::string list;
  for (const auto& k : allowed) list += (list.empty() ? "" : ", ") + k;
  for (const auto& [key, value] : object.items()) {
    if (allowed.count(key) == 0) throw_bad_input(where, "key", key, "one of " + list);
  }
  for (const auto& key : allowed) {
    if (!object.contains(key)) throw_bad_input(where, key, "(missing)", "a value for every key of " + list);
  }
}

std::string string_at(const json& object, const std::string& key, const std::string& where) {
  const json& v = object.at(key);
  if (!v.is_string()) throw_bad_input(where, key, v.dump(), "a string");
  return v.get<std::string>();
}

double number_at(const json& object, const std::string& key, const std::string& where) {
  const json& v = object.at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>())) throw_bad_input(where, key, v.dump(), "a finite number");
  return v.get<double>();
}

void add(Calibration& c, const std::string& name, const Estimate& e, const std::string& units) {
  c.parameters[name] = CalibrationParameter{e.value, e.std_error, units};
}

}  // namespace

json to_json(const Calibration& c) {
  json parameters = json::object();
  for (const auto& [name, p] : c.parameters) {
    parameters[name] = {{"value", p.value}, {"stderr", p.std_error}, {"units", p.units}};
  }
  json out = {{"schema_version", c.schema_version},
              {"name", c.name},
              {"hardware", c.hardware},
              {"fabric", c.fabric},
              {"parameters", parameters},
              {"provenance", {{"sources", c.sources}, {"method", c.method}, {"tool", c.tool}}}};
  if (!c.covariance_parameters.empty()) {
    json matrix = json::array();
    for (Eigen::Index i = 0; i < c.covariance.rows(); ++i) {
      json row = json::array();
      for (Eigen::Index j = 0; j < c.covariance.cols(); ++j) row.push_back(c.covariance(i, j));
      matrix.push_back(row);
    }
    out["covariance"] = {{"parameters", c.covariance_parameters}, {"matrix", matrix}};
  }
  if (!c.model_error.empty()) {
    out["model_error"] = {{"method", "leave-one-configuration-out: rms of (predicted - measured) / measured per metric"},
                          {"configurations", c.model_error_configurations},
                          {"relative_rms", c.model_error}};
  }
  return out;
}

Calibration calibration_from_json(const json& value, const std::string& where) {
  if (!value.is_object()) throw_bad_input(where, "", value.type_name(), "a calibration JSON object");
  // The version is checked first: a file of another schema gets that message, not a key error.
  if (!value.contains("schema_version"))
    throw_bad_input(where, "schema_version", "(missing)", std::to_string(kCalibrationSchemaVersion));
  const json& version = value.at("schema_version");
  if (!version.is_number_integer() || version.get<int>() < kOldestCalibrationSchemaVersion ||
      version.get<int>() > kCalibrationSchemaVersion) {
    throw_bad_input(where, "schema_version", version.is_string() ? version.get<std::string>() : version.dump(),
                    "1, 2 or 3 (this dionsim reads calibration schemas 1 to 3; re-run dionsim calibrate)");
  }
  const int schema = version.get<int>();
  json body = value;
  const bool has_covariance = schema >= 2 && body.contains("covariance");
  json covariance;
  if (has_covariance) {
    covariance = body.at("covariance");
    body.erase("covariance");
  }
  const bool has_model_error = schema >= 2 && body.contains("model_error");
  json model_error;
  if (has_model_error) {
    model_error = body.at("model_error");
    body.erase("model_error");
  }
  if (schema >= 3)
    require_keys(body, where, {"schema_version", "name", "hardware", "fabric", "parameters", "provenance"});
  else
    require_keys(body, where, {"schema_version", "name", "hardware", "parameters", "provenance"});
  Calibration c;
  c.schema_version = kCalibrationSchemaVersion;  // what to_json writes back
  c.name = string_at(value, "name", where);
  c.hardware = string_at(value, "hardware", where);
  if (c.name.empty()) throw_bad_input(where, "name", "", "a non-empty name");
  const auto gpu = gpu_preset_of(c.hardware);
  if (schema >= 3) {
    c.fabric = string_at(value, "fabric", where);
    const auto presets = topo::preset_names();
    if (!c.fabric.empty() && std::find(presets.begin(), presets.end(), c.fabric) == presets.end()) {
      std::string list;
      for (const auto& p : presets) list += (list.empty() ? "" : ", ") + p;
      throw_bad_input(where, "fabric", c.fabric, "the fabric preset it was fitted on: one of " + list);
    }
  } else if (gpu) {
    c.fabric = gpu->fabric;  // what calibrate modelled before schema 3
  }
  const json& parameters = value.at("parameters");
  if (!parameters.is_object())
    throw_bad_input(where, "parameters", parameters.dump().substr(0, 60), "an object of parameters");
  for (const auto& [name, p] : parameters.items()) {
    const std::string at = where + ": parameters." + name;
    require_keys(p, at, {"value", "stderr", "units"});
    CalibrationParameter param{number_at(p, "value", at), number_at(p, "stderr", at), string_at(p, "units", at)};
    if (param.std_error < 0) throw_bad_input(at, "stderr", p.at("stderr").dump(), "a number >= 0");
    c.parameters[name] = param;
  }
  // Parameters whatif uses need the GPU (and, for the fabric-scoped ones, the fabric) they were
  // fitted on: a calibration that cannot say where it applies is refused, not applied everywhere.
  bool used = false, fabric_scoped = false;
  for (const auto& [name, p] : c.parameters) {
    const ParameterSpec* spec = find_parameter(name.substr(0, name.find('@')));
    if (spec == nullptr) continue;
    // Checked here, naming the file: a value out of its range was refused only later, by the
    // step model, as "fit: ns_gemm_efficiency: got '-1'" (scripts/fuzz_cli.py).
    check_parameter(*spec, "parameters." + name + ".value", p.value, where);
    used = true;
    fabric_scoped = fabric_scoped || spec->scope == ParameterScope::fabric;
  }
  if (used && !gpu) throw_bad_input(where, "hardware", c.hardware, known_gpu_labels());
  if (fabric_scoped && c.fabric.empty())
    throw_bad_input(where, "fabric", "", "the fabric preset its fabric parameters were fitted on (e.g. h100-ndr400)");
  const json& provenance = value.at("provenance");
  require_keys(provenance, where + ": provenance", {"sources", "method", "tool"});
  const json& sources = provenance.at("sources");
  if (!sources.is_array())
    throw_bad_input(where + ": provenance", "sources", sources.dump().substr(0, 60), "an array of strings");
  for (const auto& s : sources) {
    if (!s.is_string()) throw_bad_input(where + ": provenance", "sources", s.dump(), "a string");
    c.sources.push_back(s.get<std::string>());
  }
  c.method = string_at(provenance, "method", where + ": provenance");
  c.tool = string_at(provenance, "tool", where + ": provenance");
  if (has_covariance) {
    const std::string at = where + ": covariance";
    require_keys(covariance, at, {"parameters", "matrix"});
    const json& names = covariance.at("parameters");
    const json& matrix = covariance.at("matrix");
    if (!names.is_array()) throw_bad_input(at, "parameters", names.dump().substr(0, 60), "an array of names");
    for (const auto& n : names) {
      if (!n.is_string() || c.parameters.count(n.get<std::string>()) == 0)
        throw_bad_input(at, "parameters", n.dump(), "names of parameters of the file");
      c.covariance_parameters.push_back(n.get<std::string>());
    }
    const auto k = static_cast<Eigen::Index>(names.size());
    if (!matrix.is_array() || static_cast<Eigen::Index>(matrix.size()) != k)
      throw_bad_input(at, "matrix", matrix.dump().substr(0, 60), std::to_string(k) + " rows");
    c.covariance = Eigen::MatrixXd(k, k);
    for (Eigen::Index i = 0; i < k; ++i) {
      const json& row = matrix[static_cast<std::size_t>(i)];
      if (!row.is_array() || static_cast<Eigen::Index>(row.size()) != k)
        throw_bad_input(at, "matrix", row.dump().substr(0, 60), std::to_string(k) + " numbers per row");
      for (Eigen::Index j = 0; j < k; ++j) {
        const json& v = row[static_cast<std::size_t>(j)];
        if (!v.is_number() || !std::isfinite(v.get<double>()))
          throw_bad_input(at, "matrix", v.dump(), "finite numbers");
        c.covariance(i, j) = v.get<double>();
      }
    }
  }
  if (has_model_error) {
    const std::string at = where + ": model_error";
    require_keys(model_error, at, {"method", "configurations", "relative_rms"});
    const json& n = model_error.at("configurations");
    if (!n.is_number_integer() || n.get<std::int64_t>() < 1 || n.get<std::int64_t>() > 1000000)
      throw_bad_input(at, "configurations", n.dump(), "a positive integer");
    c.model_error_configurations = n.get<int>();
    const json& rms = model_error.at("relative_rms");
    if (!rms.is_object()) throw_bad_input(at, "relative_rms", rms.dump().substr(0, 60), "an object metric -> number");
    for (const auto& [metric, v] : rms.items()) {
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0 || v.get<double>() > 100)
        throw_bad_input(at + ".relative_rms", metric, v.dump(), "a relative error in [0, 100]");
      c.model_error[metric] = v.get<double>();
    }
  }
  return c;
}

void write_calibration(const std::filesystem::path& path, const Calibration& calibration) {
  // Temporary file + rename: a full disk leaves the previous calibration whole.
  write_file_atomically(path.string(), to_json(calibration).dump(2) + "\n");
}

Calibration read_calibration(const std::filesystem::path& path) {
  const json value = read_json_file(path.string(), "a calibration written by dionsim calibrate");
  return calibration_from_json(value, path.string());
}

AnchorFits fit_anchors(const Anchors& anchors, const std::string& source) {
  if (!source.empty()) {
    // A fit the rows cannot make (a bandwidth of 1e15 leaves the time flat) is the file's fault:
    // say which file, not only which fit.
    try {
      return fit_anchors(anchors);
    } catch (const InputError& e) {
      throw InputError(source + ": " + e.what());
    }
  }
  AnchorFits fits;
  std::map<std::pair<std::string, int>, std::vector<CollectivePoint>> series;
  for (const auto& c : anchors.collectives) {
    series[{c.op, c.world}].push_back(CollectivePoint{c.bytes, c.time_us()});
  }
  for (const auto& [key, points] : series) fits.collectives.push_back(fit_collective(key.first, key.second, points));
  std::vector<KernelPoint> gemm;
  for (const auto& g : anchors.gemm) {
    const double bytes = 2.0 * static_cast<double>(g.m * g.k + g.k * g.n + g.m * g.n);  // bf16 A, B, C
    gemm.push_back(KernelPoint{g.flops(), bytes, g.time_us()});
  }
  fits.gemm = fit_kernel_time("gemm_bf16", gemm);
  return fits;
}

Calibration calibration_from_anchors(const AnchorFits& fits, const std::string& name, const std::string& source,
                                     const std::string& tool) {
  Calibration c;
  c.name = name;
  c.hardware = "H200";
  c.fabric = "h200-ndr400";  // the anchors' 2 x H200 share one NVLink node
  c.sources = {source};
  c.tool = tool;
  c.method =
      "weighted least squares, weights 1/t^2 (relative errors), covariance sigma^2 (J^T W J)^-1 with sigma^2 from the "
      "residuals; collectives: t = latency + bytes/algbw per op and world (nccl-tests sizes per rank, "
      "busbw = algbw (n-1)/n); GEMM: t = overhead + 2mnk/throughput; efficiencies against NVLink 450 GB/s and "
      "989.4 dense BF16 TFLOP/s";
  for (const auto& f : fits.collectives) {
    const std::string prefix = "nccl_" + f.op + "_w" + std::to_string(f.world) + "_";
    add(c, prefix + "latency_us", f.latency_us, "us");
    add(c, prefix + "algbw_GBps", f.algbw_GBps, "GB/s");
    add(c, prefix + "busbw_GBps", f.busbw_GBps, "GB/s");
    add(c, prefix + "busbw_efficiency",
        Estimate{f.busbw_GBps.value / kH200NvlinkGBps, f.busbw_GBps.std_error / kH200NvlinkGBps}, "1");
  }
  add(c, "gemm_bf16_overhead_us", fits.gemm.overhead_us, "us");
  add(c, "gemm_bf16_tflops", fits.gemm.tflops, "TFLOP/s");
  add(c, "gemm_bf16_efficiency",
      Estimate{fits.gemm.tflops.value / kH200DenseBf16Tflops, fits.gemm.tflops.std_error / kH200DenseBf16Tflops}, "1");
  return c;
}

std::vector<KernelPoint> kernel_points(const KinetoTrace& trace, KernelRole role, CollectiveOverlap overlap) {
  // NCCL kernel intervals per device, sorted by start (kernels are sorted already).
  std::map<int, std::vector<std::pair<std::int64_t, std::int64_t>>> nccl;
  for (const auto& k : trace.kernels) {
    if (!k.collective.empty()) nccl[k.device].emplace_back(k.start_ns, k.end_ns());
  }
  auto overlaps_nccl = [&](const KernelEvent& k) {
    const auto it = nccl.find(k.device);
    if (it == nccl.end()) return false;
    // NCCL kernels on one stream do not overlap each other, so their ends are sorted too.
    const auto& spans = it->second;
    auto after = std::upper_bound(spans.begin(), spans.end(), std::make_pair(k.end_ns(), INT64_MIN));
    return after != spans.begin() && std::prev(after)->second > k.start_ns;
  };
  std::vector<KernelPoint> points;
  for (const auto& k : trace.kernels) {
    if (k.role != role || k.dur_ns <= 0) continue;
    if (role == KernelRole::ns_gemm && k.gemm_flops == 0) continue;  // shape unknown: nothing to fit against
    if (overlap != CollectiveOverlap::any && overlaps_nccl(k) != (overlap == CollectiveOverlap::overlapping)) continue;
    points.push_back(KernelPoint{static_cast<double>(k.gemm_flops), static_cast<double>(k.gemm_bytes),
                                 static_cast<double>(k.dur_ns) / 1e3});
  }
  return points;
}

std::vector<CollectiveFit> fit_nccl_tests(const std::vector<NcclTestsRun>& runs) {
  std::vector<CollectiveFit> fits;
  std::set<std::tuple<std::string, int, int>> seen;
  for (const auto& run : runs) {
    const std::string what = run.program + " (line " + std::to_string(run.line) + ")";
    if (!seen.insert({run.op, run.world, run.nodes}).second) {
      throw_bad_input(what, "block",
                      run.op + " on " + std::to_string(run.world) + " ranks, " + std::to_string(run.nodes) + " nodes",
                      "one block per collective, world and node count (split the log)");
    }
    if (run.world < 2) throw_bad_input(what, "ranks", std::to_string(run.world), "at least 2 '#  Rank' lines");
    std::vector<CollectivePoint> points;
    for (const auto& row : run.rows) points.push_back(CollectivePoint{row.bytes, row.time_us});
    CollectiveFit fit = fit_collective(run.op, run.world, points);
    // nccl-tests' bus factor depends on the collective (n-1/n for all-to-all and all-gather, 2(n-1)/n
    // for all-reduce); take it from the rows themselves.
    const auto& last = run.rows.back();
    if (last.algbw_GBps > 0) {
      const double factor = last.busbw_GBps / last.algbw_GBps;
      fit.busbw_GBps = Estimate{fit.algbw_GBps.value * factor, fit.algbw_GBps.std_error * factor};
    }
    fits.push_back(fit);
  }
  return fits;
}

Calibration calibration_from_nccl_tests(const std::vector<NcclTestsRun>& runs, const std::string& name,
                                        const std::string& source, const std::string& tool) {
  const auto fits = fit_nccl_tests(runs);
  Calibration c;
  c.name = name;
  c.hardware = runs.empty() ? "" : runs.front().device;
  if (const auto gpu = gpu_preset_of(c.hardware)) c.fabric = gpu->fabric;
  c.sources = {source};
  c.tool = tool;
  c.method =
      "nccl-tests out-of-place times, weighted least squares (weights 1/t^2): t = latency + bytes/algbw per block; "
      "busbw with the rows' own bus factor";
  for (std::size_t i = 0; i < fits.size(); ++i) {
    const auto& f = fits[i];
    const std::string prefix =
        "nccl_" + f.op + "_w" + std::to_string(f.world) + "_n" + std::to_string(runs[i].nodes) + "_";
    add(c, prefix + "latency_us", f.latency_us, "us");
    add(c, prefix + "algbw_GBps", f.algbw_GBps, "GB/s");
    add(c, prefix + "busbw_GBps", f.busbw_GBps, "GB/s");
  }
  return c;
}

Calibration calibration_from_traces(const std::vector<KinetoTrace>& traces, const std::string& name,
                                    const std::vector<std::string>& sources, const std::string& tool) {
  Calibration c;
  c.name = name;
  c.hardware = traces.empty() ? "" : traces.front().device_name;
  if (const auto gpu = gpu_preset_of(c.hardware)) c.fabric = gpu->fabric;
  c.sources = sources;
  c.tool = tool;
  c.method =
      "NS GEMM kernels with shapes from their aten op: t = overhead + 2bmnk/throughput, weighted least squares "
      "(weights 1/t^2), pooled over the given traces, split by overlap with an NCCL kernel on the same GPU; "
      "all-to-all kernels of runs with several ranks (traces overlapping in time): t = latency + bytes/algbw "
      "with t the shortest duration of each collective over the ranks";
  for (const auto& [overlap, label] : {std::pair{CollectiveOverlap::isolated, std::string("isolated")},
                                       std::pair{CollectiveOverlap::overlapping, std::string("overlapped")}}) {
    std::vector<KernelPoint> points;
    for (const auto& t : traces) {
      const auto more = kernel_points(t, KernelRole::ns_gemm, overlap);
      points.insert(points.end(), more.begin(), more.end());
    }
    if (points.size() < 3) continue;  // not enough kernels of this kind to fit
    const KernelFit fit = fit_kernel_time("ns_gemm_" + label, points);
    add(c, "ns_gemm_" + label + "_overhead_us", fit.overhead_us, "us");
    add(c, "ns_gemm_" + label + "_tflops", fit.tflops, "TFLOP/s");
  }
  // All-to-all kernel transfer time vs size, from runs with several ranks (waiting removed).
  std::map<int, std::vector<CollectivePoint>> by_world;
  for (const auto& run : group_into_runs(traces)) {
    if (run.size() < 2) continue;
    for (const auto& x : alltoall_transfers(run)) {
      by_world[run.front().world_size].push_back(CollectivePoint{x.bytes, static_cast<double>(x.transfer_ns) / 1e3});
    }
  }
  for (const auto& [world, points] : by_world) {
    std::set<std::int64_t> sizes;
    for (const auto& p : points) sizes.insert(p.bytes);
    if (sizes.size() < 2 || points.size() < 3) continue;  // one message size cannot separate latency from bandwidth
    const CollectiveFit fit = fit_collective("all_to_all", world, points);
    const std::string prefix = "nccl_all_to_all_w" + std::to_string(world) + "_kernel_";
    add(c, prefix + "latency_us", fit.latency_us, "us");
    add(c, prefix + "algbw_GBps", fit.algbw_GBps, "GB/s");
    add(c, prefix + "busbw_GBps", fit.busbw_GBps, "GB/s");
  }
  if (c.parameters.empty()) {
    throw InputError((sources.empty() ? std::string("traces") : sources.front()) +
                     ": no NS GEMM kernels with known shapes to fit (record the trace with record_shapes=True)");
  }
  return c;
}

}  // namespace dionsim::analysis
