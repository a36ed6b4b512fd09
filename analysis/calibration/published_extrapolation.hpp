#pragma once
// `dionsim validate-collectives --extrapolate`: what calibrating on the cluster you have buys at
// the node counts you would buy. For every published cluster with rows at two node counts or more
// (one repository's rows of one GPU label and GPUs per node), the collective model's parameters
// are fitted (collective_fit.hpp, as `calibrate --nccl-tests` fits a user's log) to the rows at its
// smallest node count only, and every row at its larger node counts is predicted twice: from the
// nominal preset (validate-collectives' prediction) and from that calibration. The fitted rows are
// never scored; nothing of the larger node counts enters the fit.
#include <string>
#include <vector>

#include "analysis/calibration/collective_fit.hpp"
#include "analysis/calibration/published_collectives.hpp"

namespace dionsim::analysis {

struct ClusterExtrapolation {
  std::string cluster;  // "<repository>|<gpu label>"
  std::string preset;
  int gpus_per_node = 0;
  int fit_nodes = 0;                 // hosts of the fitted rows: the cluster's smallest node count
  std::vector<int> predicted_nodes;  // its larger node counts, ascending
  int fit_rows = 0;
  std::string not_fitted;  // why no fit (too few rows for its free parameters): the nominal model predicts
  CollectiveModelFit fit;  // when not_fitted is empty
  std::vector<RegimeSummary> held_out;  // its predicted rows: calibrated ("dionsim") vs nominal ("baseline")
};

struct PublishedExtrapolation {
  std::vector<ClusterExtrapolation> clusters;
  // The held-out rows, with dionsim_us = the calibrated prediction and baseline_us = the nominal
  // one (so that summarize() compares the two on the same rows).
  std::vector<RowPrediction> held_out;
  std::vector<RegimeSummary> summary;
};

// `predictions` from predict_published (nominal: no calibration) of the rows it points to.
[[nodiscard]] PublishedExtrapolation extrapolate_published(const std::vector<RowPrediction>& predictions);

}  // namespace dionsim::analysis
