#include "optimizer/capped.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "optimizer/bf16.hpp"

namespace dionsim::opt {

namespace {
std::size_t at(std::int64_t i) { return static_cast<std::size_t>(i); }
}  // namespace

std::int64_t padded_local_rows(std::int64_t S, std::int64_t world) { return (S + world - 1) / world; }

std::int64_t shard_begin(std::int64_t S, std::int64_t world, std::int64_t rank) {
  return std::min(S, rank * padded_local_rows(S, world));
}

std::int64_t shard_rows(std::int64_t S, std::int64_t world, std::int64_t rank) {
  const std::int64_t pl = padded_local_rows(S, world);
  return std::clamp<std::int64_t>(S - rank * pl, 0, pl);
}

std::vector<std::int64_t> top_k_rows(std::span<const float> keys, std::int64_t k) {
  const std::int64_t n = static_cast<std::int64_t>(keys.size());
  k = std::clamp<std::int64_t>(k, 0, n);
  std::vector<std::int64_t> idx(at(n));
  std::iota(idx.begin(), idx.end(), 0);
  // (key descending, index ascending) is a strict total order, so nth_element selects exactly the
  // rows a stable descending sort would put first.
  auto before = [&](std::int64_t a, std::int64_t b) {
    return keys[at(a)] > keys[at(b)] || (keys[at(a)] == keys[at(b)] && a < b);
  };
  if (k < n) {
    std::nth_element(idx.begin(), idx.begin() + k, idx.end(), before);
  }
  idx.resize(at(k));
  std::sort(idx.begin(), idx.end());
  return idx;
}

float global_row_key(std::span<const float> row) {
  float acc = 0.0f;
  for (const float v : row) acc += std::abs(round_bf16(v));
  return round_bf16(acc);
}

std::vector<float> pad_norms(std::span<const float> norms, std::int64_t N, std::int64_t L_r, std::int64_t pl) {
  if (L_r > pl) {
    throw std::invalid_argument("capped select: local size " + std::to_string(L_r) + " exceeds padded size " +
                                std::to_string(pl));
  }
  std::vector<float> out(at(N * pl), -1.0f);
  for (std::int64_t m = 0; m < N; ++m) {
    std::copy_n(norms.begin() + m * L_r, L_r, out.begin() + m * pl);
  }
  return out;
}

CappedWinners select_capped_winners(std::span<const float> gathered, std::int64_t world, std::int64_t N,
                                    std::int64_t pl, std::int64_t k_tot) {
  CappedWinners win;
  win.world = world;
  win.N = N;
  win.pl = pl;
  win.thresh.assign(at(N), 0.0f);
  win.mask.assign(at(world * N * pl), 0);
  const std::int64_t n = world * pl;
  std::vector<float> key(at(n));
  std::vector<std::int64_t> pos(at(n));
  for (std::int64_t m = 0; m < N; ++m) {
    for (std::int64_t s = 0; s < world; ++s) {  // flat position p = s*pl + row
      std::copy_n(gathered.begin() + (s * N + m) * pl, pl, key.begin() + s * pl);
    }
    std::iota(pos.begin(), pos.end(), 0);
    auto before = [&](std::int64_t a, std::int64_t b) {
      return key[at(a)] > key[at(b)] || (key[at(a)] == key[at(b)] && a < b);  // stable descending
    };
    const std::int64_t kk = std::min(k_tot, n);
    std::nth_element(pos.begin(), pos.begin() + (kk - 1), pos.end(), before);
    win.thresh[at(m)] = key[at(pos[at(kk - 1)])];
    for (std::int64_t i = 0; i < kk; ++i) {
      const std::int64_t p = pos[at(i)];
      win.mask[at(((p / pl) * N + m) * pl + p % pl)] = 1;
    }
  }
  return win;
}

CappedPack pack_capped(std::span<const float> norms, const CappedWinners& winners, std::int64_t rank,
                       std::int64_t L_r, std::int64_t pr, std::int64_t B) {
  CappedPack pack;
  pack_capped_into(norms, winners, rank, L_r, pr, B, pack);
  return pack;
}

void pack_capped_into(std::span<const float> norms, const CappedWinners& winners, std::int64_t rank,
                      std::int64_t L_r, std::int64_t pr, std::int64_t B, CappedPack& pack) {
  const std::int64_t w = winners.world;
  const std::int64_t N = winners.N;
  pack.world = w;
  pack.pr = pr;
  pack.B = B;
  pack.counts.resize(at(w));
  for (auto& c : pack.counts) c.assign(at(pr), 0);
  pack.slots.resize(at(w));
  for (auto& s : pack.slots) s.clear();
  pack.deferred.clear();
  pack.kept.assign(at(N * L_r), 0);
  pack.winner_rows = 0;
  struct Candidate {
    float prio;
    std::int64_t j, row;
  };
  std::vector<Candidate> cand;
  for (std::int64_t d = 0; d < w; ++d) {
    if (d * pr >= N) continue;  // only virtual matrices: no winners, nothing kept (counts and slots stay empty)
    cand.clear();
    for (std::int64_t j = 0; j < pr; ++j) {
      const std::int64_t m = d * pr + j;
      if (m >= N) break;  // virtual matrices: no winners
      const float t = std::max(winners.thresh[at(m)], 1e-12f);
      for (std::int64_t row = 0; row < L_r; ++row) {
        if (winners.is_winner(rank, m, row)) {
          cand.push_back({norms[at(m * L_r + row)] / t, j, row});  // fp32 scale-normalized priority
        }
      }
    }
    pack.winner_rows += static_cast<std::int64_t>(cand.size());
    // Candidates are generated in ascending flat index q = j*L_r + row, so a stable sort by priority
    // breaks ties by the smaller q, as the reference.
    std::stable_sort(cand.begin(), cand.end(), [](const Candidate& a, const Candidate& b) { return a.prio > b.prio; });
    const std::int64_t keep = std::min<std::int64_t>({B, pr * L_r, static_cast<std::int64_t>(cand.size())});
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(cand.size()); ++i) {
      const Candidate& c = cand[at(i)];
      const std::int64_t m = d * pr + c.j;
      if (i < keep) {
        pack.kept[at(m * L_r + c.row)] = 1;
        ++pack.counts[at(d)][at(c.j)];
      } else {
        pack.deferred.push_back({m, c.row});
      }
    }
    // Slot layout: position-preserving, matrix order then ascending local row (not priority order).
    for (std::int64_t j = 0; j < pr && d * pr + j < N; ++j) {
      const std::int64_t m = d * pr + j;
      for (std::int64_t row = 0; row < L_r; ++row) {
        if (pack.kept[at(m * L_r + row)] != 0) pack.slots[at(d)].push_back({m, row});
      }
    }
  }
  pack.deferred_rows = static_cast<std::int64_t>(pack.deferred.size());
}

CappedSelection select_and_pack_capped(const std::vector<std::vector<float>>& norms, std::int64_t S, std::int64_t N,
                                       std::int64_t k_tot, std::int64_t pr, std::int64_t B) {
  const auto w = static_cast<std::int64_t>(norms.size());
  const std::int64_t pl = padded_local_rows(S, w);
  CappedSelection out;
  for (std::int64_t r = 0; r < w; ++r) {
    const std::vector<float> padded = pad_norms(norms[at(r)], N, shard_rows(S, w, r), pl);
    out.gathered.insert(out.gathered.end(), padded.begin(), padded.end());
  }
  out.winners = select_capped_winners(out.gathered, w, N, pl, k_tot);
  for (std::int64_t r = 0; r < w; ++r) {
    out.packs.push_back(pack_capped(norms[at(r)], out.winners, r, shard_rows(S, w, r), pr, B));
  }
  return out;
}

void encode_header(std::span<const std::int32_t> counts, std::span<std::uint16_t> row) {
  if (2 * counts.size() > row.size()) {
    throw std::invalid_argument("capped header: 2*pr = " + std::to_string(2 * counts.size()) +
                                " words do not fit in a row of " + std::to_string(row.size()));
  }
  std::fill(row.begin(), row.end(), std::uint16_t{0});
  for (std::size_t j = 0; j < counts.size(); ++j) {  // bit-cast, never a float conversion (§4.5)
    const auto u = static_cast<std::uint32_t>(counts[j]);
    row[2 * j] = static_cast<std::uint16_t>(u & 0xFFFFu);
    row[2 * j + 1] = static_cast<std::uint16_t>(u >> 16);
  }
}

std::vector<std::int32_t> decode_header(std::span<const std::uint16_t> row, std::int64_t pr) {
  std::vector<std::int32_t> counts(at(pr));
  for (std::size_t j = 0; j < counts.size(); ++j) {
    const std::uint32_t u = static_cast<std::uint32_t>(row[2 * j]) | (static_cast<std::uint32_t>(row[2 * j + 1]) << 16);
    counts[j] = static_cast<std::int32_t>(u);
  }
  return counts;
}

CappedAssembly assemble_capped(std::span<const std::span<const std::uint16_t>> chunks, std::int64_t pr,
                               std::int64_t B, std::int64_t cols, std::int64_t kw, std::span<std::uint16_t> buffer) {
  const std::int64_t w = static_cast<std::int64_t>(chunks.size());
  CappedAssembly a;
  a.pr = pr;
  a.kw = kw;
  a.sender.assign(at(pr * kw), -1);
  a.slot.assign(at(pr * kw), -1);
  a.arrivals.assign(at(pr), 0);
  std::fill(buffer.begin(), buffer.end(), std::uint16_t{0});
  std::vector<std::vector<std::int32_t>> cnt(at(w));
  for (std::int64_t s = 0; s < w; ++s) {
    cnt[at(s)] = decode_header(chunks[at(s)].subspan(0, at(cols)), pr);
  }
  for (std::int64_t j = 0; j < pr; ++j) {
    std::int64_t dst = 0;
    for (std::int64_t s = 0; s < w; ++s) {  // sender-major: ascending global row order
      std::int64_t src_off = 0;
      for (std::int64_t jj = 0; jj < j; ++jj) src_off += std::max(0, cnt[at(s)][at(jj)]);
      const std::int64_t n = std::min<std::int64_t>({std::max(0, cnt[at(s)][at(j)]), B, kw});
      for (std::int64_t t = 0; t < n && src_off + t < B; ++t) {
        if (dst < kw) {
          const std::int64_t slot = src_off + t;
          std::copy_n(chunks[at(s)].begin() + (1 + slot) * cols, cols, buffer.begin() + (j * kw + dst) * cols);
          a.sender[at(j * kw + dst)] = static_cast<std::int32_t>(s);
          a.slot[at(j * kw + dst)] = static_cast<std::int32_t>(slot);
        } else {
          ++a.clipped;  // receiver clip: only a divergent sender can get here
        }
        ++dst;
      }
    }
    a.arrivals[at(j)] = dst;
  }
  return a;
}

void repack_capped(const CappedAssembly& a, std::span<const std::uint16_t> buffer, std::int64_t B, std::int64_t cols,
                   std::span<const std::span<std::uint16_t>> chunks) {
  for (const auto& chunk : chunks) std::fill(chunk.begin(), chunk.end(), std::uint16_t{0});
  for (std::int64_t i = 0; i < a.pr * a.kw; ++i) {
    const std::int32_t s = a.sender[at(i)];
    if (s < 0) continue;
    const std::int64_t slot = a.slot[at(i)];
    if (slot >= B) continue;
    std::copy_n(buffer.begin() + i * cols, cols, chunks[at(s)].begin() + slot * cols);
  }
}

}  // namespace dionsim::opt
