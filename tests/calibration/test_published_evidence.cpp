// The track record `collective` prints under its table (analysis/calibration/published_evidence.hpp).
#include <catch2/catch.hpp>

#include "analysis/calibration/published_evidence.hpp"

using namespace dionsim;
using namespace dionsim::analysis;

TEST_CASE("the committed evidence per preset is validate-collectives' on the published rows", "[calibration][evidence]") {
  const auto rows = read_published_rows(std::string(DIONSIM_SHARED_DIR) + "/data/nccl-published/measurements.csv");
  const auto computed = preset_evidence(predict_published(rows));
  const auto& committed = published_preset_evidence();
  REQUIRE(computed.size() == committed.size());
  int all_rows = 0;
  for (std::size_t i = 0; i < computed.size(); ++i) {
    INFO(computed[i].preset);
    CHECK(computed[i].preset == committed[i].preset);
    for (std::size_t k = 0; k < 3; ++k) {
      const auto& c = computed[i].regimes[k];
      const auto& m = committed[i].regimes[k];
      INFO("regime " << k << ": {" << c.rows << ", " << c.within_goal << ", " << c.median_ratio << ", " << c.ratio_low
                     << ", " << c.ratio_high << "}");
      CHECK(c.rows == m.rows);
      CHECK(c.within_goal == m.within_goal);
      CHECK(c.median_ratio == Approx(m.median_ratio).margin(1e-12));
      CHECK(c.ratio_low == Approx(m.ratio_low).margin(1e-12));
      CHECK(c.ratio_high == Approx(m.ratio_high).margin(1e-12));
      CHECK(c.ratio_low <= c.median_ratio);
      CHECK(c.median_ratio <= c.ratio_high);
      all_rows += c.rows;
    }
  }
  CHECK(all_rows == 1632 - 72);  // every predicted row, none of the CollNet/SHARP ones
  CHECK(published_evidence_of("h100-ndr400").has_value());
  CHECK_FALSE(published_evidence_of("b300-xdr800").has_value());
  // No H200 rows over InfiniBand, but h200-ndr400 is h100-ndr400's fabric field for field.
  REQUIRE(published_evidence_of("h200-ndr400").has_value());
  CHECK(published_evidence_of("h200-ndr400")->preset == "h100-ndr400");
  CHECK_FALSE(published_evidence_of("nope").has_value());
}
