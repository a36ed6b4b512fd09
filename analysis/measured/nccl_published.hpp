#pragma once
// Published nccl-tests output (../shared/data/nccl-published/measurements.csv): one row per
// printed line and placement, with the cluster as its source describes it. Read by
// `validate-collectives` (analysis/calibration/published_collectives.hpp predicts the rows),
// which also takes a user's own nccl-tests logs as such rows (rows_from_nccl_tests).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/measured/measurements.hpp"

namespace dionsim::analysis {

struct PublishedRow {
  std::string file;  // the CSV it was read from, for messages
  int line = 0;      // in the file, 1 = header
  std::string source, gpu, intra_fabric, nic, nccl_version, env, collective, placement, notes;
  int gpus_per_node = 0, nodes = 0, world = 0;
  std::int64_t size_bytes = 0;
  double time_us = 0;
  // The fabric preset the user named for these rows (validate-collectives --nccl-tests LOG
  // --fabric F); empty: the committed cluster -> preset table picks it from gpu and nic.
  std::string preset;
};

// Reads the CSV; throws InputError naming file:line and the field for a malformed row, IoError
// when the file cannot be read.
[[nodiscard]] std::vector<PublishedRow> read_published_rows(const std::string& path);

// A collective's name as nccl-tests and NCCL spell it — all_reduce(_perf), AllReduce, all-gather,
// all_to_all, send_recv — in measurements.csv's form (allreduce, allgather, alltoall, sendrecv);
// nullopt for a name that is no nccl-tests test.
[[nodiscard]] std::optional<std::string> published_collective_name(const std::string& name);

// The rows of nccl-tests logs (read_nccl_tests_output) as published rows on the fabric preset
// `preset`: one per printed line and placement (out-of-place, and in-place where printed), the
// shape from the log's rank lines (hosts, ranks), the GPU from its device name, the NCCL
// variables NCCL_DEBUG=INFO reported as the row's env, the NIC unstated (the preset's). A 0-byte
// row is a row as in measurements.csv (the model prices it at 0: NCCL >= 2.22 discards an empty
// call; nccl-tests then times only its own loop). `file` names the
// log in messages and in each row's source. InputError naming file:line for a block without
// rank lines or whose ranks are not the same count on every host.
[[nodiscard]] std::vector<PublishedRow> rows_from_nccl_tests(const std::vector<NcclTestsRun>& runs,
                                                             const std::string& file, const std::string& preset);

}  // namespace dionsim::analysis
