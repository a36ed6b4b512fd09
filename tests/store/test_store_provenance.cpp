#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "analysis/store/store_provenance.hpp"

using namespace dionsim::analysis;
using dionsim::canonical_json;  // common/config_match.hpp

namespace {

// True when `text` has the shape of `pattern`: '9' stands for a decimal digit, 'f' for a lower-case
// hex digit, anything else for itself. (std::regex trips GCC 12 warnings at -O2.)
bool shaped_like(const std::string& text, const std::string& pattern) {
  if (text.size() != pattern.size()) return false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool digit = c >= '0' && c <= '9';
    if (pattern[i] == '9' ? !digit : pattern[i] == 'f' ? !(digit || (c >= 'a' && c <= 'f')) : c != pattern[i]) {
      return false;
    }
  }
  return true;
}

}  // namespace

TEST_CASE("sha256_hex matches FIPS 180-4 / sha256sum vectors across padding boundaries", "[analysis][store]") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // 55 bytes: the length fits in the same block; 56: it spills into a second; 64: a full block.
  CHECK(sha256_hex(std::string(55, 'a')) == "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  CHECK(sha256_hex(std::string(56, 'a')) == "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  CHECK(sha256_hex(std::string(64, 'a')) == "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
  CHECK(sha256_hex(std::string(119, 'a')) == "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb");
  CHECK(sha256_hex(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("canonical_json sorts keys drops whitespace and config_hash is its SHA-256", "[analysis][store]") {
  nlohmann::json a;
  a["b"] = nlohmann::json::array({true, nullptr, "x"});
  a["a"] = 1;
  const auto b = nlohmann::json::parse(R"(  { "a" : 1 ,
      "b" : [ true, null, "x" ] } )");
  CHECK(canonical_json(a) == R"({"a":1,"b":[true,null,"x"]})");
  CHECK(canonical_json(b) == canonical_json(a));
  CHECK(config_hash(a) == "eca8cfb31ab74533e1eb2f4c74d2d55dfe3c79ac704787e54be8647ea7777eb1");
  CHECK(config_hash(b) == config_hash(a));
  // Nested objects are sorted too; a changed value changes the hash.
  const auto nested = nlohmann::json::parse(R"({"z": {"y": 2, "x": 1}, "fraction": 0.25})");
  CHECK(canonical_json(nested) == R"({"fraction":0.25,"z":{"x":1,"y":2}})");
  auto changed = nested;
  changed["fraction"] = 0.5;
  CHECK(config_hash(changed) != config_hash(nested));
}

TEST_CASE("utc_now is ISO 8601 UTC with milliseconds - host name is known", "[analysis][store]") {
  const std::string now = utc_now();
  CHECK(shaped_like(now, "9999-99-99T99:99:99.999Z"));
  CHECK(now.substr(0, 2) == "20");
  CHECK_FALSE(host_name().empty());
  CHECK(host_name() != "unknown");
}

TEST_CASE("git_revision is a commit of this source tree or honestly unknown", "[analysis][store]") {
  const std::string revision = git_revision();
  INFO("git_revision() = " << revision);
  const std::string sha(40, 'f');
  REQUIRE((revision == "unknown" || shaped_like(revision, sha) || shaped_like(revision, sha + "-dirty") ||
           shaped_like(revision, sha + "-unknown-dirty")));
  if (revision != "unknown" && std::system("git --version > /dev/null 2>&1") == 0) {
    // The hash must name a commit that exists in the repository the binary was built from.
    const std::string command =
        "git -C '" DIONSIM_SOURCE_DIR "' cat-file -e " + revision.substr(0, 40) + "^{commit} 2>/dev/null";
    CHECK(std::system(command.c_str()) == 0);
  }
  CHECK_FALSE(dionsim_version().empty());
}
