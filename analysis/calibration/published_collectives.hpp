#pragma once
// `dionsim validate-collectives`: every row of published nccl-tests output
// (../shared/data/nccl-published/measurements.csv) predicted from the cluster's nominal
// description — the fabric preset the committed mapping table names, the row's GPUs per node,
// nodes and any NCCL_ALGO / NCCL_PROTO its env forces — by dionsim's collective model and by
// NCCL's own tuning model (all-to-all, which NCCL's model does not cover: by the closed form
// `whatif` used before this model, max(intra, inter) + latency). Nothing is fitted to the rows.
//
// (The CSV reader is analysis/measured/nccl_published.hpp; the model is sim/collective_model.hpp. This
// validation sits with the calibration, above sim/, so that the simulator needs no reader of measured data.)
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/calibration/collective_fit.hpp"
#include "analysis/measured/nccl_published.hpp"
#include "sim/nccl_env.hpp"
#include "topologies/topology.hpp"

namespace dionsim::analysis {

// The committed cluster -> preset table: the first entry whose `gpu` text occurs in the row's
// gpu column (and whose `nic` text, when set, in its nic column) names the preset.
struct ClusterPreset {
  const char* gpu;
  const char* nic;  // "" = any; else a word of the NIC column starts with it ("EFA" in "32x EFAv2")
  const char* preset;
};
[[nodiscard]] const std::vector<ClusterPreset>& cluster_presets();
// nullopt when no entry matches.
[[nodiscard]] std::optional<std::string> preset_for(const PublishedRow& row);

// The NVLink domains a row's ranks span on its preset (NCCL's node count; 1 = no network: one H100
// node, or any trays of one NVL72 rack); nullopt when no preset matches.
[[nodiscard]] std::optional<int> nvlink_domains_of(const PublishedRow& row);

// The NIC bandwidth per GPU (GB/s, nominal) a row's nic column states: "<n>x<rate> Gb/s per
// node|tray" (an EFA generation may sit between: "32x EFAv2 100 Gb/s per node") or "<r> Tb/s per
// node", over the row's GPUs per node. nullopt where the source leaves it unstated (the column
// says "not stated"; an inference there is not a statement) or names no rate: the preset's holds.
[[nodiscard]] std::optional<double> stated_nic_GBps_per_gpu(const std::string& nic, int gpus_per_node);

// One published cluster: one repository's rows of one GPU label, "<repository>|<gpu>" (the
// priors, the fabric spread and --extrapolate group rows by it).
[[nodiscard]] std::string cluster_of(const PublishedRow& row);

enum class SizeRegime { latency, middle, bandwidth };  // <= 64 KiB, between, >= 64 MiB
[[nodiscard]] SizeRegime regime_of(std::int64_t size_bytes);
[[nodiscard]] const char* to_string(SizeRegime r);
// The goal per regime: within a factor 1.5 (latency), 25 % (middle), 10 % (bandwidth).
[[nodiscard]] bool within_goal(SizeRegime r, double predicted_over_measured);

struct RowPrediction {
  const PublishedRow* row = nullptr;
  std::string preset;
  std::optional<double> stated_nic_GBps;  // per GPU, where the row states its NIC (replaces the preset's)
  int nvlink_domains = 0;  // NCCL's node count: the NVLink domains the row's ranks span (1 = no network)
  std::string skipped;  // why the row is not predicted (CollNet / SHARP, no preset, an env NCCL refuses); empty when predicted
  std::string algorithm, protocol;
  std::string chosen_by;  // "nccl" or the preset's tuner plugin (CollectiveCost::chosen_by); empty for all-to-all
  double dionsim_us = 0;
  double baseline_us = 0;        // NCCL's tuning model (all-to-all: the old closed form)
  std::string baseline;          // "nccl" or "closed-form"
  std::string nccl_algorithm, nccl_protocol;
};

// Relative changes to every row's model, after any calibration (published_intervals.hpp evaluates
// the priors' ends with them): the NIC's effective rate and NCCL's NVLink rate as factors (clamped
// to their valid ranges), the cost of a network step added.
struct ModelPerturbation {
  double nic_efficiency_factor = 1, nvlink_scale_factor = 1, net_hop_extra_us = 0;
};

// Predicts every row; throws InputError naming the line for a row no preset matches or whose
// shape the model refuses.
// `calibration`, when given, is applied to every row's preset and model (collective_fit.hpp):
// report which rows it was fitted to, since those rows are then not predictions.
struct Calibration;
[[nodiscard]] std::vector<RowPrediction> predict_published(const std::vector<PublishedRow>& rows,
                                                           const Calibration* calibration = nullptr,
                                                           const ModelPerturbation* perturbation = nullptr);

// A predicted row (not skipped) as the collective fit takes it (collective_fit.hpp): the fabric it
// is predicted on — its preset, with the NIC the row states — and the measured call.
[[nodiscard]] topo::FabricSpec row_fabric(const RowPrediction& prediction);
// The NCCL variables a row's env sets (sim/nccl_env.hpp; InputError naming the row for a value NCCL
// could not run with). row_fabric applies them; a row whose env forces CollNet is skipped first.
[[nodiscard]] sim::NcclEnv nccl_env_of(const PublishedRow& row);
[[nodiscard]] CollectiveSample row_sample(const RowPrediction& prediction);

struct RegimeSummary {
  SizeRegime regime = SizeRegime::latency;
  int rows = 0;
  int dionsim_within = 0, baseline_within = 0;
  double dionsim_median_abs_err = 0, baseline_median_abs_err = 0;  // |pred/meas - 1|
};
[[nodiscard]] std::vector<RegimeSummary> summarize(const std::vector<RowPrediction>& predictions);
// The same per fabric preset: how far each kind of cluster's predictions can be trusted (a regime
// without rows of that preset is left out).
[[nodiscard]] std::map<std::string, std::vector<RegimeSummary>> summarize_by_preset(
    const std::vector<RowPrediction>& predictions);
// The same per collective (nccl-tests' name: allgather, allreduce, alltoall, reducescatter).
[[nodiscard]] std::map<std::string, std::vector<RegimeSummary>> summarize_by_collective(
    const std::vector<RowPrediction>& predictions);

}  // namespace dionsim::analysis
