#pragma once
// The optimizer plan: every host-side constant of one Dion2/NorDion2 step, derived from an
// inventory and a configuration only (no tensors, no data). Spec: ../shared/spec/dion2-algorithm.md
// §1.3–1.7 (groups, ownership, paths, phases), §2.3 (k), §2.6.4 (FLOPs), §3.5 (bytes), §4.1 (capped).
//
// Consumers:
//  * the simulator's step program walks `groups[i].phases`: each phase is compute kernels (FLOPs,
//    HBM bytes, launches -> roofline time) followed by the collective that ends it (kind, bytes sent
//    per rank including the self-chunk, bytes per peer message). Tasks interleave as in §1.7
//    (AsyncRuntime with up to 3 megabatches in flight) — the plan gives the phases, not the schedule.
//  * the CPU reference step and the CUDA step size their buffers and collectives from it.
// All byte counts are per rank per optimizer step for the largest shard (rank 0, `pl` rows).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "optimizer/inventory.hpp"

namespace dionsim::opt {

enum class Scope { local, global, global_capped };
enum class OptimizerKind { dion2, nordion2 };
// polar_express (default), newton_schulz5 (legacy quintic), gram (Gram NS, §2.6.3: in the CPU
// reference step and on GPUs, optimizer/newton_schulz.hpp).
enum class NsKind { polar_express, newton_schulz5, gram };
// Per shape group (spec §1.6): local = sharded per-shard top-k (§3.1); global = full-shard a2a
// (§3.2, also capped groups routed by §4.1); capped_packed = §4; ddp = unsharded with a process
// group and N > 1 (§3.4); single = no collective (world 1, or DDP with N == 1).
enum class Path { local, global, capped_packed, ddp, single };
enum class CollectiveKind { none, all_gather, all_to_all };
enum class Dtype { float32, bfloat16 };  // parameter dtype = momentum dtype (§1.2)

[[nodiscard]] std::string_view to_string(Scope s);
[[nodiscard]] std::string_view to_string(OptimizerKind o);
[[nodiscard]] std::string_view to_string(NsKind n);
[[nodiscard]] std::string_view to_string(Path p);
[[nodiscard]] std::string_view to_string(CollectiveKind k);
[[nodiscard]] std::string_view to_string(Dtype d);  // "float32" | "bfloat16"
// Parsers throw UsageError naming `flag`.
[[nodiscard]] Scope parse_scope(std::string_view text, std::string_view flag);
[[nodiscard]] OptimizerKind parse_optimizer(std::string_view text, std::string_view flag);
[[nodiscard]] NsKind parse_ns(std::string_view text, std::string_view flag);
[[nodiscard]] Dtype parse_dtype(std::string_view text, std::string_view flag);

// global_capped's capacity factor c, everywhere it is read or written (command lines, case.json,
// the measurement CSV, stored configurations): nullopt = "auto" (§4.1), else a finite c >= 1.
// parse_capacity_factor reads "auto" or a number (UsageError naming `flag`);
// check_capacity_factor refuses c < 1, NaN and infinities (UsageError naming `flag`);
// capacity_factor_text prints it ("auto", "1.25"). Numbers above kMaxCapacityFactor are refused
// (1e300 would overflow B = ceil(c·pr·k); any c >= world already routes to exact global).
inline constexpr double kMaxCapacityFactor = 1e6;
inline constexpr const char* kCapacityFactorExpected = "auto or a number in [1, 1e6]";
[[nodiscard]] std::optional<double> parse_capacity_factor(std::string_view text, std::string_view flag);
void check_capacity_factor(std::optional<double> c, std::string_view flag);
// The rule itself, for readers of files that report their own errors (InputError naming the file).
[[nodiscard]] bool is_valid_capacity_factor(double c);
[[nodiscard]] std::string capacity_factor_text(std::optional<double> c);
// The selected fraction f (spec §2.3), everywhere it is checked: in (0, 1]. check_fraction throws
// UsageError naming `flag`; is_valid_fraction is the rule, for readers of files.
void check_fraction(double fraction, std::string_view flag);
[[nodiscard]] bool is_valid_fraction(double fraction);

// The plan's inputs. Every configuration that makes a plan (what-if, deferral, the reference and
// GPU steps, `dionsim plan`) holds one of these rather than copies of its fields.
struct PlanConfig {
  std::int64_t world = 1;                  // size of the optimizer's process group, >= 1
  Scope scope = Scope::global;
  double fraction = 0.25;                  // (0, 1]
  std::optional<double> capacity_factor;   // nullopt = auto (§4.1); else >= 1.0
  OptimizerKind optimizer = OptimizerKind::dion2;
  NsKind ns = NsKind::polar_express;
  bool sharded = true;                     // FSDP2 Shard(0) (rows); false = DDP (whole matrices)
  int momentum_bytes = 4;                  // fp32 (4) or bf16 (2) momentum = parameter dtype
  int param_bytes = 4;
};
// Throws UsageError (flag names) for world < 1, fraction outside (0, 1], capacity_factor < 1, bad dtype bytes.
void validate(const PlanConfig& config);

// One GPU kernel class in a phase. gemm_flops: nominal GEMM FLOPs (§2.6.4) — 0 for
// memory-bound kernels; hbm_bytes: bytes read + written; launches: kernel launches (modelled as the
// reference's eager op count: see plan.cpp for each class).
// Kernel classes: momentum_norms, momentum, norms, bf16_copy, select, pack, header, assemble,
// ns_gemm, repack, unpack, post, normalize, copy_pad, gather_rows, scatter, ef_decay.
struct KernelWork {
  std::string kernel;
  double gemm_flops = 0.0;
  std::int64_t hbm_bytes = 0;
  std::int64_t launches = 0;
};

// The collective that ends a phase (kind none for the last phase of a task).
// bytes_sent: per rank, self-chunk included (all-gather: the input size); bytes_per_peer: one
// message (all-to-all chunk, or the all-gather input every peer receives).
struct CollectiveWork {
  CollectiveKind kind = CollectiveKind::none;
  std::string name;                 // "norms_allgather", "a2a_fwd", "a2a_rev", "ddp_allgather"
  std::int64_t bytes_sent = 0;
  std::int64_t bytes_per_peer = 0;
};

struct PhasePlan {
  std::vector<KernelWork> kernels;  // compute after the previous collective, in issue order
  CollectiveWork collective;        // launched at the end of the phase
};

// One shape group = megabatch (§1.3), in reference order (first occurrence in the inventory).
struct GroupPlan {
  std::int64_t rows = 0, cols = 0;  // global R, C
  std::int64_t N = 0;               // matrices in the group
  std::int64_t Np = 0;              // pr * w (virtual zero matrices appended)
  std::int64_t pr = 0;              // matrices per owner rank, ceil(N / w)
  std::int64_t pl = 0;              // padded local rows ceil(S / w) (S for unsharded paths)
  std::int64_t k = 0;               // per-rank slot count max(1, ceil(f * pl)); unsharded: ceil(f*S)
  std::int64_t k_tot = 0;           // exact global count min(max(1, ceil(f * S)), S)
  std::int64_t kw = 0;              // k * w (NS rows per matrix for local / capped)
  double c = 0.0;                   // capacity factor actually used (0 when the scope is not capped)
  std::int64_t B = 0;               // pooled chunk budget in rows (0 when not capped)
  bool routed = false;              // global_capped routed to global by §4.1
  Path path = Path::single;
  bool select_rows = true;          // selection dim: rows (false: columns, Dion2 unsharded R > C)
  std::int64_t ns_rows = 0, ns_cols = 0;  // one NS input matrix [ns_rows, ns_cols] (before transposing)
  std::int64_t ns_matrices = 0;     // NS matrices per rank (pr, or N on the single path)
  double ns_flops = 0.0;            // per rank
  std::int64_t a2a_bytes = 0;       // fwd + rev sent per rank
  std::int64_t norms_bytes = 0;     // norm all-gather input per rank
  std::int64_t allgather_bytes = 0; // DDP all-gather input per rank
  std::vector<PhasePlan> phases;    // §1.7 phase structure of this path
};

struct Plan {
  PlanConfig config;
  std::string model;
  std::vector<GroupPlan> groups;
  std::int64_t a2a_payload_bytes = 0;      // sum of fwd + rev a2a bytes sent per rank per step
  std::int64_t norms_allgather_bytes = 0;  // sum of norm all-gather inputs per rank
  std::int64_t ddp_allgather_bytes = 0;    // sum of DDP all-gather inputs per rank
  double ns_flops_per_rank = 0.0;
  std::int64_t collectives = 0;            // collectives per step
};

// §2.3 / §4.1 arithmetic, in IEEE double exactly as the reference (ceil(f * x)).
[[nodiscard]] std::int64_t ceil_fraction(double fraction, std::int64_t x);
[[nodiscard]] double auto_capacity_factor(std::int64_t world, std::int64_t pr, std::int64_t k);
// Nominal NS GEMM FLOPs of one [rows, cols] matrix (§2.6.4).
[[nodiscard]] double ns_flops(NsKind ns, std::int64_t rows, std::int64_t cols);

// The plan of one shape group of N matrices (R, C) — the unit the CPU step and tests use.
[[nodiscard]] GroupPlan plan_group(std::int64_t rows, std::int64_t cols, std::int64_t N, const PlanConfig& config);
// Groups in reference order, totals. Validates the config first.
[[nodiscard]] Plan make_plan(const Inventory& inventory, const PlanConfig& config);

}  // namespace dionsim::opt
