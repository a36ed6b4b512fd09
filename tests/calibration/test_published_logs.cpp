// validate-collectives --nccl-tests: a user's own nccl-tests logs as published rows
// (analysis/measured/nccl_published.hpp rows_from_nccl_tests), predicted as the published CSV's.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "analysis/calibration/published_collectives.hpp"
#include "common/error.hpp"

using namespace dionsim;
using namespace dionsim::analysis;

namespace {

const std::string kSyntheticLog =
    std::string(DIONSIM_SOURCE_DIR) + "/tests/measured/data/alltoall_perf_synthetic_2x8.txt";

// A 2-node x 2-GPU all-reduce log: NCCL_DEBUG=INFO reports NCCL_ALGO, nccl-tests' banner the
// library, one data row per size, the 0-byte row nccl-tests prints first.
std::string two_by_two_log(const std::string& algo_line) {
  return "# nccl-tests version 2.17.8 nccl-headers=22902 nccl-library=22902\n"
         "# Collective test starting: all_reduce_perf\n"
         "#  Rank  0 Group  0 Pid 1 on hostA device  0 [0000:1b:00] NVIDIA H100 80GB HBM3\n"
         "#  Rank  1 Group  0 Pid 2 on hostA device  1 [0000:2b:00] NVIDIA H100 80GB HBM3\n"
         "#  Rank  2 Group  0 Pid 3 on hostB device  0 [0000:1b:00] NVIDIA H100 80GB HBM3\n"
         "#  Rank  3 Group  0 Pid 4 on hostB device  1 [0000:2b:00] NVIDIA H100 80GB HBM3\n" +
         algo_line +
         "           0             0     float     sum      -1    15.50    0.00    0.00       0    15.40    0.00    0.00       0\n"
         "        8192          2048     float     sum      -1    40.10    0.20    0.31       0    40.30    0.20    0.31       0\n"
         "   134217728      33554432     float     sum      -1  3000.00   44.74   67.11       0  3010.00   44.59   66.89       0\n"
         "# Collective test concluded: all_reduce_perf\n"
         "# Collective test starting: sendrecv_perf\n"
         "#  Rank  0 Group  0 Pid 1 on hostA device  0 [0000:1b:00] NVIDIA H100 80GB HBM3\n"
         "#  Rank  1 Group  0 Pid 2 on hostB device  0 [0000:1b:00] NVIDIA H100 80GB HBM3\n"
         "   134217728      33554432     float     sum      -1  2800.00   47.94   47.94       0  2800.00   47.94   47.94       0\n";
}

}  // namespace

TEST_CASE("nccl-tests logs become published rows on the preset the user names", "[calibration][published][logs]") {
  const auto runs = read_nccl_tests_output(kSyntheticLog);
  const auto rows = rows_from_nccl_tests(runs, kSyntheticLog, "p5-efa");
  // 9 printed sizes, each out-of-place and in-place.
  REQUIRE(rows.size() == 18);
  for (const auto& r : rows) {
    CHECK(r.preset == "p5-efa");
    CHECK(r.collective == "alltoall");
    CHECK(r.nodes == 2);
    CHECK(r.gpus_per_node == 8);
    CHECK(r.world == 16);
    CHECK(r.gpu == "NVIDIA H100 80GB HBM3");
    CHECK(r.nccl_version == "2.28.7");
    CHECK(r.file == kSyntheticLog);
  }
  CHECK(rows[0].placement == "out-of-place");
  CHECK(rows[0].size_bytes == 65536);
  CHECK(rows[0].time_us == 23.04);
  CHECK(rows[1].placement == "in-place");
  CHECK(rows[1].time_us == 23.05);
  CHECK(rows[17].size_bytes == 4294967296LL);
  CHECK(rows[17].time_us == 95548.10);
  // The named preset wins over the cluster table (which maps an H100 without "EFA" to h100-ndr400).
  CHECK(preset_for(rows[0]) == std::optional<std::string>("p5-efa"));
}

TEST_CASE("a log's rows are predicted exactly as the same rows of a published CSV", "[calibration][published][logs]") {
  const auto runs = read_nccl_tests_output(kSyntheticLog);
  const auto logged = rows_from_nccl_tests(runs, kSyntheticLog, "h100-ndr400");
  // The same rows as measurements.csv would hold them: the cluster table maps the GPU to h100-ndr400.
  auto published = logged;
  for (auto& r : published) {
    r.preset.clear();
    r.nic = "not stated";
  }
  REQUIRE(preset_for(published[0]) == std::optional<std::string>("h100-ndr400"));
  const auto a = predict_published(logged);
  const auto b = predict_published(published);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO(i);
    CHECK(a[i].skipped.empty());
    CHECK(a[i].preset == "h100-ndr400");
    CHECK(a[i].dionsim_us == b[i].dionsim_us);
    CHECK(a[i].baseline_us == b[i].baseline_us);
    CHECK(a[i].dionsim_us > 0);
  }
  // On another fabric the same log is another prediction (EFA's latencies and rate).
  const auto efa = predict_published(rows_from_nccl_tests(runs, kSyntheticLog, "p5-efa"));
  CHECK(efa[0].dionsim_us != a[0].dionsim_us);
}

TEST_CASE("a log's NCCL variables force the algorithm, its 0-byte row is priced at 0, its send/recv is p2p",
          "[calibration][published][logs]") {
  const auto forced = parse_nccl_tests_output(
      two_by_two_log("hostA:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Tree\n"), "tree.log");
  const auto rows = rows_from_nccl_tests(forced, "tree.log", "h100-ndr400");
  // 3 sizes x 2 placements of the all-reduce (the 0-byte row too), 1 x 2 of send/recv.
  REQUIRE(rows.size() == 8);
  CHECK(rows[0].env == "NCCL_ALGO=Tree");
  CHECK(rows[0].nccl_version == "2.29.2");
  CHECK(rows[0].nodes == 2);
  CHECK(rows[0].gpus_per_node == 2);
  CHECK(rows[0].size_bytes == 0);
  CHECK(rows[0].time_us == 15.50);
  CHECK(rows[6].collective == "sendrecv");
  CHECK(rows[6].nodes == 2);
  CHECK(rows[6].gpus_per_node == 1);
  const auto predicted = predict_published(rows);
  CHECK(predicted[0].skipped.empty());
  CHECK(predicted[0].dionsim_us == 0);  // an empty call: NCCL >= 2.22 launches nothing
  CHECK(predicted[2].algorithm == "tree");
  CHECK(predicted[4].algorithm == "tree");
  // Send/recv between 2 hosts of one GPU: one network peer, Simple, NCCL_ALGO governs no p2p; 128 MiB
  // on 2 channels of 21 GB/s (the NIC's 48 would be faster): ~3.2 ms + latency.
  CHECK(predicted[6].skipped.empty());
  CHECK(predicted[6].algorithm == "p2p");
  CHECK(predicted[6].protocol == "simple");
  CHECK(predicted[6].dionsim_us == Approx(134217728.0 / (2 * 21.0 * 1000)).epsilon(0.01));
  CHECK(predicted[6].baseline == "closed-form");
  CHECK(predicted[6].baseline_us > 0);
  // Without the variable NCCL's own choice runs: on 2 x 2 H100s a ring at both sizes.
  const auto free = predict_published(
      rows_from_nccl_tests(parse_nccl_tests_output(two_by_two_log(""), "free.log"), "free.log", "h100-ndr400"));
  CHECK(free[2].algorithm == "ring");
  CHECK(free[4].algorithm == "ring");
  CHECK(free[2].dionsim_us != predicted[2].dionsim_us);
}

TEST_CASE("a log whose shape cannot be read is refused naming it", "[calibration][published][logs]") {
  // No rank lines: no shape.
  const auto bare = parse_nccl_tests_output(
      "# Collective test starting: alltoall_perf\n"
      "        1024   128  float  none  -1  10.0  0.10  0.05  0  10.0  0.10  0.05  0\n",
      "bare.log");
  CHECK_THROWS_WITH(rows_from_nccl_tests(bare, "bare.log", "h100-ndr400"),
                    Catch::Contains("bare.log:1: ranks: got 'no '#  Rank N ... on HOST' lines'"));
  // 3 ranks on 2 hosts.
  const auto uneven = parse_nccl_tests_output(
      "# Collective test starting: alltoall_perf\n"
      "#  Rank  0 Group  0 Pid 1 on a device  0 [0000:1b:00] NVIDIA H100\n"
      "#  Rank  1 Group  0 Pid 2 on a device  1 [0000:1b:00] NVIDIA H100\n"
      "#  Rank  2 Group  0 Pid 3 on b device  0 [0000:1b:00] NVIDIA H100\n"
      "        1024   128  float  none  -1  10.0  0.10  0.05  0  10.0  0.10  0.05  0\n",
      "uneven.log");
  CHECK_THROWS_WITH(rows_from_nccl_tests(uneven, "uneven.log", "h100-ndr400"),
                    Catch::Contains("uneven.log:1: ranks: got '3', expected a multiple of the host count (2)"));
}
