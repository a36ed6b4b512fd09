// Database open (analysis/store/store.cpp): the bytes are an --db file; opening it read-write
// must refuse it or migrate it, and a refused file must not change.
#include <filesystem>

#include "analysis/store/store.hpp"
#include "fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fs = std::filesystem;
  const std::string path = dionsim::fuzz::write_scratch("r.db", data, size);
  std::error_code ec;
  fs::remove(path + "-wal", ec);
  fs::remove(path + "-shm", ec);
  bool refused = false;
  dionsim::fuzz::run_one([&] {
    try {
      auto db = dionsim::analysis::Database::open(path, dionsim::analysis::Access::read_only);
      (void)db.has_run("whatif", "0");
    } catch (const dionsim::Error&) {
    }
    try {
      auto db = dionsim::analysis::Database::open(path);
      (void)db.has_run("whatif", "0");
    } catch (const dionsim::Error&) {
      refused = true;
      throw;
    }
  });
  if (refused && (fs::exists(path + "-wal") || fs::exists(path + "-shm") || fs::file_size(path) != size)) {
    std::fprintf(stderr, "fuzz: a refused database was changed (-wal/-shm created or size changed)\n");
    std::abort();
  }
  return 0;
}
