#include <zlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "analysis/measured/kineto.hpp"
#include "analysis/measured/kineto_io.hpp"
#include "common/error.hpp"

using namespace dionsim;
using namespace dionsim::analysis;
using nlohmann::json;

namespace {

const std::filesystem::path kTraces = std::filesystem::path(DIONSIM_SHARED_DIR) / "data" / "traces";

// Spec §3.5 for gpt-2048x4 (per layer 4×(2048,2048), (8192,2048), (2048,8192); 4 layers), row
// sharding, world w: global sends Np·pl·C·2 per direction, local Np·k·C·2 with k = ceil(f·pl).
std::int64_t spec_a2a_bytes(bool global, int w, double f) {
  struct Group {
    std::int64_t n, rows, cols;
  };
  const Group groups[] = {{16, 2048, 2048}, {4, 8192, 2048}, {4, 2048, 8192}};
  std::int64_t total = 0;
  for (const auto& g : groups) {
    const std::int64_t pr = (g.n + w - 1) / w;
    const std::int64_t np = pr * w;
    const std::int64_t pl = (g.rows + w - 1) / w;
    const auto k = static_cast<std::int64_t>(std::ceil(f * static_cast<double>(pl)));
    total += 2 * np * (global ? pl : k) * g.cols * 2;  // fwd + rev, bf16
  }
  return total;
}

json kernel(const std::string& name, double ts, double dur, int corr, int stream = 7, json extra = json::object()) {
  json args = {{"correlation", corr}, {"stream", stream}, {"device", 0}, {"External id", corr + 1000}};
  args.update(extra);
  return {{"ph", "X"},     {"cat", "kernel"}, {"name", name}, {"pid", 0},
          {"tid", stream}, {"ts", ts},        {"dur", dur},   {"args", args}};
}
json launch(double ts, int corr, int tid = 100) {
  return {{"ph", "X"},
          {"cat", "cuda_runtime"},
          {"name", "cudaLaunchKernel"},
          {"pid", 100},
          {"tid", tid},
          {"ts", ts},
          {"dur", 2.0},
          {"args", {{"correlation", corr}}}};
}
json cpu(const std::string& cat, const std::string& name, double ts, double dur, int tid = 100,
         json args = json::object()) {
  return {{"ph", "X"},  {"cat", cat}, {"name", name}, {"pid", 100},
          {"tid", tid}, {"ts", ts},   {"dur", dur},   {"args", args}};
}

json nccl_args(const std::string& coll, std::int64_t nelems, const std::string& dtype = "BFloat16") {
  return {{"Collective name", coll},
          {"In msg nelems", nelems},
          {"Out msg nelems", nelems},
          {"Group size", 2},
          {"dtype", dtype}};
}

// A hand-written trace in the schema torch.profiler emits: one training iteration (forward,
// backward on the autograd thread, an FSDP all-gather) and one optimizer step whose kernels run
// after the step's host annotation has closed (GPU lagging the host).
json small_trace() {
  json ev = json::array();
  ev.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 0}, {"args", {{"name", "python3"}}}});
  ev.push_back(cpu("user_annotation", "ProfilerStep#5", 0, 1000));
  // forward: an mm op launching a GEMM
  ev.push_back(cpu("cpu_op", "aten::mm", 10, 20, 100,
                   {{"External id", 1001},
                    {"Input Dims", json::array({json::array({128, 256}), json::array({256, 64})})},
                    {"Input type", json::array({"c10::BFloat16", "c10::BFloat16"})}}));
  ev.push_back(launch(15, 1));
  ev.push_back(kernel("nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT", 40, 10, 1));
  // FSDP all-gather outside the optimizer
  ev.push_back(launch(60, 2));
  ev.push_back(kernel("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 70, 30, 2, 17,
                      nccl_args("_allgather_base", 1000, "Float")));
  // backward on the autograd thread (tid 200)
  ev.push_back(cpu("cpu_op", "autograd::engine::evaluate_function: MmBackward0", 120, 50, 200));
  ev.push_back(launch(130, 3, 200));
  ev.push_back(kernel("void at::native::elementwise_kernel<128, 4>", 150, 20, 3));
  // optimizer step: host window [400, 460]; kernels launched at 410..450 run at 470..620
  ev.push_back(cpu("user_annotation", "Optimizer.step#Dion2.step", 400, 60));
  ev.push_back(launch(410, 4));
  ev.push_back(kernel("triton_red_fused_linalg_vector_norm_0", 470, 10, 4));  // busy 470-480
  ev.push_back(launch(420, 5));
  ev.push_back(kernel("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", 480, 50, 5, 17,
                      nccl_args("all_to_all", 4096)));  // 480-530 on the NCCL stream
  ev.push_back(launch(430, 6));
  ev.push_back(kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", 500, 40, 6));  // overlaps the a2a
  ev.push_back(launch(440, 7));
  ev.push_back(kernel("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 560, 20, 7, 17,
                      nccl_args("all_gather", 100, "Float")));
  ev.push_back(launch(450, 8));
  ev.push_back(kernel("triton_poi_fused_add_mul_3", 600, 20, 8));  // 600-620: idle 580-600
  // a kernel with no launch event at all, starting inside the host window (time-window fallback)
  ev.push_back(kernel("triton_poi_fused_copy__2", 455, 5, 99));
  // noise that must be ignored: flows, instants, CPU ops
  ev.push_back({{"ph", "s"}, {"id", 4}, {"pid", 100}, {"tid", 100}, {"ts", 410}, {"cat", "ac2g"}, {"name", "ac2g"}});
  ev.push_back({{"ph", "i"}, {"s", "g"}, {"name", "Record Window End"}, {"pid", ""}, {"tid", ""}, {"ts", 2000}});
  return {{"schemaVersion", 1},
          {"distributedInfo", {{"rank", 1}, {"world_size", 2}}},
          {"deviceProperties", json::array({{{"id", 0}, {"name", "NVIDIA H200"}}})},
          {"traceEvents", ev}};
}

std::filesystem::path temp_file(const std::string& name, const std::string& bytes) {
  const auto path = std::filesystem::temp_directory_path() / ("dionsim_test_" + name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string gzip_bytes(const std::string& text) {
  z_stream s{};
  deflateInit2(&s, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&s, text.size()) + 64, '\0');
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  s.avail_in = static_cast<uInt>(text.size());
  s.next_out = reinterpret_cast<Bytef*>(out.data());
  s.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&s, Z_FINISH) == Z_STREAM_END);
  out.resize(s.total_out);
  deflateEnd(&s);
  return out;
}

}  // namespace

TEST_CASE("hand-written Kineto trace: attribution by launch correlation and per-step metrics", "[kineto]") {
  const KinetoTrace t = parse_kineto_trace(small_trace().dump(), "small.json");
  CHECK(t.rank == 1);
  CHECK(t.world_size == 2);
  CHECK(t.device_name == "NVIDIA H200");
  REQUIRE(t.kernels.size() == 9);
  REQUIRE(t.steps.size() == 1);
  CHECK(t.kernels_without_launch == 1);

  auto find = [&](std::string_view prefix, std::int64_t start_ns) -> const KernelEvent& {
    for (const auto& k : t.kernels) {
      if (k.name.rfind(prefix, 0) == 0 && k.start_ns == start_ns) return k;
    }
    FAIL("kernel not found");
    throw;
  };
  const auto& fwd_gemm = find("nvjet", 40'000);
  CHECK(fwd_gemm.role == KernelRole::forward);
  CHECK(fwd_gemm.gemm_flops == 2LL * 128 * 256 * 64);
  CHECK(fwd_gemm.gemm_bytes == 2LL * (128 * 256 + 256 * 64 + 128 * 64));
  CHECK(find("ncclDevKernel_AllGather", 70'000).role == KernelRole::fsdp_collective);
  CHECK(find("ncclDevKernel_AllGather", 70'000).payload_bytes() == 4000);
  CHECK(find("void at::native::elementwise", 150'000).role == KernelRole::backward);
  // Launched inside the step's host window though they run after it closed.
  CHECK(find("ncclDevKernel_SendRecv", 480'000).role == KernelRole::opt_alltoall);
  CHECK(find("nvjet", 500'000).role == KernelRole::ns_gemm);
  CHECK(find("ncclDevKernel_AllGather", 560'000).role == KernelRole::opt_allgather);
  CHECK(find("triton_poi_fused_add_mul_3", 600'000).role == KernelRole::opt_other);
  CHECK(find("triton_poi_fused_copy__2", 455'000).role == KernelRole::opt_other);  // time-window fallback

  const auto steps = reduce_steps(t);
  REQUIRE(steps.size() == 1);
  const StepMetrics& m = steps[0];
  CHECK(m.rank == 1);
  CHECK(m.kernel_count == 6);
  CHECK(m.a2a_count == 1);
  CHECK(m.a2a_ms == Approx(0.050));
  CHECK(m.a2a_payload_bytes == 4096 * 2);
  CHECK(m.allgather_ms == Approx(0.020));
  CHECK(m.allgather_bytes == 400);
  CHECK(m.gemm_ms == Approx(0.040));
  CHECK(m.non_gemm_ms == Approx(0.010 + 0.020 + 0.005));
  CHECK(m.opt_cpu_span_ms == Approx(0.060));
  CHECK(m.opt_step_ms == Approx(0.220));        // 400 → 620 µs
  CHECK(m.opt_gpu_window_ms == Approx(0.165));  // 455 → 620 µs
  // busy: 455-460, 470-540 (norm, a2a, gemm), 560-580, 600-620 = 5 + 70 + 20 + 20 µs
  CHECK(m.opt_gpu_ms == Approx(0.115));
  CHECK(m.opt_gpu_idle_pct == Approx(100.0 * (1.0 - 115.0 / 165.0)));
}

TEST_CASE("union of intervals counts overlaps once", "[kineto]") {
  CHECK(union_length_ns({}) == 0);
  CHECK(union_length_ns({{0, 10}, {5, 15}, {20, 30}, {21, 22}}) == 25);
  CHECK(union_length_ns({{0, 10}, {10, 20}}) == 20);
}

TEST_CASE("gzip detection by magic bytes, not by name", "[kineto]") {
  const std::string text = small_trace().dump();
  const auto plain = temp_file("plain.json.gz", text);  // misleading name, plain JSON
  const auto packed = temp_file("packed.json", gzip_bytes(text));
  CHECK(read_kineto_trace(plain).kernels.size() == 9);
  CHECK(read_kineto_trace(packed).kernels.size() == 9);
  // Two concatenated gzip members are one stream (gzip -c a b).
  CHECK(gunzip(gzip_bytes("ab") + gzip_bytes("cd"), "x") == "abcd");
}

TEST_CASE("bad traces fail with an InputError naming the file", "[kineto]") {
  const auto check_error = [](const std::filesystem::path& path, const std::string& fragment) {
    try {
      (void)read_kineto_trace(path);
      FAIL("no error for " << path);
    } catch (const InputError& e) {
      const std::string what = e.what();
      CHECK_THAT(what, Catch::Contains(path.string()));
      CHECK_THAT(what, Catch::Contains(fragment));
    }
  };
  check_error(temp_file("notjson.json", "this is not json {"), "not a JSON trace");
  json no_kernels = small_trace();
  json cpu_only = json::array();
  for (const auto& e : no_kernels["traceEvents"]) {
    if (e.value("cat", "") != "kernel") cpu_only.push_back(e);
  }
  no_kernels["traceEvents"] = cpu_only;
  check_error(temp_file("nokernels.json", no_kernels.dump()), "no events with cat 'kernel'");
  check_error(temp_file("noevents.json", R"({"schemaVersion": 1})"), "traceEvents");
  const std::string gz = gzip_bytes(small_trace().dump());
  check_error(temp_file("truncated.json.gz", gz.substr(0, gz.size() / 2)), "truncated");
  std::string corrupt = gz;
  corrupt[corrupt.size() / 2] = static_cast<char>(corrupt[corrupt.size() / 2] ^ 0x55);
  corrupt[corrupt.size() / 2 + 1] = static_cast<char>(corrupt[corrupt.size() / 2 + 1] ^ 0x55);
  check_error(temp_file("corrupt.json.gz", corrupt), "gzip");
  json bad_dtype = small_trace();
  for (auto& e : bad_dtype["traceEvents"]) {
    if (e.value("name", "").rfind("ncclDevKernel_SendRecv", 0) == 0) e["args"]["dtype"] = "Quaternion";
  }
  check_error(temp_file("baddtype.json", bad_dtype.dump()), "dtype: got 'Quaternion'");
  // The fuzzer's findings: a schema version, a pid and a subnormal duration no profiler writes.
  json bad_schema = small_trace();
  bad_schema["schemaVersion"] = 1e300;
  check_error(temp_file("badschema.json", bad_schema.dump()), "schemaVersion: got 1e+300");
  json bad_pid = small_trace();
  for (auto& e : bad_pid["traceEvents"])
    if (e.value("ph", "") == "X") e["pid"] = 4.5;
  check_error(temp_file("badpid.json", bad_pid.dump()), "pid: got 4.5, expected an integer id");
  json bad_dur = small_trace();
  for (auto& e : bad_dur["traceEvents"])
    if (e.value("ph", "") == "X") e["dur"] = 1e-320;
  check_error(temp_file("baddur.json", bad_dur.dump()), "no subnormal numbers");
  CHECK_THROWS_AS(read_kineto_trace("/nonexistent/trace.json"), IoError);
}

TEST_CASE("shared H200 traces: a2a payload equals the spec's byte formula", "[kineto][shared]") {
  for (const bool global : {true, false}) {
    for (const int rank : {0, 1}) {
      const auto path =
          kTraces / ("trace_" + std::string(global ? "global" : "local") + "_rank" + std::to_string(rank) + ".json.gz");
      const KinetoTrace t = read_kineto_trace(path);
      INFO(path.string());
      CHECK(t.rank == rank);
      CHECK(t.world_size == 2);
      CHECK(t.device_name == "NVIDIA H200");
      CHECK(t.kernels_without_launch == 0);
      const auto steps = reduce_steps(t);
      REQUIRE(steps.size() == 3);
      for (const auto& m : steps) {
        // 3 megabatches × (forward + reverse) all-to-all.
        CHECK(m.a2a_count == 6);
        CHECK(m.a2a_payload_bytes == spec_a2a_bytes(global, 2, 0.25));
        CHECK(m.allgather_ms == 0.0);
        // Newton–Schulz: 3 groups × 5 iterations × 3 GEMMs (Polar Express).
        CHECK(m.gemm_count == 45);
        CHECK(m.kernel_count == (global ? 158 : 216));
        CHECK(m.gemm_flops > 0);
        CHECK(m.opt_gpu_ms <= m.opt_gpu_window_ms);
        CHECK(m.opt_gpu_window_ms <= m.opt_step_ms);
        CHECK(m.opt_cpu_span_ms <= m.opt_step_ms);
        CHECK(m.gemm_ms + m.non_gemm_ms + m.a2a_ms >= m.opt_gpu_ms * 0.999);
      }
    }
  }
  CHECK(spec_a2a_bytes(true, 2, 0.25) == 402'653'184);
  CHECK(spec_a2a_bytes(false, 2, 0.25) == 100'663'296);
}

TEST_CASE("shared H200 traces across ranks: all-to-all transfer time without the wait", "[kineto][shared]") {
  // Reference values: the same rule (per all-to-all, in launch order, the shorter duration of the
  // two ranks) computed by an independent Python reading of the trace files.
  const std::map<std::string, std::vector<double>> expected_ms = {{"global", {0.745217, 0.743488, 0.747583}},
                                                                  {"local", {0.207839, 0.211007, 0.210657}}};
  for (const auto& [scope, transfer] : expected_ms) {
    INFO(scope);
    const std::vector<KinetoTrace> traces = {read_kineto_trace(kTraces / ("trace_" + scope + "_rank0.json.gz")),
                                             read_kineto_trace(kTraces / ("trace_" + scope + "_rank1.json.gz"))};
    const auto steps = reduce_across_ranks(traces);
    REQUIRE(steps.size() == 3);
    for (std::size_t s = 0; s < 3; ++s) {
      CHECK(steps[s].ranks == 2);
      CHECK(steps[s].a2a_transfer_ms == Approx(transfer[s]).margin(2e-5));
      CHECK(steps[s].a2a_payload_bytes == spec_a2a_bytes(scope == "global", 2, 0.25));
      CHECK(steps[s].a2a_algbw_GBps ==
            Approx(static_cast<double>(steps[s].a2a_payload_bytes) / (transfer[s] * 1e6)).epsilon(1e-4));
      // One rank waited for the other for most of its all-to-all time.
      CHECK(steps[s].a2a_wait_ms_max > 5 * steps[s].a2a_transfer_ms);
    }
    CHECK_THROWS_WITH(reduce_across_ranks({traces[0], traces[0]}),
                      Catch::Contains("rank: got '0', expected one trace per rank"));
  }
  const std::vector<KinetoTrace> mixed = {read_kineto_trace(kTraces / "trace_global_rank0.json.gz"),
                                          read_kineto_trace(kTraces / "trace_local_rank1.json.gz")};
  CHECK_THROWS_WITH(reduce_across_ranks(mixed), Catch::Contains("step 0 all-to-alls: got '6 sending 100663296 B'"));
}
