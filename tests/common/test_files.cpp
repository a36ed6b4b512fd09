// Issue 18: inputs that are not regular files are refused by name (never block or read forever),
// outputs are written atomically, JSON is depth-limited and numbers follow one rule.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "common/error.hpp"
#include "common/files.hpp"
#include "common/json_input.hpp"
#include "common/parse.hpp"
#include "common/resources.hpp"

using namespace dionsim;
namespace fs = std::filesystem;

namespace {

struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("dionsim-files-" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  [[nodiscard]] std::string file(const std::string& name) const { return (dir / name).string(); }
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("inputs that are not regular files are refused by name", "[common]") {
  const Scratch s;
  const std::string fifo = s.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(read_input_file(fifo, "a CSV"), Catch::Contains("got 'a FIFO', expected a CSV"));
  CHECK_THROWS_WITH(read_input_file("/dev/zero", "a CSV"), Catch::Contains("got 'a character device'"));
  CHECK_THROWS_WITH(read_input_file(s.dir.string(), "a CSV"), Catch::Contains("got 'a directory'"));
  fs::create_symlink(s.file("b"), s.file("a"));
  fs::create_symlink(s.file("a"), s.file("b"));
  CHECK_THROWS_WITH(read_input_file(s.file("a"), "a CSV"), Catch::Contains("got 'a symlink loop'"));
  CHECK_THROWS_WITH(read_input_file(s.file("none"), "a CSV"), Catch::Contains("cannot open for reading (missing)"));
  CHECK_THROWS_AS(read_input_file(s.file("none"), "a CSV"), IoError);  // exit 4, as before
  CHECK_THROWS_WITH(require_regular_file(s.file("none"), "a CSV"), Catch::Contains("got 'missing'"));
  CHECK_THROWS_AS(read_input_file(fifo, "a CSV"), InputError);
  std::ofstream(s.file("big")) << std::string(100, 'x');
  CHECK_THROWS_WITH(read_input_file(s.file("big"), "a CSV", 99), Catch::Contains("at most 99 bytes"));
  CHECK(read_input_file(s.file("big"), "a CSV", 100).size() == 100);
  // scripts/fuzz_cli.py: --calibration '' printed ": cannot open for reading", naming nothing.
  CHECK_THROWS_WITH(read_input_file("", "a CSV"), Catch::Contains("(empty file name): (file): got '', expected a CSV"));
  CHECK_THROWS_AS(require_regular_file("", "a CSV"), InputError);
}

TEST_CASE("outputs are written atomically and never over an input", "[common]") {
  const Scratch s;
  const std::string out = s.file("cal.json");
  write_file_atomically(out, std::string("previous"));
  // A writer that fails half-way leaves the previous file whole and no temporary behind.
  CHECK_THROWS(write_file_atomically(out, [](std::ostream& o) {
    o << "partial";
    throw IoError("disk full");
  }));
  CHECK(slurp(out) == "previous");
  CHECK(std::distance(fs::directory_iterator(s.dir), fs::directory_iterator()) == 1);
  write_file_atomically(out, std::string("new"));
  CHECK(slurp(out) == "new");
  CHECK_THROWS_WITH(require_output_file(out, "--out", {out}), Catch::Contains("other than the input"));
  CHECK_THROWS_WITH(require_output_file(s.dir.string(), "--out"), Catch::Contains("not an existing directory"));
  CHECK_THROWS_WITH(require_output_folder(out, "--trace-out"), Catch::Contains("not an existing file"));
  CHECK_NOTHROW(require_output_folder(s.file("traces/sub"), "--trace-out"));
  CHECK(fs::is_directory(s.file("traces/sub")));
}

TEST_CASE("JSON inputs are depth-limited and their numbers finite", "[common]") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  CHECK_THROWS_WITH(parse_json_input(deep, "deep.json"), Catch::Contains("deep.json: (document): got 'nesting deeper than 64"));
  const std::string ok = std::string(64, '[') + std::string(64, ']');
  CHECK_NOTHROW(parse_json_input(ok, "ok.json"));
  CHECK_NOTHROW(parse_json_input(R"({"s": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["})", "str.json"));
  CHECK_THROWS_WITH(parse_json_input("[1e400]", "big.json"), Catch::Contains("big.json"));
  CHECK_THROWS_WITH(parse_json_input("[1e300]", "big.json"), Catch::Contains("larger than 1e15"));
  CHECK_NOTHROW(parse_json_input("[1.7e15]", "trace.json", /*allow_large=*/true));
  CHECK_THROWS_AS(json_integer(nlohmann::json(0), "x.json", "rows", 1, 10), InputError);
  CHECK_THROWS_AS(json_integer(nlohmann::json(18446744073709551615ULL), "x.json", "rows", 1, 10), InputError);
  CHECK(json_integer(nlohmann::json(7), "x.json", "rows", 1, 10) == 7);
}

TEST_CASE("one number rule for every flag and file", "[common]") {
  CHECK(to_number("1.5") == 1.5);
  CHECK(to_number("0") == 0.0);
  for (const char* bad : {"inf", "nan", "1e400", "1e300", "1e-320", "-1e16", "0x10", "", "1,5"}) {
    INFO(bad);
    CHECK_FALSE(to_number(bad).has_value());
    CHECK_THROWS_AS(parse_double(bad, "--latency-us"), UsageError);
  }
  CHECK_THROWS_WITH(check_number(1e-320, "f.toml", "nic_GBps"), Catch::Contains("f.toml: nic_GBps"));
}

TEST_CASE("ranges are bounded, overflow-free and end on their sequence", "[common]") {
  CHECK_THROWS_WITH(parse_int_list("1..100", "--nodes"), Catch::Contains("(1..64 or 1..128)"));
  CHECK_THROWS_AS(parse_int_list("1..9223372036854775807", "--nodes"), UsageError);
  CHECK_THROWS_AS(parse_int_list("1..1073741824:x9223372036854775807", "--nodes"), UsageError);
  CHECK(parse_int_list("1..1073741824", "--nodes").size() == 31);
  std::string many;
  for (int i = 0; i < 1100; ++i) many += std::to_string(i + 1) + ",";
  many.pop_back();
  CHECK_THROWS_WITH(parse_int_list(many, "--world"), Catch::Contains("at most 1024 values"));
}

TEST_CASE("a rejected value is echoed capped", "[common]") {
  const std::string message = describe_bad_value("f.json", "rows", std::string(60000, '['), "an integer");
  CHECK(message.size() < 300);
  CHECK_THAT(message, Catch::Contains("... (60000 bytes)"));
}

TEST_CASE("an exception in a worker thread reaches the caller", "[common]") {
  CHECK_THROWS_AS(run_threads(4, [](int i) {
                    if (i == 2) throw std::bad_alloc();
                  }),
                  std::bad_alloc);
  CHECK_THROWS_WITH(require_memory(1e30, "--steps", "9", "the counters"), Catch::Contains("--steps"));
}
