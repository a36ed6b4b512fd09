#pragma once
// The global_capped deferral engine as standalone functions over plain arrays (spec §4.3–4.8):
// exact-count stable winner selection over the gathered fp32 norms, the pooled per-destination
// pack with scale-normalized eviction, the int32 count header bit-cast into the first bf16 row,
// and the owner-side assemble / repack and the sender-side unpack. Rows travel as bf16 bit
// patterns (std::uint16_t). The CPU reference step calls exactly these functions; so can a
// deferral study that has only norms (select + pack need no matrix data).
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace dionsim::opt {

// FSDP2 contiguous chunking (§1.5): rank r holds rows [r*pl, min((r+1)*pl, S)).
[[nodiscard]] std::int64_t padded_local_rows(std::int64_t S, std::int64_t world);            // pl
[[nodiscard]] std::int64_t shard_rows(std::int64_t S, std::int64_t world, std::int64_t rank);  // L_r
[[nodiscard]] std::int64_t shard_begin(std::int64_t S, std::int64_t world, std::int64_t rank);

// Top-k of `keys` by value descending, ties broken by lower index (spec §2.4 / §9.1 recommendation
// for local and global, whose reference tie order is implementation-defined). Returns the chosen
// indices in ascending order. k is clamped to keys.size().
[[nodiscard]] std::vector<std::int64_t> top_k_rows(std::span<const float> keys, std::int64_t k);

// The global scope's ranking key of one row (§2.2): the L1 norm of the row's bf16 copy, summed in
// fp32 in column order, rounded to bf16 (8 significant bits: boundary ties are common). `row` holds
// the momentum values (any float: each is rounded to bf16 first, as the wire copy is).
[[nodiscard]] float global_row_key(std::span<const float> row);

// Pads one rank's norms [N, L_r] (row-major) to [N, pl] with -1 (§4.3 step 1). Throws
// std::invalid_argument "exceeds padded size" if L_r > pl.
[[nodiscard]] std::vector<float> pad_norms(std::span<const float> norms, std::int64_t N, std::int64_t L_r,
                                           std::int64_t pl);

// Winner sets of all matrices, identical on every rank (§4.3).
struct CappedWinners {
  std::int64_t world = 0, N = 0, pl = 0;
  std::vector<float> thresh;        // [N]: key at sorted position k_tot - 1
  std::vector<std::uint8_t> mask;   // [w][N][pl] rank-major like the gathered norms; 1 = winner
  [[nodiscard]] bool is_winner(std::int64_t rank, std::int64_t m, std::int64_t row) const {
    return mask[static_cast<std::size_t>((rank * N + m) * pl + row)] != 0;
  }
};
// gathered: [w][N][pl] fp32 (all ranks' padded norms, the all-gather output).
[[nodiscard]] CappedWinners select_capped_winners(std::span<const float> gathered, std::int64_t world,
                                                  std::int64_t N, std::int64_t pl, std::int64_t k_tot);

struct RowRef {
  std::int64_t matrix = 0;  // index in the megabatch (0..N-1)
  std::int64_t row = 0;     // local row in this rank's shard
};

// One rank's pack (§4.4): per destination its counts header, slot map and kept/deferred rows.
struct CappedPack {
  std::int64_t world = 0, pr = 0, B = 0;
  std::vector<std::vector<std::int32_t>> counts;  // [w][pr]
  std::vector<std::vector<RowRef>> slots;         // [w]: slot -> (matrix, row); size = sum counts[d]
  std::vector<RowRef> deferred;                   // winners not sent this step
  std::vector<std::uint8_t> kept;                 // [N][L_r]: 1 = winner sent this step ("applied")
  std::int64_t winner_rows = 0;                   // this rank's winners (all matrices)
  std::int64_t deferred_rows = 0;                 // winner_rows - kept rows
};
// norms: this rank's [N, L_r] fp32 keys (unpadded); winners from select_capped_winners.
[[nodiscard]] CappedPack pack_capped(std::span<const float> norms, const CappedWinners& winners, std::int64_t rank,
                                     std::int64_t L_r, std::int64_t pr, std::int64_t B);
// The same pack into an existing CappedPack, reusing its vectors' storage (the deferral study runs
// it for every rank of every step; pack_capped is this with a fresh object).
void pack_capped_into(std::span<const float> norms, const CappedWinners& winners, std::int64_t rank,
                      std::int64_t L_r, std::int64_t pr, std::int64_t B, CappedPack& pack);

// Phase A + select + pack for every rank of one megabatch, from the ranks' norms alone (no matrix
// data): pads each rank's [N, L_r] norms with -1, concatenates them rank-major (the all-gather's
// output), selects the winners and packs every rank. This is what the reference step runs; a
// deferral study can call it for many steps at large worlds. norms[r] is rank r's [N, L_r] keys.
struct CappedSelection {
  std::vector<float> gathered;   // [w][N][pl] (the all-gather output)
  CappedWinners winners;
  std::vector<CappedPack> packs;  // per rank
};
[[nodiscard]] CappedSelection select_and_pack_capped(const std::vector<std::vector<float>>& norms, std::int64_t S,
                                                     std::int64_t N, std::int64_t k_tot, std::int64_t pr,
                                                     std::int64_t B);

// Header (§4.5): the bit pattern of the pr int32 counts in the first 2*pr bf16 slots of a row of
// `cols` words, low half first; the rest zero. Requires 2*pr <= cols.
void encode_header(std::span<const std::int32_t> counts, std::span<std::uint16_t> row);
[[nodiscard]] std::vector<std::int32_t> decode_header(std::span<const std::uint16_t> row, std::int64_t pr);

// Writes the forward chunk for destination d: [1 + B, cols] bf16 words, header then payload slots
// in pack order, zero rows after. row_bf16(m, row, out) writes one momentum row as bf16 bits.
template <class RowFn>
void write_capped_chunk(const CappedPack& pack, std::int64_t d, std::int64_t cols, std::span<std::uint16_t> chunk,
                        RowFn&& row_bf16) {
  std::fill(chunk.begin(), chunk.end(), std::uint16_t{0});
  encode_header(pack.counts[static_cast<std::size_t>(d)], chunk.subspan(0, static_cast<std::size_t>(cols)));
  const auto& slots = pack.slots[static_cast<std::size_t>(d)];
  for (std::size_t t = 0; t < slots.size(); ++t) {
    row_bf16(slots[t].matrix, slots[t].row, chunk.subspan((t + 1) * static_cast<std::size_t>(cols),
                                                          static_cast<std::size_t>(cols)).data());
  }
}

// Owner side (§4.7): parses the w received forward chunks and fills the [pr, kw, cols] NS buffer
// (zero-initialised here). Returns the buffer-row -> (sender, slot) map used by repack; slot -1 =
// an empty row. Rows beyond kw are dropped (receiver clip) and counted in `clipped`.
struct CappedAssembly {
  std::int64_t pr = 0, kw = 0;
  std::vector<std::int32_t> sender;  // [pr][kw], -1 = zero row
  std::vector<std::int32_t> slot;    // [pr][kw]
  std::vector<std::int64_t> arrivals;  // [pr]: rows that arrived per matrix (before the clip)
  std::int64_t clipped = 0;
};
[[nodiscard]] CappedAssembly assemble_capped(std::span<const std::span<const std::uint16_t>> chunks,
                                             std::int64_t pr, std::int64_t B, std::int64_t cols, std::int64_t kw,
                                             std::span<std::uint16_t> buffer);
// Owner side (§4.8): writes each buffer row back to the slot it came from -> w chunks [B, cols].
void repack_capped(const CappedAssembly& assembly, std::span<const std::uint16_t> buffer, std::int64_t B,
                   std::int64_t cols, std::span<const std::span<std::uint16_t>> chunks);
// Sender side (§4.8): for every slot it sent, hands the returned row to out(m, row, bf16 words).
template <class OutFn>
void unpack_capped(const CappedPack& pack, std::span<const std::span<const std::uint16_t>> returned,
                   std::int64_t cols, OutFn&& out) {
  for (std::size_t d = 0; d < pack.slots.size(); ++d) {
    const auto& slots = pack.slots[d];
    for (std::size_t t = 0; t < slots.size(); ++t) {
      out(slots[t].matrix, slots[t].row, returned[d].subspan(t * static_cast<std::size_t>(cols),
                                                             static_cast<std::size_t>(cols)));
    }
  }
}

}  // namespace dionsim::opt
