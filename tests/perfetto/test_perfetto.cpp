#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/perfetto/perfetto.hpp"
#include "common/error.hpp"

using namespace dionsim;
using namespace dionsim::analysis;
using nlohmann::json;

namespace {

json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return json::parse(in);  // throws if the writer produced invalid JSON
}

std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("dionsim_test_" + name);
}

}  // namespace

TEST_CASE("integer picoseconds are written as exact microseconds", "[perfetto]") {
  CHECK(format_ps_as_us(0) == "0.000000");
  CHECK(format_ps_as_us(1) == "0.000001");
  CHECK(format_ps_as_us(12'345'678) == "12.345678");
  CHECK(format_ps_as_us(-1'500'000) == "-1.500000");
  CHECK(format_ps_as_us(9'007'199'254'740'993) == "9007199254.740993");  // beyond double precision
  CHECK(TracePs::from_ns(1500).value == 1'500'000);
}

TEST_CASE("a streamed trace parses as JSON with per-thread nesting and names", "[perfetto]") {
  const auto path = temp_path("trace.json");
  {
    TraceWriter w(path);
    for (int rank = 0; rank < 3; ++rank) {
      w.process_name(rank, "rank " + std::to_string(rank));
      w.thread_name(rank, 0, "compute");
      w.thread_name(rank, 1, "comm \"nccl\"");  // needs escaping
      const std::int64_t base = rank * 1'000'000;
      // compute stream: a phase containing two back-to-back kernels
      w.complete(rank, 0, "P1: assemble+NS", "phase", TracePs{base}, TracePs{900'000});
      w.complete(rank, 0, "ns_gemm", "kernel", TracePs{base}, TracePs{400'000}, {{"flops", 123456789012LL}});
      w.complete(rank, 0, "post", "kernel", TracePs{base + 400'000}, TracePs{500'000});
      // comm stream: an all-to-all overlapping the compute stream (other tid: fine)
      w.complete(rank, 1, "a2a fwd", "collective", TracePs{base + 100'000}, TracePs{1'234'567},
                 {{"bytes", 67108864}, {"peers", 2}});
    }
    CHECK(w.events_written() == 3 * (2 + 2 + 4));
    w.close();
  }
  const json trace = read_json(path);
  REQUIRE(trace.at("traceEvents").is_array());
  CHECK(trace.at("traceEvents").size() == 24);
  int complete = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") {
      ++complete;
      CHECK(e.contains("ts"));
      CHECK(e.contains("dur"));
      CHECK(e["dur"].get<double>() >= 0);
    }
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == 1) CHECK(e["args"]["name"] == "comm \"nccl\"");
  }
  CHECK(complete == 12);
  const json& a2a = trace["traceEvents"][7];
  CHECK(a2a["name"] == "a2a fwd");
  CHECK(a2a["ts"].get<double>() == Approx(0.1));
  CHECK(a2a["dur"].get<double>() == Approx(1.234567));
  CHECK(a2a["args"]["bytes"] == 67108864);
  CHECK(nesting_violations(trace).empty());
}

TEST_CASE("partial overlaps on one thread are reported, on different threads they are not", "[perfetto]") {
  const auto path = temp_path("overlap.json");
  {
    TraceWriter w(path);
    w.complete(0, 0, "a", "k", TracePs{0}, TracePs{10'000'000});
    w.complete(0, 0, "b", "k", TracePs{5'000'000}, TracePs{10'000'000});  // overlaps a partially
    w.complete(0, 1, "c", "k", TracePs{5'000'000}, TracePs{10'000'000});  // another stream
  }                                                                       // destructor closes the JSON
  const auto violations = nesting_violations(read_json(path));
  REQUIRE(violations.size() == 1);
  CHECK(violations[0].tid == 0);
  CHECK(violations[0].first == "a");
  CHECK(violations[0].second == "b");
}

TEST_CASE("trace writer errors", "[perfetto]") {
  CHECK_THROWS_AS(TraceWriter("/nonexistent-dir/x/trace.json"), IoError);
  const auto path = temp_path("closed.json");
  TraceWriter w(path);
  w.close();
  CHECK_THROWS_AS(w.complete(0, 0, "late", "k", TracePs{0}, TracePs{1}), IoError);
}
