#include "optimizer/plan.hpp"

#include <system_error>

#include <charconv>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <tuple>

#include "common/error.hpp"

namespace dionsim::opt {

std::string_view to_string(Scope s) {
  switch (s) {
    case Scope::local: return "local";
    case Scope::global: return "global";
    case Scope::global_capped: return "global_capped";
  }
  return "?";
}
std::string_view to_string(OptimizerKind o) { return o == OptimizerKind::dion2 ? "dion2" : "nordion2"; }
std::string_view to_string(NsKind n) {
  switch (n) {
    case NsKind::polar_express: return "polar_express";
    case NsKind::newton_schulz5: return "newton_schulz5";
    case NsKind::gram: return "gram";
  }
  return "?";
}
std::string_view to_string(Path p) {
  switch (p) {
    case Path::local: return "local";
    case Path::global: return "global";
    case Path::capped_packed: return "capped_packed";
    case Path::ddp: return "ddp";
    case Path::single: return "single";
  }
  return "?";
}
std::string_view to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::none: return "none";
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::all_to_all: return "all_to_all";
  }
  return "?";
}

Scope parse_scope(std::string_view text, std::string_view flag) {
  for (Scope s : {Scope::local, Scope::global, Scope::global_capped}) {
    if (text == to_string(s)) return s;
  }
  throw_bad_usage(flag, text, "one of local, global, global_capped");
}
OptimizerKind parse_optimizer(std::string_view text, std::string_view flag) {
  if (text == "dion2") return OptimizerKind::dion2;
  if (text == "nordion2") return OptimizerKind::nordion2;
  throw_bad_usage(flag, text, "dion2 or nordion2");
}
std::string_view to_string(Dtype d) { return d == Dtype::float32 ? "float32" : "bfloat16"; }
Dtype parse_dtype(std::string_view text, std::string_view flag) {
  if (text == "float32") return Dtype::float32;
  if (text == "bfloat16") return Dtype::bfloat16;
  throw_bad_usage(flag, text, "float32 or bfloat16");
}
NsKind parse_ns(std::string_view text, std::string_view flag) {
  for (NsKind n : {NsKind::polar_express, NsKind::newton_schulz5, NsKind::gram}) {
    if (text == to_string(n)) return n;
  }
  throw_bad_usage(flag, text, "one of polar_express, newton_schulz5, gram");
}

namespace {
std::string shortest(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string best = buf;
  for (int prec = 1; prec <= 17; ++prec) {  // shortest text that reads back as v
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) return buf;
  }
  return best;
}
}  // namespace

std::optional<double> parse_capacity_factor(std::string_view text, std::string_view flag) {
  if (text == "auto") return std::nullopt;
  double c = 0;
  const auto* end = text.data() + text.size();
  const auto r = std::from_chars(text.data(), end, c);
  if (text.empty() || r.ec != std::errc() || r.ptr != end) throw_bad_usage(flag, text, kCapacityFactorExpected);
  check_capacity_factor(c, flag);
  return c;
}

// At most kMaxCapacityFactor: B = ceil(c·pr·k) must stay an exact int64 (pr·k <= 2^48 rows), and a
// c beyond the world routes every group to exact global anyway (B + 1 >= pr·pl).
bool is_valid_capacity_factor(double c) { return c >= 1.0 && c <= kMaxCapacityFactor; }

void check_capacity_factor(std::optional<double> c, std::string_view flag) {
  if (c && !is_valid_capacity_factor(*c)) throw_bad_usage(flag, shortest(*c), kCapacityFactorExpected);
}

std::string capacity_factor_text(std::optional<double> c) { return c ? shortest(*c) : std::string("auto"); }

bool is_valid_fraction(double fraction) { return fraction > 0.0 && fraction <= 1.0; }

void check_fraction(double fraction, std::string_view flag) {
  if (!is_valid_fraction(fraction)) throw_bad_usage(flag, shortest(fraction), "a number in (0, 1]");
}

void validate(const PlanConfig& config) {
  if (config.world < 1) {
    throw_bad_usage("--world", std::to_string(config.world), "an integer >= 1");
  }
  check_fraction(config.fraction, "--fraction");
  check_capacity_factor(config.capacity_factor, "--capacity-factor");
  if ((config.momentum_bytes != 2 && config.momentum_bytes != 4) || (config.param_bytes != 2 && config.param_bytes != 4)) {
    throw_bad_usage("dtype", std::to_string(config.momentum_bytes), "2 (bf16) or 4 (fp32) bytes");
  }
}

std::int64_t ceil_fraction(double fraction, std::int64_t x) {
  // Deliberately double arithmetic, as the reference's Python floats (spec §0): 0.55*100 -> 56.
  return static_cast<std::int64_t>(std::ceil(fraction * static_cast<double>(x)));
}

double auto_capacity_factor(std::int64_t world, std::int64_t pr, std::int64_t k) {
  const double w = static_cast<double>(world);
  return 1.0 + 2.0 * std::sqrt((1.0 - 1.0 / w) / static_cast<double>(pr * k));
}

double ns_flops(NsKind ns, std::int64_t rows, std::int64_t cols) {
  const double m = static_cast<double>(std::min(rows, cols));
  const double n = static_cast<double>(std::max(rows, cols));
  if (ns == NsKind::gram) {
    return m < n ? 8.0 * m * m * n + 28.0 * m * m * m : 30.0 * m * m * m;
  }
  return 20.0 * m * m * n + 10.0 * m * m * m;
}

namespace {

constexpr std::int64_t kBf16 = 2;
constexpr std::int64_t kFp32 = 4;

// HBM traffic of the NS batch on [m, n] bf16 matrices (m <= n): per iteration A = XX^T (read X,
// write A), AA folded into baddbmm (read A three times, write B), X = aX + BX (read B, X twice,
// write X); plus the norm (read X) and the division (read, write).
std::int64_t ns_hbm_bytes(std::int64_t rows, std::int64_t cols) {
  const std::int64_t m = std::min(rows, cols);
  const std::int64_t n = std::max(rows, cols);
  return 5 * kBf16 * (4 * m * n + 6 * m * m) + 3 * kBf16 * m * n;
}
// Launches of one batched NS call: norm, scale, divide, then 3 per iteration (bmm, 2 baddbmm).
constexpr std::int64_t kNsLaunches = 3 + 5 * 3;

KernelWork ns_kernel(const GroupPlan& g, NsKind ns) {
  return {"ns_gemm", static_cast<double>(g.ns_matrices) * ns_flops(ns, g.ns_rows, g.ns_cols),
          g.ns_matrices * ns_hbm_bytes(g.ns_rows, g.ns_cols), kNsLaunches};
}

// Post (§2.7): weight decay on every element of X, add -lr*U; masked posts also read M to apply
// the EF decay on the applied rows. Shard of `rows` rows per matrix, N matrices.
KernelWork post_kernel(std::int64_t N, std::int64_t rows, std::int64_t C, const PlanConfig& cfg, bool masked,
                       std::int64_t update_rows) {
  const std::int64_t e = N * rows * C;
  std::int64_t bytes = 2 * e * cfg.param_bytes + N * update_rows * C * kBf16;
  if (masked) {
    bytes += 2 * e * cfg.momentum_bytes + e * kBf16;  // EF on M, mask scan of U
  }
  return {"post", 0.0, bytes, N * (masked ? 4 : 2)};
}

// NorDion2 normalization (§2.8): reads the applied rows, writes fp32 O', updates V.
KernelWork normalize_kernel(std::int64_t N, std::int64_t rows, std::int64_t C, const PlanConfig& cfg) {
  const std::int64_t e = N * rows * C;
  return {"normalize", 0.0, e * kBf16 + e * kFp32 + 2 * N * rows * cfg.param_bytes, N * 6};
}

void fill_phases(GroupPlan& g, const PlanConfig& cfg) {
  const std::int64_t w = cfg.world;
  const std::int64_t C = g.cols;
  const std::int64_t L = g.pl;  // rank 0 holds a full padded shard
  const std::int64_t N = g.N;
  const std::int64_t e = N * L * C;
  const std::int64_t mb = cfg.momentum_bytes;
  const std::int64_t pb = cfg.param_bytes;
  const bool nor = cfg.optimizer == OptimizerKind::nordion2;
  const KernelWork momentum{"momentum", 0.0, e * (pb + 2 * mb), N};
  auto& ph = g.phases;
  switch (g.path) {
    case Path::capped_packed: {
      const std::int64_t fwd_peer = (1 + g.B) * C * kBf16;
      const std::int64_t rev_peer = g.B * C * kBf16;
      ph.resize(4);
      ph[0].kernels = {{"momentum_norms", 0.0, e * (pb + 3 * mb) + N * L * kFp32, 2 * N},
                       {"copy_pad", 0.0, 2 * N * L * kFp32, 1}};
      ph[0].collective = {CollectiveKind::all_gather, "norms_allgather", g.norms_bytes, g.norms_bytes};
      ph[1].kernels = {{"select", 0.0, w * N * L * kFp32 * 2, 2 * N},
                       {"pack", 0.0, w * g.B * C * mb + w * fwd_peer, w},
                       {"header", 0.0, w * C * kBf16, 1}};
      ph[1].collective = {CollectiveKind::all_to_all, "a2a_fwd", w * fwd_peer, fwd_peer};
      ph[2].kernels = {{"assemble", 0.0, w * fwd_peer + g.pr * g.kw * C * kBf16, 1 + w},
                       ns_kernel(g, cfg.ns),
                       {"repack", 0.0, g.pr * g.kw * C * kBf16 + w * rev_peer, 1 + w}};
      ph[2].collective = {CollectiveKind::all_to_all, "a2a_rev", w * rev_peer, rev_peer};
      ph[3].kernels = {{"unpack", 0.0, w * rev_peer + e * kBf16, 1 + w}};
      if (nor) ph[3].kernels.push_back(normalize_kernel(N, L, C, cfg));
      ph[3].kernels.push_back(post_kernel(N, L, C, cfg, true, L));
      break;
    }
    case Path::global: {
      const std::int64_t peer = g.pr * g.pl * C * kBf16;
      const std::int64_t assembled = g.pr * w * g.pl * C * kBf16;
      ph.resize(3);
      ph[0].kernels = {momentum, {"copy_pad", 0.0, e * mb + w * peer, N + 1}};
      ph[0].collective = {CollectiveKind::all_to_all, "a2a_fwd", w * peer, peer};
      ph[1].kernels = {{"assemble", 0.0, 2 * assembled, 1},
                       {"norms", 0.0, assembled + g.pr * w * g.pl * kBf16, g.pr},
                       {"select", 0.0, g.pr * w * g.pl * kBf16, g.pr},
                       {"gather_rows", 0.0, 2 * g.pr * g.k_tot * C * kBf16, g.pr},
                       ns_kernel(g, cfg.ns),
                       {"scatter", 0.0, assembled + g.pr * g.k_tot * C * kBf16, 2 * g.pr}};
      ph[1].collective = {CollectiveKind::all_to_all, "a2a_rev", w * peer, peer};
      if (nor) ph[2].kernels.push_back(normalize_kernel(N, L, C, cfg));
      ph[2].kernels.push_back(post_kernel(N, L, C, cfg, true, L));
      break;
    }
    case Path::local: {
      const std::int64_t peer = g.pr * g.k * C * kBf16;
      ph.resize(3);
      ph[0].kernels = {momentum,
                       {"norms", 0.0, e * mb + N * L * mb, N},
                       {"select", 0.0, N * L * mb, N},
                       {"gather_rows", 0.0, N * g.k * C * mb + w * peer, N + 1},
                       {"ef_decay", 0.0, 2 * N * g.k * C * mb, N}};
      ph[0].collective = {CollectiveKind::all_to_all, "a2a_fwd", w * peer, peer};
      ph[1].kernels = {{"assemble", 0.0, 2 * g.pr * g.kw * C * kBf16, 1}, ns_kernel(g, cfg.ns)};
      ph[1].collective = {CollectiveKind::all_to_all, "a2a_rev", w * peer, peer};
      if (nor) ph[2].kernels.push_back(normalize_kernel(N, g.k, C, cfg));
      ph[2].kernels.push_back(post_kernel(N, L, C, cfg, false, g.k));
      break;
    }
    case Path::ddp:
    case Path::single: {
      // Whole matrices on every rank; selection along rows (k rows) or columns (k columns).
      const std::int64_t full = N * g.rows * g.cols;
      const std::int64_t sel = g.select_rows ? N * g.k * g.cols : N * g.rows * g.k;
      ph.resize(g.path == Path::ddp ? 2 : 1);
      ph[0].kernels = {{"momentum", 0.0, full * (pb + 2 * mb), N},
                       {"norms", 0.0, full * mb, N},
                       {"select", 0.0, N * (g.select_rows ? g.rows : g.cols) * mb, N},
                       {"gather_rows", 0.0, sel * (mb + kBf16), N},
                       {"ef_decay", 0.0, 2 * sel * mb, N},
                       ns_kernel(g, cfg.ns)};
      PhasePlan& last = ph.back();
      if (g.path == Path::ddp) {
        ph[0].collective = {CollectiveKind::all_gather, "ddp_allgather", g.allgather_bytes, g.allgather_bytes};
      }
      const std::int64_t upd_rows = g.select_rows ? g.k : g.rows;
      if (nor) last.kernels.push_back(normalize_kernel(N, upd_rows, g.select_rows ? g.cols : g.k, cfg));
      last.kernels.push_back({"post", 0.0, 2 * full * pb + sel * kBf16, 2 * N});
      break;
    }
  }
}

}  // namespace

GroupPlan plan_group(std::int64_t rows, std::int64_t cols, std::int64_t N, const PlanConfig& cfg) {
  GroupPlan g;
  g.rows = rows;
  g.cols = cols;
  g.N = N;
  const std::int64_t w = cfg.world;
  const double f = cfg.fraction;
  const bool fsdp = cfg.sharded && w > 1;  // a mesh of size 1 is "not sharded" (§1.4)
  if (fsdp) {
    // Row sharding / row selection (FSDP2 Shard(0); NorDion2 always rows).
    const std::int64_t S = rows;
    g.pr = (N + w - 1) / w;
    g.Np = g.pr * w;
    g.pl = (S + w - 1) / w;
    g.k = std::max<std::int64_t>(1, ceil_fraction(f, g.pl));
    g.k_tot = std::min(std::max<std::int64_t>(1, ceil_fraction(f, S)), S);
    g.kw = g.k * w;
    g.path = cfg.scope == Scope::local ? Path::local : Path::global;
    if (cfg.scope == Scope::global_capped) {
      g.c = cfg.capacity_factor ? *cfg.capacity_factor : auto_capacity_factor(w, g.pr, g.k);
      // Left to right in double, as the reference: (c * pr) * k, then ceil; no epsilon (§4.1).
      g.B = static_cast<std::int64_t>(std::ceil((g.c * static_cast<double>(g.pr)) * static_cast<double>(g.k)));
      g.routed = (g.B + 1 >= g.pr * g.pl) || (2 * g.pr > cols);
      g.path = g.routed ? Path::global : Path::capped_packed;
    }
    g.ns_matrices = g.pr;
    g.ns_rows = g.path == Path::global ? g.k_tot : g.kw;
    g.ns_cols = cols;
    const std::int64_t C = cols;
    if (g.path == Path::local) {
      g.a2a_bytes = 2 * g.Np * g.k * C * kBf16;
    } else if (g.path == Path::global) {
      g.a2a_bytes = 2 * g.Np * g.pl * C * kBf16;
    } else {
      g.a2a_bytes = w * (1 + g.B) * C * kBf16 + w * g.B * C * kBf16;
      g.norms_bytes = N * g.pl * kFp32;
    }
  } else {
    // Unsharded: Dion2 selects along the shorter dim, NorDion2 rows (§1.4); every scope is exact.
    g.select_rows = cfg.optimizer == OptimizerKind::nordion2 || rows <= cols;
    const std::int64_t S = g.select_rows ? rows : cols;
    g.pr = (N + w - 1) / w;
    g.Np = g.pr * w;
    g.pl = S;
    g.k = std::min(std::max<std::int64_t>(1, ceil_fraction(f, S)), S);
    g.k_tot = g.k;
    g.kw = g.k;
    const bool ddp = w > 1 && N > 1;
    g.path = ddp ? Path::ddp : Path::single;
    g.ns_matrices = ddp ? g.pr : N;
    g.ns_rows = g.select_rows ? g.k : rows;
    g.ns_cols = g.select_rows ? cols : g.k;
    if (ddp) {
      g.allgather_bytes = g.pr * g.ns_rows * g.ns_cols * kBf16;
    }
  }
  g.ns_flops = static_cast<double>(g.ns_matrices) * ns_flops(cfg.ns, g.ns_rows, g.ns_cols);
  fill_phases(g, cfg);
  return g;
}

Plan make_plan(const Inventory& inventory, const PlanConfig& config) {
  validate(config);
  Plan plan;
  plan.config = config;
  plan.model = inventory.name;
  // Bucket by global shape, first occurrence order (§1.3): one param group, one dtype.
  std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> buckets;
  std::map<std::pair<std::int64_t, std::int64_t>, std::size_t> index;
  for (const MatrixSpec& m : inventory.entries) {
    const auto key = std::make_pair(m.rows, m.cols);
    auto it = index.find(key);
    if (it == index.end()) {
      index.emplace(key, buckets.size());
      buckets.emplace_back(m.rows, m.cols, m.count);
    } else {
      std::get<2>(buckets[it->second]) += m.count;
    }
  }
  for (const auto& [r, c, n] : buckets) {
    GroupPlan g = plan_group(r, c, n, config);
    plan.a2a_payload_bytes += g.a2a_bytes;
    plan.norms_allgather_bytes += g.norms_bytes;
    plan.ddp_allgather_bytes += g.allgather_bytes;
    plan.ns_flops_per_rank += g.ns_flops;
    for (const PhasePlan& p : g.phases) {
      plan.collectives += p.collective.kind == CollectiveKind::none ? 0 : 1;
    }
    plan.groups.push_back(std::move(g));
  }
  return plan;
}

}  // namespace dionsim::opt
