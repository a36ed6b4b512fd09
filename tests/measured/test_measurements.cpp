#include <catch2/catch.hpp>
#include <filesystem>
#include <set>

#include "analysis/measured/measurements.hpp"
#include "common/error.hpp"

using namespace dionsim;
using namespace dionsim::analysis;

namespace {

const std::filesystem::path kData = std::filesystem::path(DIONSIM_SHARED_DIR) / "data";
const std::string kHeader =
    "source,run,hardware,gpus_per_node,nodes,world,model,optimizer,ns,scope,fraction,capacity_factor,metric,value,unit,"
    "notes\n";

std::string error_of(const std::string& text) {
  try {
    (void)parse_measurement_csv(text, "m.csv");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("seed measurements: every row typed, configurations grouped", "[measurements][shared]") {
  const auto rows = read_measurement_csv(kData / "seed-measurements.csv");
  CHECK(rows.size() == 68);
  const auto groups = group_configurations(rows);
  // 1-node: 3 scopes; 2-node: 2 scopes; isolated: 2 models × 3 scopes × 2 fractions; B200: 2 × 3.
  CHECK(groups.size() == 3 + 2 + 12 + 6);
  const MeasuredConfiguration& first = groups[0];
  CHECK(first.config.run == "1node-real-step");
  CHECK(first.config.hardware == "H100 SXM");
  CHECK(first.config.world == 4);
  CHECK(first.config.optimizer == "nordion2");
  CHECK(first.config.scope == "local");
  CHECK(first.config.fraction == 0.25);
  CHECK_FALSE(first.config.capacity_factor.has_value());
  CHECK(first.metrics.size() == 8);
  CHECK(first.metrics.at("step_wall_ms") == 487.9);
  CHECK(first.metrics.at("a2a_payload_MB") == 655);
  CHECK(first.metrics.at("opt_kernel_launches") == 60);
  const auto two_node = std::find_if(groups.begin(), groups.end(), [](const auto& g) {
    return g.config.run == "2node-real-step" && g.config.scope == "global";
  });
  REQUIRE(two_node != groups.end());
  CHECK(two_node->config.nodes == 2);
  CHECK(two_node->config.world == 8);
  CHECK(two_node->metrics.size() == 10);
  CHECK(two_node->metrics.at("a2a_effective_GBps") == 18.9);
  std::set<std::string> metrics;
  for (const auto& r : rows) metrics.insert(r.metric);
  for (const auto& m : metrics) CHECK(find_metric(m) != nullptr);
}

TEST_CASE("measurement CSV errors name file, line, column, value and expectation", "[measurements]") {
  const std::string ok_row = "s,r,H100,4,1,4,seed-5120x8,NorDion2,gram,local,0.25,auto,a2a_ms,4.1,ms,n\n";
  CHECK(parse_measurement_csv(kHeader + ok_row, "m.csv").size() == 1);
  // A header alone names the file (it reached `--where: got ''`).
  CHECK(error_of(kHeader) == "m.csv: rows: got 'none', expected at least one measured row under the header");
  CHECK_THAT(error_of("source,run,metric,value\n"),
             Catch::Contains("m.csv:1: header") && Catch::Contains("expected the column 'hardware'"));
  CHECK_THAT(error_of(kHeader.substr(0, kHeader.size() - 1) + ",extra\n"),
             Catch::Contains("m.csv:1: header: got 'extra'"));
  CHECK(error_of(kHeader + "s,r,H100,4,1,4,m,NorDion2,gram,local,0.25,auto,a2a_furlongs,4.1,ms,n\n")
            .starts_with("m.csv:2: metric: got 'a2a_furlongs', expected one of step_wall_ms"));
  CHECK(error_of(kHeader + "s,r,H100,4,1,4,m,NorDion2,gram,local,0.25,auto,a2a_ms,fast,ms,n\n") ==
        "m.csv:2: value: got 'fast', expected a number");
  CHECK(error_of(kHeader + ok_row + "s,r,H100,4,1,4,m,NorDion2,gram,local,0.25,auto,a2a_ms,4.1,s,n\n") ==
        "m.csv:3: unit: got 's', expected 'ms' for a2a_ms");
  CHECK(error_of(kHeader + "s,r,H100,4,2,4,m,NorDion2,gram,local,0.25,auto,a2a_ms,4.1,ms,n\n") ==
        "m.csv:2: world: got '4', expected gpus_per_node x nodes = 8");
  CHECK(error_of(kHeader + "s,r,H100,4,1,4,m,NorDion2,gram,regional,0.25,auto,a2a_ms,4.1,ms,n\n") ==
        "m.csv:2: scope: got 'regional', expected local, global or global_capped");
  CHECK(error_of(kHeader + "s,r,H100,4,1,4,m,NorDion2,gram,local,1.5,auto,a2a_ms,4.1,ms,n\n") ==
        "m.csv:2: fraction: got '1.5', expected a fraction in (0, 1]");
  CHECK(error_of(kHeader + "s,r,H100,4,1,4,m,Adam,gram,local,0.25,auto,a2a_ms,4.1,ms,n\n") ==
        "m.csv:2: optimizer: got 'Adam', expected Dion2 or NorDion2");
  CHECK(error_of(kHeader + "s,r,H100,4,1,4,m,Dion2,gram,local,0.25,lots,a2a_ms,4.1,ms,n\n") ==
        "m.csv:2: capacity_factor: got 'lots', expected a number");
  CHECK(error_of(kHeader + "s,r,H100,4,1,4,m,Dion2,gram,local,0.25,auto,mfu_pct,140,%,n\n") ==
        "m.csv:2: value: got '140', expected a percentage in [0, 100]");
  CHECK(error_of(kHeader + "s,r,H100,4,1,4,m,Dion2,gram,local,0.25,auto,a2a_ms,4.1,ms\n") ==
        "m.csv:2: row: got '15 fields', expected 16 fields like the header");
  CHECK(error_of(kHeader + ok_row + ok_row) ==
        "m.csv:3: metric: got 'a2a_ms', expected each metric once per configuration (first at line 2)");
  CHECK(error_of("") ==
        "m.csv:1: header: got '', expected the columns source,run,hardware,gpus_per_node,nodes,world,"
        "model,optimizer,ns,scope,fraction,capacity_factor,metric,value,unit,notes");
  CHECK_THROWS_AS(read_measurement_csv("/nonexistent.csv"), IoError);
}

TEST_CASE("H200 anchors: GEMM, collectives and reference step times typed", "[measurements][shared]") {
  const Anchors a = read_anchors_csv(kData / "h200-anchors.csv");
  CHECK(a.gemm.size() == 6);
  CHECK(a.collectives.size() == 10);
  CHECK(a.reference_steps.size() == 21);
  CHECK(a.notes.size() == 1);
  CHECK(a.gemm[0].m == 8192);
  CHECK(a.gemm[0].tflops == 775.4);
  CHECK(a.gemm[1].n == 1280);
  CHECK(a.gemm[1].k == 5120);
  // The notes give the measured time next to each busbw; the nccl-tests conventions reproduce it.
  const CollectiveAnchor& a2a_1m = a.collectives[0];
  CHECK(a2a_1m.op == "all_to_all");
  CHECK(a2a_1m.world == 2);
  CHECK(a2a_1m.bytes == 1048576);
  CHECK(a2a_1m.time_us() == Approx(97.0).epsilon(0.01));  // "time 0.097 ms"
  CHECK(a.collectives[9].op == "all_gather");
  CHECK(a.collectives[9].time_us() == Approx(2062.0).epsilon(0.01));  // "time 2.062 ms"
  const ReferenceStepAnchor& first = a.reference_steps[0];
  CHECK(first.optimizer == "nordion2");
  CHECK(first.model == "gpt-5120x8");
  CHECK(first.scope == "local");
  CHECK(first.opt_step_ms == 56.89);
  CHECK(first.compiled);
  int eager = 0;
  for (const auto& s : a.reference_steps) eager += s.compiled ? 0 : 1;
  CHECK(eager == 12);
}

TEST_CASE("anchor CSV errors", "[measurements]") {
  const std::string header = "what,world,shape,bytes,scope,fraction,value,unit,notes\n";
  auto err = [&](const std::string& row) {
    try {
      (void)parse_anchors_csv(header + row, "a.csv");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(err("gemm_bf16,1,8192x8192,,,,775.4,TFLOP/s,n\n") ==
        "a.csv:2: shape: got '8192x8192', expected MxNxK with positive integers");
  CHECK(err("gemm_bf16,1,8x8x8,,,,775.4,GB/s,n\n") == "a.csv:2: unit: got 'GB/s', expected 'TFLOP/s' for gemm_bf16");
  CHECK(err("alltoall_busbw,1,,1024,,,5.4,GB/s,n\n") == "a.csv:2: world: got '1', expected an integer in [2, 1073741824]");
  CHECK_THAT(err("teleport_busbw,2,,1024,,,5.4,GB/s,n\n"), Catch::StartsWith("a.csv:2: what: got 'teleport_busbw'"));
  CHECK(err("gemm_bf16,1,8x8x8,,,,-3,TFLOP/s,n\n") == "a.csv:2: value: got '-3', expected a positive number");
  // The fuzzer's findings: a GEMM's world was never read (nan passed), and a header alone reached
  // the kernel fit, which named no file.
  CHECK(err("gemm_bf16,nan,8x8x8,,,,775.4,TFLOP/s,n\n") == "a.csv:2: world: got 'nan', expected an integer in [1, 1]");
  CHECK(err("note_only,x,,,,,,,failed to compile\n") == "a.csv:2: world: got 'x', expected an integer in [1, 1073741824]");
  CHECK(err("") == "a.csv: rows: got 'none', expected at least one measured anchor row under the header");
  CHECK(err("note_only,2,,,,,,,failed to compile\n") ==
        "a.csv: rows: got 'none', expected at least one measured anchor row under the header");
}

TEST_CASE("nccl-tests output: blocks, ranks, hosts, rows, and noise skipped", "[measurements][nccl-tests]") {
  const auto path =
      std::filesystem::path(DIONSIM_SOURCE_DIR) / "tests/measured/data/alltoall_perf_synthetic_2x8.txt";
  const auto runs = read_nccl_tests_output(path);
  REQUIRE(runs.size() == 1);
  const NcclTestsRun& r = runs[0];
  CHECK(r.program == "alltoall_perf");
  CHECK(r.op == "all_to_all");
  CHECK(r.world == 16);
  CHECK(r.nodes == 2);
  CHECK(r.device == "NVIDIA H100 80GB HBM3");
  REQUIRE(r.rows.size() == 9);
  CHECK(r.rows[0].bytes == 65536);
  CHECK(r.rows[0].count == 16384);
  CHECK(r.rows[0].type == "float");
  CHECK(r.rows[0].time_us == 23.04);
  CHECK(r.rows[8].bytes == 4294967296LL);
  CHECK(r.rows[8].busbw_GBps == 41.74);
  CHECK(r.rows[8].in_place_time_us == 95548.10);
  CHECK(r.nccl_version == "2.28.7");  // the banner's nccl-library=22807
  CHECK(to_json(r)["nccl_version"] == "2.28.7");

  // Two blocks in one log (as a script running several cases writes), old format without root column.
  const std::string two =
      "mpirun noise\n# Collective test starting: all_gather_perf\n#  Rank  0 Group  0 Pid 1 on a device 0 [0000:00:00] GPU\n"
      "#  Rank  1 Group  0 Pid 2 on a device 1 [0000:01:00] GPU\n        1024   128  float  none  10.0  0.10  0.05  0  10.0  "
      "0.10  0.05  0\n"
      "# Collective test starting: all_reduce_perf\n#  Rank  0 Group  0 Pid 1 on a device 0 [0000:00:00] GPU\n"
      "        1024   256  float  sum  -1  12.5  0.08  0.00  0  12.0  0.09  0.00  0\r\n";
  const auto both = parse_nccl_tests_output(two, "log.txt");
  REQUIRE(both.size() == 2);
  CHECK(both[0].op == "all_gather");
  CHECK(both[0].world == 2);
  CHECK(both[0].rows[0].time_us == 10.0);
  CHECK(both[1].op == "all_reduce");
  CHECK(both[1].rows[0].time_us == 12.5);

  // NCCL_DEBUG=INFO: NCCL reports the variables it read from the environment, per block.
  const std::string info =
      "# Collective test starting: all_reduce_perf\n#  Rank  0 Group  0 Pid 1 on a device 0 [0000:00:00] GPU\n"
      "a:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Ring\n"
      "a:1:1 [0] NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.\n"
      "a:1:1 [0] NCCL INFO NCCL_PROTO set by environment to LL128\n"
      "a:1:1 [0] NCCL INFO NCCL_PROTO set by environment to Simple\n"
      "a:1:1 [0] NCCL INFO Channel 00/24 : 0 1\n"
      "        1024   256  float  sum  -1  12.5  0.08  0.00  0  12.0  0.09  0.00  0\n"
      "# Collective test starting: all_gather_perf\n"
      "        1024   128  float  none  -1  10.0  0.10  0.05  0  10.0  0.10  0.05  0\n";
  const auto logged = parse_nccl_tests_output(info, "info.log");
  REQUIRE(logged.size() == 2);
  CHECK(logged[0].env == std::map<std::string, std::string>{
                             {"NCCL_ALGO", "Ring"}, {"NCCL_NVLS_ENABLE", "0"}, {"NCCL_PROTO", "Simple"}});
  CHECK(logged[1].env.empty());  // another block: its own NCCL
  CHECK(to_json(logged[0])["env"]["NCCL_ALGO"] == "Ring");
  CHECK_FALSE(to_json(logged[1]).contains("env"));
  CHECK(logged[0].nccl_version.empty());  // neither a banner nor NCCL's version line
  CHECK_FALSE(to_json(logged[0]).contains("nccl_version"));

  // The NCCL that ran a block: the last banner before it, or NCCL's own version line inside it
  // (which wins: it is the library the block loaded); a code that is no NCCL_VERSION_CODE is none.
  const std::string versions =
      "# nccl-tests version 2.17.8 nccl-headers=22902 nccl-library=22902\n"
      "# Collective test starting: all_reduce_perf\n"
      "        1024   256  float  sum  -1  12.5  0.08  0.00  0  12.0  0.09  0.00  0\n"
      "# Collective test starting: all_gather_perf\n"
      "a:1:1 [0] NCCL INFO NCCL version 2.30.4+cuda13.1\n"
      "        1024   128  float  none  -1  10.0  0.10  0.05  0  10.0  0.10  0.05  0\n"
      "# nccl-tests version 2.17.8 nccl-headers=22902 nccl-library=2x902\n"
      "# Collective test starting: alltoall_perf\n"
      "NCCL version 2.29.300+cuda13.1\n"
      "        1024   128  float  none  -1  10.0  0.10  0.05  0  10.0  0.10  0.05  0\n";
  const auto versioned = parse_nccl_tests_output(versions, "v.log");
  REQUIRE(versioned.size() == 3);
  CHECK(versioned[0].nccl_version == "2.29.2");
  CHECK(versioned[1].nccl_version == "2.30.4");
  CHECK(versioned[2].nccl_version.empty());
  CHECK(nccl_version_code("2.29.2") == 22902);
  CHECK(nccl_version_code("2.29") == 0);
  CHECK(nccl_version_code("2.29.2+cuda13") == 0);
  // A damaged log's endless version line is no version, and no crash.
  const auto endless = parse_nccl_tests_output("# Collective test starting: alltoall_perf\nNCCL version " +
                                                   std::string(1 << 20, '7') + "\n" +
                                                   "        1024   128  float  none  -1  10.0  0.10  0.05  0  10.0  0.10  0.05  0\n",
                                               "e.log");
  CHECK(endless.at(0).nccl_version.empty());

  CHECK_THROWS_WITH(
      parse_nccl_tests_output(
          "# Collective test starting: alltoall_perf\n  1024  256  float  none  -1  fast  0.1  0.1  0  1  1  1  0\n",
          "x.txt"),
      "x.txt:2: time: got 'fast', expected a non-negative number of at most 1e15");
  CHECK_THROWS_WITH(parse_nccl_tests_output("# Collective test starting: alltoall_perf\n# nothing ran\n", "x.txt"),
                    Catch::StartsWith("x.txt: content: got 'no nccl-tests result rows'"));
  // Every column and rank-line field is nccl-tests' own, used by dionsim or not: a value it would
  // never print is a bad file, named by line and field.
  const std::string head = "# Collective test starting: alltoall_perf\n";
  const std::string row_ok = "  1024  256  float  none  -1  10.0  0.1  0.1  0  10.0  0.1  0.1  N/A\n";
  CHECK_NOTHROW(parse_nccl_tests_output(head + "#  Rank  0 Group  0 Pid  12 on a device  0 [0000:01:00.0] GPU\n" + row_ok, "r.txt"));
  CHECK_NOTHROW(parse_nccl_tests_output(head + "#  Rank  0 Group  0 Pid  12 on a device  0 [0x18] GPU\n" + row_ok, "r.txt"));
  CHECK_THROWS_WITH(parse_nccl_tests_output(head + "#  Rank  0 Group  0 Pid  nan on a device  0 [0x18] GPU\n" + row_ok, "r.txt"),
                    "r.txt:2: Pid: got 'nan', expected a non-negative integer (nccl-tests' rank line)");
  CHECK_THROWS_WITH(parse_nccl_tests_output(head + "#  Rank  0 Group  0 Pid  12 on a device  0 [1e300:01:00] GPU\n" + row_ok, "r.txt"),
                    Catch::StartsWith("r.txt:2: bus id: got '1e300:01:00', expected a PCI bus id"));
  CHECK_THROWS_WITH(parse_nccl_tests_output(head + "  1024  256  float  none  x  10.0  0.1  0.1  0  10.0  0.1  0.1  0\n", "r.txt"),
                    "r.txt:2: root: got 'x', expected a rank or -1");
  CHECK_THROWS_WITH(parse_nccl_tests_output(head + "  1024  256  float  none  -1  10.0  0.1  0.1  0  10.0  inf  0.1  0\n", "r.txt"),
                    Catch::StartsWith("r.txt:2: in-place algbw: got 'inf'"));
  CHECK_THROWS_WITH(parse_nccl_tests_output(head + "  1024  256  float  none  -1  10.0  0.1  0.1  0  10.0  0.1  0.1  1e300\n", "r.txt"),
                    "r.txt:2: in-place #wrong: got '1e300', expected a count of wrong elements or N/A");
  // A result row whose size or count is damaged is still a result row (its type and reduction in
  // their columns): refused, not skipped as if it were mpirun's noise (fuzzing found both).
  CHECK_THROWS_WITH(parse_nccl_tests_output(head + row_ok + "  nan  256  float  sum  -1  10.0  0.1  0.1  0  10.0  0.1  0.1  0\n", "r.txt"),
                    "r.txt:3: size: got 'nan', expected a byte count (digits only)");
  CHECK_THROWS_WITH(parse_nccl_tests_output(head + row_ok + "  1024  1e300  bfloat16  none  -1  10.0  0.1  0.1  0  10.0  0.1  0.1  0\n", "r.txt"),
                    "r.txt:3: count: got '1e300', expected an element count (digits only)");
  // Text of that length without nccl-tests' columns stays noise.
  CHECK_NOTHROW(parse_nccl_tests_output(head + row_ok + "mpirun: note one two three four five six seven eight nine ten\n", "r.txt"));
  CHECK(looks_like_nccl_tests("# nccl-tests version 2.18.3\n"));
  CHECK_FALSE(looks_like_nccl_tests("source,run\n"));
}
