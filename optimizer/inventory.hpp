#pragma once
// Model inventories (DESIGN.md "Model inventories"): the list of 2-D weight matrices that go to
// Dion2/NorDion2, in parameter-group order. Shape groups are formed from it by the plan.
#include <cstdint>
#include <string>
#include <vector>

namespace dionsim::opt {

// `count` matrices of global shape (rows, cols) = nn.Linear (out, in). Rows are the FSDP2 shard dim.
struct MatrixSpec {
  std::string name;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t count = 1;
};

struct Inventory {
  std::string name;               // the --model spelling it came from
  std::vector<MatrixSpec> entries;  // parameter-group order (shape groups by first occurrence)
  std::int64_t layers = 0;        // transformer layers (FSDP units of the training step); 0 = not given
};

// Resolves `--model`: "seed-5120x8", "gpt-<h>x<L>", "gpt-1b", "gpt-14b", or a path to a JSON list of
// {"name", "rows", "cols", "count"} — or an object {"layers": L, "matrices": [that list]} that also
// gives the layer count. Throws UsageError for an unknown name, InputError for a bad file.
[[nodiscard]] Inventory load_inventory(const std::string& model);

// The built-ins, exposed for tests and benchmarks.
[[nodiscard]] Inventory seed_5120x8();
[[nodiscard]] Inventory gpt_layout(std::int64_t hidden, std::int64_t layers);  // q,k,v,o (h,h); fc (4h,h); proj (h,4h)
[[nodiscard]] Inventory gpt_swiglu(const std::string& name, std::int64_t hidden, std::int64_t inter,
                                   std::int64_t layers);                       // spec §6.2
// Limits of an inventory (checked where one is read, before any plan is built from it): rows and
// cols <= 2^24, count <= 2^20, <= 100 000 entries, <= 2^44 parameters in all. Every size the
// planner derives (world * rows * cols * bytes) then fits in 64 bits.
inline constexpr std::int64_t kMaxMatrixDimension = std::int64_t{1} << 24;
inline constexpr std::int64_t kMaxMatrixCount = std::int64_t{1} << 20;
inline constexpr std::size_t kMaxInventoryEntries = 100000;
// FSDP units (an inventory's "layers", whatif's --layers): the per-layer schedule simulates each.
inline constexpr std::int64_t kMaxLayers = 100000;
inline constexpr std::int64_t kMaxInventoryElements = std::int64_t{1} << 44;
// Throws InputError naming `where` when the inventory holds more than kMaxInventoryElements.
void check_inventory_size(const Inventory& inv, const std::string& where);

[[nodiscard]] Inventory parse_inventory_json(const std::string& text, const std::string& where);

}  // namespace dionsim::opt
