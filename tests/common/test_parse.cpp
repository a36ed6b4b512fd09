#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "common/parse.hpp"

using namespace dionsim;

TEST_CASE("sizes take nccl-tests suffixes as powers of 1024", "[common]") {
  CHECK(parse_size_bytes("4096", "--bytes") == 4096);
  CHECK(parse_size_bytes("64K", "--bytes") == 64 * 1024);
  CHECK(parse_size_bytes("8M", "--bytes") == 8 * 1024 * 1024);
  CHECK(parse_size_bytes("1G", "--bytes") == 1024LL * 1024 * 1024);
  CHECK(parse_size_bytes("1GiB", "--bytes") == 1024LL * 1024 * 1024);
  CHECK(parse_size_bytes("2.5K", "--bytes") == 2560);
}

TEST_CASE("bad sizes name the flag and the value", "[common]") {
  for (const char* bad : {"", "-1", "abc", "1.3", "5X", "1e300G"}) {
    try {
      (void)parse_size_bytes(bad, "-b");
      FAIL("accepted '" << bad << "'");
    } catch (const UsageError& e) {
      CHECK_THAT(e.what(), Catch::Contains("-b: got '"));
    }
  }
}

TEST_CASE("integer lists accept items and doubling ranges", "[common]") {
  CHECK(parse_int_list("1,2,4", "--nodes") == std::vector<std::int64_t>{1, 2, 4});
  CHECK(parse_int_list("1..64", "--nodes") == std::vector<std::int64_t>{1, 2, 4, 8, 16, 32, 64});
  CHECK(parse_int_list("1..64:x4", "--nodes") == std::vector<std::int64_t>{1, 4, 16, 64});
  CHECK(parse_int_list("3, 5..20", "--nodes") == std::vector<std::int64_t>{3, 5, 10, 20});
  CHECK_THROWS_AS(parse_int_list("1,,2", "--nodes"), UsageError);
  CHECK_THROWS_AS(parse_int_list("8..2", "--nodes"), UsageError);
  CHECK(parse_double_list("0.25,0.5", "--fraction") == std::vector<double>{0.25, 0.5});
  CHECK_THROWS_AS(parse_double_list("0.25,nan", "--fraction"), UsageError);
}
