#pragma once
// Published nccl-tests output (../shared/data/nccl-published/measurements.csv): one row per
// printed line and placement, with the cluster as its source describes it. Read by
// `validate-collectives` (analysis/calibration/published_collectives.hpp predicts the rows).
#include <cstdint>
#include <string>
#include <vector>

namespace dionsim::analysis {

struct PublishedRow {
  std::string file;  // the CSV it was read from, for messages
  int line = 0;      // in the file, 1 = header
  std::string source, gpu, intra_fabric, nic, nccl_version, env, collective, placement, notes;
  int gpus_per_node = 0, nodes = 0, world = 0;
  std::int64_t size_bytes = 0;
  double time_us = 0;
};

// Reads the CSV; throws InputError naming file:line and the field for a malformed row, IoError
// when the file cannot be read.
[[nodiscard]] std::vector<PublishedRow> read_published_rows(const std::string& path);

}  // namespace dionsim::analysis
