#include "analysis/calibration/published_extrapolation.hpp"

#include <iterator>
#include <map>
#include <tuple>

#include "common/error.hpp"

namespace dionsim::analysis {

PublishedExtrapolation extrapolate_published(const std::vector<RowPrediction>& predictions) {
  // (cluster, GPUs per node, stated NIC) -> node count -> its predicted rows. The stated NIC is
  // part of the key: one repository may publish clusters of one GPU label with different NICs.
  using Key = std::tuple<std::string, int, double>;
  std::map<Key, std::map<int, std::vector<const RowPrediction*>>> clusters;
  std::map<Key, std::string> preset_of;
  for (const auto& p : predictions) {
    if (!p.skipped.empty()) continue;
    const PublishedRow& r = *p.row;
    const Key key{cluster_of(r), r.gpus_per_node, p.stated_nic_GBps.value_or(0.0)};
    clusters[key][r.world / r.gpus_per_node].push_back(&p);
    preset_of[key] = p.preset;
  }
  PublishedExtrapolation out;
  for (const auto& [key, by_nodes] : clusters) {
    if (by_nodes.size() < 2) continue;
    ClusterExtrapolation c;
    c.cluster = std::get<0>(key);
    c.gpus_per_node = std::get<1>(key);
    c.preset = preset_of[key];
    const auto& [fit_nodes, fit_rows] = *by_nodes.begin();
    c.fit_nodes = fit_nodes;
    c.fit_rows = static_cast<int>(fit_rows.size());
    std::vector<CollectiveSample> samples;
    for (const RowPrediction* p : fit_rows) samples.push_back(row_sample(*p));
    const topo::FabricSpec fabric = row_fabric(*fit_rows.front());
    CollectiveFitParameters parameters = default_parameters(fabric);
    try {
      c.fit = fit_collective_model(fabric, samples);
      parameters = c.fit.value;
    } catch (const InputError& e) {
      c.not_fitted = e.what();
    }
    std::vector<RowPrediction> held_out;
    for (auto it = std::next(by_nodes.begin()); it != by_nodes.end(); ++it) {
      c.predicted_nodes.push_back(it->first);
      std::vector<CollectiveSample> targets;
      for (const RowPrediction* p : it->second) targets.push_back(row_sample(*p));
      const auto calibrated = predict_samples(row_fabric(*it->second.front()), parameters, targets);
      for (std::size_t i = 0; i < it->second.size(); ++i) {
        RowPrediction h = *it->second[i];
        h.baseline = "nominal";
        h.baseline_us = h.dionsim_us;
        h.dionsim_us = calibrated[i];
        held_out.push_back(std::move(h));
      }
    }
    c.held_out = summarize(held_out);
    out.held_out.insert(out.held_out.end(), held_out.begin(), held_out.end());
    out.clusters.push_back(std::move(c));
  }
  out.summary = summarize(out.held_out);
  return out;
}

}  // namespace dionsim::analysis
