#pragma once
// Gradient streams of the deferral study (`dionsim deferral --norms`): where each step's gradient
// rows come from. Every stream is Gaussian rows G[i, :] = s_i * N(0, I_C) with a per-row scale s_i
// that is fixed for a whole trial:
//   iid                     s_i = 1
//   lognormal:SIGMA         s_i = exp(SIGMA * z_i), z_i ~ N(0, 1) drawn once per row and trial
//                           (heavy-tailed, persistent row scales)
//   skew:rank=R,factor=F    s_i = F for the rows of rank R's FSDP2 shard of every matrix, else 1
//                           (a persistently hotter shard)
//   skew:rows=P,factor=F    s_i = F for a random fraction P of every matrix's rows (drawn once per
//                           row and trial), else 1 (persistently hotter rows)
//   replay:DB               s_i drawn from gradient row statistics recorded in the results
//                           database DB (optimizer/row_stats.hpp: within-shard row-scale quantiles
//                           and shard skew, u_i drawn once per row and trial); the caller loads
//                           them into `replay` (the optimizer does not read databases)
// All random numbers are counter-based (a hash of seed, trial, group, matrix, step, row, column),
// so results do not depend on the number of threads or the order of work.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "optimizer/row_stats.hpp"

namespace dionsim::opt {

enum class StreamKind { iid, lognormal, skew_rank, skew_rows, replay };

struct NormStream {
  StreamKind kind = StreamKind::iid;
  double sigma = 0.0;          // lognormal
  std::int64_t rank = 0;       // skew_rank
  double rows_fraction = 0.0;  // skew_rows, in (0, 1]
  double factor = 1.0;         // skew: > 0
  std::string text = "iid";    // canonical spelling
  std::string replay_path;     // replay: the database file
  std::shared_ptr<const ReplayStats> replay;  // replay: loaded by the caller before running
};

// Throws UsageError naming `flag` (e.g. "--norms: got 'skew:rank=x', expected ...").
[[nodiscard]] NormStream parse_norm_stream(std::string_view text, std::string_view flag);

// Counter-based random numbers (splitmix64 finalizer over a combined key).
[[nodiscard]] std::uint64_t mix64(std::uint64_t x);
[[nodiscard]] std::uint64_t stream_key(std::uint64_t seed, std::uint64_t trial, std::uint64_t group, std::uint64_t matrix);
// Two independent N(0, 1) from one 64-bit counter (polar method over hashes of the counter).
void normal_pair(std::uint64_t key, std::uint64_t counter, double& z0, double& z1);
// Uniform in [0, 1) from one counter.
[[nodiscard]] double uniform01(std::uint64_t key, std::uint64_t counter);

// Per-row gradient scale s_i of a matrix's global row `row` (S rows of C columns, world ranks), for
// the stream. `key` = stream_key(seed, trial, group, matrix).
[[nodiscard]] double row_scale(const NormStream& stream, std::uint64_t key, std::int64_t row, std::int64_t S,
                               std::int64_t C, std::int64_t world);

}  // namespace dionsim::opt
