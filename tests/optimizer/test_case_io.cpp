// Numerics case folders and .npy I/O: every bad input fails before any work with an InputError
// (exit 3) that names the file and the field.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "optimizer/npy.hpp"
#include "optimizer/numerics_case.hpp"

using namespace dionsim::opt;
namespace fs = std::filesystem;

namespace {

struct TempCase {
  fs::path dir;
  nlohmann::json doc;
  explicit TempCase(const std::string& name) : dir(fs::temp_directory_path() / ("dionsim_case_" + name)) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    doc = {{"optimizer", "dion2"}, {"scope", "global_capped"}, {"world", 2}, {"fraction", 0.25}, {"steps", 1},
           {"lr", 0.02}, {"ef_decay", 0.95}, {"weight_decay", 0.01}, {"adjust_lr", "spectral_norm"},
           {"capacity_factor", nullptr}, {"mu", nullptr}, {"muon_beta2", nullptr},
           {"params", {{{"name", "p0"}, {"shape", {8, 16}}}}}, {"sharding", "rows"}, {"dtype", "float32"}};
    const std::vector<std::int64_t> shape{8, 16};
    const std::vector<float> data(128, 0.5f);
    write_npy((dir / "W0_p0.npy").string(), shape, data);
    write_npy((dir / "G0_p0.npy").string(), shape, data);
  }
  ~TempCase() { fs::remove_all(dir); }
  void save() const { std::ofstream(dir / "case.json") << doc.dump(); }
  std::string path() const { return dir.string(); }
};

void write_raw_npy(const fs::path& p, const std::string& descr, const std::string& order, std::size_t bytes) {
  std::string h = "{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': (8, 16), }";
  h.append(118 - h.size(), ' ');
  h.push_back('\n');
  std::ofstream out(p, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const char len[2] = {static_cast<char>(h.size()), 0};
  out.write(len, 2);
  out << h << std::string(bytes, '\0');
}

}  // namespace

TEST_CASE("a valid temporary case runs and round-trips through the npy writer", "[case]") {
  TempCase c("valid");
  c.save();
  const NumericsCase nc = load_numerics_case(c.path());
  CHECK(nc.params.size() == 1);
  CHECK(nc.config.plan.world == 2);
  CHECK_FALSE(nc.config.plan.capacity_factor.has_value());
  const auto opt = run_numerics_case(nc, 1);
  const fs::path out = c.dir / "out";
  write_numerics_outputs(out.string(), nc, *opt);
  const NpyArray w = read_npy((out / "W_p0.npy").string());
  CHECK(w.shape == std::vector<std::int64_t>{8, 16});
  CHECK(w.data == opt->weight(0));
  std::ifstream s(out / "stats.json");
  const auto stats = nlohmann::json::parse(s);
  CHECK(stats["per_rank"].size() == 2);
  CHECK(stats["per_rank"][0][0].contains("deferred_rows"));
}

TEST_CASE("bad case.json fields name the file and the field", "[case]") {
  struct Bad {
    const char* key;
    nlohmann::json value;
    const char* field;
  };
  const Bad bad[] = {{"world", 0, "world"},
                     {"fraction", 1.5, "fraction"},
                     {"fraction", 0.0, "fraction"},
                     {"capacity_factor", 0.5, "capacity_factor"},
                     {"scope", "globl", "scope"},
                     {"optimizer", "adam", "optimizer"},
                     {"dtype", "float16", "dtype"},
                     {"sharding", "cols", "sharding"},
                     {"steps", 0, "steps"},
                     {"bogus", 1, "bogus"},
                     {"params", nlohmann::json::array({{{"name", "p0"}, {"shape", {8}}}}), "params[0].shape"},
                     {"params", nlohmann::json::array({{{"name", "p0"}, {"shape", {8, 16}}, {"dtype", 1}}}), "params[0].dtype"}};
  for (const Bad& b : bad) {
    CAPTURE(b.key);
    TempCase c(std::string("bad_") + b.key);
    c.doc[b.key] = b.value;
    c.save();
    try {
      (void)load_numerics_case(c.path());
      FAIL("no error");
    } catch (const dionsim::InputError& e) {
      CHECK_THAT(e.what(), Catch::Contains("case.json: " + std::string(b.field) + ": got"));
      CHECK(e.code() == dionsim::ExitCode::bad_input);
    }
  }
}

TEST_CASE("missing, mis-shaped and unsupported .npy inputs are rejected by name", "[case]") {
  SECTION("missing gradient") {
    TempCase c("missing");
    c.doc["steps"] = 2;
    c.save();
    CHECK_THROWS_WITH(load_numerics_case(c.path()), Catch::Contains("G1_p0.npy: (file)"));
  }
  SECTION("mis-shaped") {
    TempCase c("shape");
    c.save();
    const std::vector<std::int64_t> shape{16, 8};
    write_npy((c.dir / "W0_p0.npy").string(), shape, std::vector<float>(128, 0.0f));
    CHECK_THROWS_WITH(load_numerics_case(c.path()), Catch::Contains("W0_p0.npy: shape: got '(16, 8)', expected (8, 16)"));
  }
  SECTION("float16, big-endian, Fortran order, truncated") {
    TempCase c("dtype");
    c.save();
    write_raw_npy(c.dir / "W0_p0.npy", "<f2", "False", 256);
    CHECK_THROWS_WITH(load_numerics_case(c.path()), Catch::Contains("W0_p0.npy: descr: got ''<f2''"));
    write_raw_npy(c.dir / "W0_p0.npy", ">f4", "False", 512);
    CHECK_THROWS_WITH(load_numerics_case(c.path()), Catch::Contains("descr: got ''>f4''"));
    write_raw_npy(c.dir / "W0_p0.npy", "<f4", "True", 512);
    CHECK_THROWS_WITH(load_numerics_case(c.path()), Catch::Contains("fortran_order: got 'True'"));
    write_raw_npy(c.dir / "W0_p0.npy", "<f4", "False", 100);
    CHECK_THROWS_WITH(load_numerics_case(c.path()), Catch::Contains("W0_p0.npy: data"));
  }
  SECTION("float64 is accepted and narrowed") {
    TempCase c("f8");
    c.save();
    write_raw_npy(c.dir / "W0_p0.npy", "<f8", "False", 1024);
    CHECK(load_numerics_case(c.path()).initial[0].size() == 128);
  }
  SECTION("not a numpy file") {
    TempCase c("magic");
    c.save();
    std::ofstream(c.dir / "W0_p0.npy") << "hello world";
    CHECK_THROWS_WITH(load_numerics_case(c.path()), Catch::Contains("W0_p0.npy: magic"));
  }
}
