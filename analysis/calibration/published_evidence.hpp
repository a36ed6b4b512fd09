#pragma once
// How far `collective`'s prediction on a fabric preset can be trusted: what validate-collectives
// finds on the published nccl-tests rows of that preset (../shared/data/nccl-published), per size
// regime — how many rows, how many within the goal, and the spread of dionsim's time over
// the measured one. `collective` prints it under its table (and per row in --json), so that a
// number is never shown without its track record. The committed table is the uncalibrated
// model's on the committed CSV; a test recomputes it, so a model change that moves it fails until
// the table is regenerated with it.
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/calibration/published_collectives.hpp"

namespace dionsim::analysis {

struct RegimeEvidence {
  int rows = 0;
  int within_goal = 0;
  // dionsim / measured time: the median and the 5th / 95th percentiles (nearest rank:
  // sorted[floor(0.05 (n-1))], sorted[ceil(0.95 (n-1))]), 3 decimals.
  double median_ratio = 0, ratio_low = 0, ratio_high = 0;
};
struct PresetEvidence {
  std::string preset;
  std::array<RegimeEvidence, 3> regimes;  // indexed by SizeRegime
};

// From validate-collectives' predictions (predict_published, no calibration); presets in name order.
[[nodiscard]] std::vector<PresetEvidence> preset_evidence(const std::vector<RowPrediction>& predictions);
// The committed table (preset_evidence on the committed CSV).
[[nodiscard]] const std::vector<PresetEvidence>& published_preset_evidence();
// The committed evidence of a preset: its own rows', or where it has none, that of a preset of the
// same fabric in every field the model reads (h200-ndr400 is h100-ndr400's fabric: the model
// prices their calls alike) — PresetEvidence::preset says whose; part of each rack
// ("gb200-nvl72@64") takes the racks' record; nullopt for neither.
[[nodiscard]] std::optional<PresetEvidence> published_evidence_of(const std::string& preset);

}  // namespace dionsim::analysis
