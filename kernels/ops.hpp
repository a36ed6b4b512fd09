#pragma once
// The optimizer-facing kernel interface: plain C++ launchers over device pointers. bf16 data is
// passed as its bit pattern (uint16_t). All launchers are asynchronous on the given stream, assert
// their shape preconditions (DeviceError / std::invalid_argument before launch) and check the
// launch. Every one has a CPU reference in kernels/reference.hpp with the same contract.
// Layout conventions: matrices of a shape group are contiguous, row-major, matrix-major
// ([N][rows][C]); "segments" are independent rows of a 2-D array ([segments][len]).
#include <cstdint>
#include <utility>
#include <vector>

#include "optimizer/bf16.hpp"
#include "kernels/device.hpp"

namespace dionsim::kernels {

enum class MomentumDtype { fp32, bf16 };

// M += G (G fp32, cast to the momentum dtype first), then keys[r] = sum_j |M[r][j]| accumulated in
// fp32; for bf16 momentum the result is rounded to bf16 (torch's bf16 abs().sum()) (spec §2.1, §2.2).
void accumulate_row_l1(const float* G, void* M, MomentumDtype dtype, std::int64_t rows, std::int64_t cols,
                       float* keys, StreamHandle s);

// The same, also writing bf16(M) of matrix m's row r to copy[(m*pl + r)*cols] (the `global` path's
// forward payload [N][pl][C]; pad rows and virtual matrices are left untouched — zero them once).
void accumulate_row_l1_copy(const float* G, void* M, MomentumDtype dtype, int N, std::int64_t L, std::int64_t pl,
                            std::int64_t cols, float* keys, bf16_bits* copy, StreamHandle s);

// keys[r] = bf16(sum_j |X[r][j]|) of a bf16 matrix: the `global` scope's ranking key (§2.2).
void row_l1_bf16(const bf16_bits* X, std::int64_t rows, std::int64_t cols, float* keys, StreamHandle s);

// Exact-count stable selection: per segment, mask[i] = 1 for exactly min(count, len) positions,
// those with the largest keys, equal keys broken by the lower position (a stable descending sort's
// first `count`). kth_key (nullable) receives the key of the last selected position (the §4.3
// threshold; 0 when nothing is selected). Keys must not be NaN.
void stable_topk_mask(const float* keys, int segments, std::int64_t len, std::int64_t count, std::uint8_t* mask,
                      float* kth_key, StreamHandle s);

// Per segment: index[seg*len + t] = t-th set position in ascending order, count[seg] = how many.
void compact_mask(const std::uint8_t* mask, int segments, std::int64_t len, std::int32_t* index, std::int32_t* count,
                  StreamHandle s);

// out[seg][t] = bf16(src[seg][index[seg][t]]) for t < count[seg], zero rows for count[seg] <= t < slots.
// src is momentum-typed ([segments][rows_per_seg][cols]); out is [segments][slots][cols].
// ef != 1: the gathered (pre-decay) rows are then EF-decayed in place in M (fp32 product, one
// rounding) — the `local` path's copy-then-decay fused into one pass (§2.5).
void gather_rows_bf16(const void* src, MomentumDtype dtype, const std::int32_t* index, const std::int32_t* count,
                      int segments, std::int64_t rows_per_seg, std::int64_t slots, std::int64_t cols, bf16_bits* out,
                      StreamHandle s, float ef = 1.0F);
// Same with a bf16 source (the `global` path's assembled matrix).
void gather_rows_from_bf16(const bf16_bits* src, const std::int32_t* index, const std::int32_t* count, int segments,
                           std::int64_t rows_per_seg, std::int64_t slots, std::int64_t cols, bf16_bits* out,
                           StreamHandle s);
// The owner's assembled matrix j read straight from the received blocked layout [w][pr][pl][C]
// (assembled row p of matrix j = received row ((p/pl)*pr + j)*pl + p%pl), so no interleave pass:
// out[j][t] = that row for p = index[j*w*pl + t], zero rows for t >= count[j].
void gather_rows_blocked(const bf16_bits* recv, const std::int32_t* index, const std::int32_t* count, int w, int pr,
                         std::int64_t pl, std::int64_t slots, std::int64_t cols, bf16_bits* out, StreamHandle s);
// Inverse into the reverse payload: send [w][pr][pl][C] zeroed (zero_first), then row t of matrix
// j to its blocked position; src nullptr writes zero rows there instead (clears what an earlier
// call with the same index wrote, so a buffer kept zero needs no full memset).
void scatter_rows_blocked(const bf16_bits* src, const std::int32_t* index, const std::int32_t* count, int w, int pr,
                          std::int64_t pl, std::int64_t slots, std::int64_t cols, bf16_bits* send, StreamHandle s,
                          bool zero_first = true);
// Inverse: dst[seg][index[seg][t]] = src[seg][t] for t < count[seg]; dst rows not named are zeroed.
void scatter_rows_bf16(const bf16_bits* src, const std::int32_t* index, const std::int32_t* count, int segments,
                       std::int64_t slots, std::int64_t rows_per_seg, std::int64_t cols, bf16_bits* dst, StreamHandle s);
// M[seg][index[seg][t]] *= ef (fp32 product, one rounding to the momentum dtype) — `local` EF (§2.5).
void scale_rows(void* M, MomentumDtype dtype, const std::int32_t* index, const std::int32_t* count, int segments,
                std::int64_t rows_per_seg, std::int64_t cols, float ef, StreamHandle s);

// bf16 copy of the local shards padded to pl rows and Np matrices: out [Np][pl][C] (the `global`
// forward payload, §3.2 steps 1-2). M is [N][L][C] with L <= pl.
void pad_shards_bf16(const void* M, MomentumDtype dtype, int N, int Np, std::int64_t L, std::int64_t pl,
                     std::int64_t cols, bf16_bits* out, StreamHandle s);
// out[j][s*rows + t] = in[s][j][t] (received [w][pr][rows][C] -> owner buffer [pr][w*rows][C]);
// deinterleave is the inverse.
void interleave_blocks(const bf16_bits* in, int w, int pr, std::int64_t rows, std::int64_t cols, bf16_bits* out,
                       StreamHandle s);
void deinterleave_blocks(const bf16_bits* in, int w, int pr, std::int64_t rows, std::int64_t cols, bf16_bits* out,
                         StreamHandle s);

// ---- global_capped (§4) -------------------------------------------------------------------------

struct CappedShape {
  int w = 1, rank = 0;        // world and this rank
  int N = 0, pr = 0;          // real matrices, matrices per owner (Np = pr*w)
  std::int64_t pl = 0, L = 0;  // padded and real local rows (L <= pl)
  std::int64_t C = 0;         // columns
  std::int64_t k_tot = 0, kw = 0, B = 0;
  void validate() const;  // throws std::invalid_argument naming the bad field
};

// norms [N][L] -> out [N][pl] padded with -1 (§4.3 step 1; the all-gather's input).
void pad_norms(const float* norms, int N, std::int64_t L, std::int64_t pl, float* out, StreamHandle s);
// gathered [w][N][pl] -> keys [N][w*pl] (position p = s*pl + row).
void gather_to_matrix_major(const float* gathered, int w, int N, std::int64_t pl, float* keys, StreamHandle s);

// Scratch for capped_pack, sized once from the shape (no allocation inside a step).
class CappedScratch {
 public:
  explicit CappedScratch(const CappedShape& shape);
  float* prio() { return prio_.data(); }
  std::uint8_t* keep() { return keep_.data(); }
  std::int32_t* slot_of() { return index_.data(); }
  std::int32_t* kept_count() { return count_.data(); }

 private:
  DeviceArray<float> prio_;
  DeviceArray<std::uint8_t> keep_;
  DeviceArray<std::int32_t> index_;
  DeviceArray<std::int32_t> count_;
};

// Sender side (§4.4, §4.5): from this rank's post-accumulation momentum M [N][L][C], its norms
// [N][L], the winners mask [N][w*pl] and thresholds [N] (stable_topk_mask over the gathered keys),
// build send [w][1+B][C] bf16 (row 0 = int32 header bit-cast, payload position-preserving) and
// slot_src [w][B] (flat local row m*L+row of each payload slot, -1 for empty slots). stats[0] +=
// this rank's winners, stats[1] += its deferred winners (device int64 counters, no host sync).
void capped_pack(const CappedShape& shape, const void* M, MomentumDtype dtype, const float* norms,
                 const std::uint8_t* winners, const float* thresh, CappedScratch& scratch, bf16_bits* send,
                 std::int32_t* slot_src, long long* stats, StreamHandle s);
// Owner side: route[s][slot] = flat NS-buffer row j*kw + dst of payload slot `slot` from sender s,
// or -1 (empty slot, or receiver clip) (§4.7), parsed from the received headers recv [w][1+B][C].
void capped_route(const CappedShape& shape, const bf16_bits* recv, std::int32_t* route, StreamHandle s);
// buf [pr][kw][C] = 0; buf[route[s][slot]] = recv[s][1+slot].
void capped_assemble(const CappedShape& shape, const bf16_bits* recv, const std::int32_t* route, bf16_bits* buf,
                     StreamHandle s);
// ret [w][B][C]: ret[s][slot] = buf[route[s][slot]], zero where route is -1 (§4.8 repack).
void capped_repack(const CappedShape& shape, const bf16_bits* buf, const std::int32_t* route, bf16_bits* ret,
                   StreamHandle s);
// U [N][L][C] = 0 except U[slot_src[d][slot]] = back[d][slot] (§4.8 unpack).
void capped_unpack(const CappedShape& shape, const bf16_bits* back, const std::int32_t* slot_src, bf16_bits* U,
                   StreamHandle s);
// Header words of chunk d (bit-cast of the pr int32 counts) -> counts (host helper, also on device).
void decode_header_counts(const bf16_bits* header_row, int pr, std::int32_t* counts);

// ---- post (§2.5, §2.7, §2.8) --------------------------------------------------------------------

struct PostParams {
  float lr = 0.01F;
  float weight_decay = 0.01F;
  float adjusted_lr = 0.01F;  // from the global shape (§2.7)
  float ef = 1.0F;            // EF decay of applied rows (1 = none: the `local` path decayed pre-comm)
  bool round_update_bf16 = true;  // masked post: bf16(-adjusted_lr * U) before the add
  bool param_bf16 = false;        // bf16 parameters (stored as bf16-representable fp32): every write
                                  // of W and the update is rounded to bf16 (spec §2.10.6)
};

// Per matrix m < N, row r < L: W *= (1 - lr*wd) everywhere (the factor formed in fp32 as the
// reference's 0-dim fp32 tensors do); a row is applied when its U row
// (U is [N][u_rows][C], u_rows >= L, only the first L rows used) has a nonzero; applied rows get
// M *= ef (ef rounded to the momentum dtype first) and W -= adjusted_lr * U * row_scale[row]
// (row_scale nullable = 1; non-null = NorDion2, fp32 update, no bf16 rounding).
// u_row (nullable): row (m, r)'s U row is U row u_row[m*L + r] of U taken as a flat array of rows
// (-1: no update, the row is not applied) — the update read where it was received, no scatter pass
// (row_map_from_index / row_map_from_slots build the map).
void masked_post(float* W, void* M, MomentumDtype dtype, const bf16_bits* U, const float* row_scale, int N,
                 std::int64_t L, std::int64_t u_rows, std::int64_t cols, const PostParams& p, StreamHandle s,
                 const std::int32_t* u_row = nullptr);
// u_row [N*L]: -1 everywhere, then u_row[m*L + index[m*L + t]] = m*k + t for t < count[m] (the
// `local` path: matrix m's t-th selected row comes back as row m*k + t of the reverse payload).
void row_map_from_index(const std::int32_t* index, const std::int32_t* count, int N, std::int64_t L, std::int64_t k,
                        std::int32_t* u_row, StreamHandle s);
// u_row [rows]: -1 everywhere, then u_row[slot_src[i]] = i for every slot i < slots with
// slot_src[i] >= 0 (the capped unpack's map, §4.8, inverted: slots name distinct rows).
void row_map_from_slots(const std::int32_t* slot_src, std::int64_t slots, std::int64_t rows, std::int32_t* u_row,
                        StreamHandle s);

// ---- column selection (Dion2 unsharded, R > C: §1.4, §3.4) ---------------------------------------

// Scratch of accumulate_col_l1: per-column partial sums over chunks of rows, sized once.
class ColKeysScratch {
 public:
  ColKeysScratch(int N, std::int64_t rows, std::int64_t cols);
  float* data() { return partial_.data(); }
  [[nodiscard]] int chunks() const { return chunks_; }
  [[nodiscard]] std::size_t size() const { return partial_.size(); }

 private:
  int chunks_;
  DeviceArray<float> partial_;
};
// M += G over [N][rows][cols] (as accumulate_row_l1), then keys[m][c] = sum_r |M[m][r][c]| in
// fp32 (partial sums over chunks of 256 rows in row order, then the chunks in order); bf16 momentum
// rounds the key to bf16.
void accumulate_col_l1(const float* G, void* M, MomentumDtype dtype, int N, std::int64_t rows, std::int64_t cols,
                       float* keys, ColKeysScratch& scratch, StreamHandle s);
// The selected columns as the rows of a wide matrix: out[m][t][r] = bf16(M[m][r][index[m*cols + t]])
// for t < count[m] (pre-decay), zero rows for count[m] <= t < k; then M *= ef at those columns (fp32
// product, one rounding; ef = 1 skips it). out is [N][k][rows].
void gather_cols_bf16(void* M, MomentumDtype dtype, const std::int32_t* index, const std::int32_t* count, int N,
                      std::int64_t rows, std::int64_t cols, std::int64_t k, bf16_bits* out, StreamHandle s,
                      float ef = 1.0F);
// The indexed post of column selection: W *= (1 - lr*wd) everywhere; column c of matrix m with
// u_col[m*cols + c] = j >= 0 gets W[r][c] += -adjusted_lr * U[j][r] (U rows are the wide NS output
// [N*k][rows]; row_map_from_index(index, count, N, cols, k, u_col) builds the map). Rounding as
// masked_post with round_update_bf16 = false (p.ef is not used: EF was applied by the gather).
void post_cols(float* W, const bf16_bits* U, const std::int32_t* u_col, int N, std::int64_t rows, std::int64_t cols,
               const PostParams& p, StreamHandle s);

// NorDion2 normalization (§2.8) per matrix on this rank's rows: V [N][L] fp32 is updated for
// applied rows; row_scale [N][L] receives 1/(sqrt(V)+1e-8) * F0/max(|Ohat|_F, 1e-8) for applied
// rows and 0 elsewhere (so masked_post applies O' = O * row_scale).
// u_row as for masked_post.
void nordion2_row_scale(const bf16_bits* U, int N, std::int64_t L, std::int64_t u_rows, std::int64_t cols, float* V,
                        float muon_beta2, float* row_scale, StreamHandle s, bool v_bf16 = false,
                        const std::int32_t* u_row = nullptr);

// Deterministic pseudo-random N(0, scale^2)-like fill (hash of seed and index, Box-Muller) for
// measurement inputs; not a statistics-grade generator.
void fill_random(float* out, std::int64_t n, std::uint64_t seed, float scale, StreamHandle s);

// ---- Newton-Schulz (§2.6) -----------------------------------------------------------------------

// gram: Gram Newton-Schulz (§2.6.3) in fp16 (fp16 cuBLASLt GEMMs, fp32 accumulate), as
// optimizer/newton_schulz.hpp's CPU reference.
enum class NsKind { polar_express, quintic, gram };

// How NewtonSchulz computes its symmetric products X Xᵀ and A A: only the upper block triangle,
// mirrored. block_rows: one strided GEMM per block row (set_symmetric_blocks / _min); tiles: the
// upper triangle's rows x rows tiles of every matrix in one pointer-array GEMM.
enum class SymmetricLayout { block_rows, tiles };
struct NsLayout {
  SymmetricLayout kind = SymmetricLayout::block_rows;
  std::int64_t rows = 0;  // tile rows (a multiple of 8); block rows: unused when set, m / blocks when reported
};
// The layout unless set. Tiles of 256 rows: on H200 the NS of 4 x 5120 x 5120 takes 21.4 ms with
// them (512: 21.5, 640: 21.6, 1024: 22.2) against 22.2 ms with 8 block rows and 25.2 ms plain.
inline constexpr NsLayout kDefaultNsLayout{SymmetricLayout::tiles, 256};

// How a NewtonSchulz runs its GEMMs (GpuOptimizer hands it to every rank's instance).
struct NsTuning {
  bool autotune = false;            // NewtonSchulz::set_autotune
  NsLayout layout = kDefaultNsLayout;  // NewtonSchulz::set_symmetric_layout
};

// Batched in-place orthogonalization of X [batch][rows][cols] bf16 with cuBLASLt bf16 GEMMs (fp32
// accumulate, bf16 out) and the §2.6.1 rounding sequence. Scratch is sized by reserve(); run()
// never allocates once reserved for that size.
class NewtonSchulz {
 public:
  explicit NewtonSchulz(NsKind kind, float eps = 1e-8F);
  ~NewtonSchulz();
  NewtonSchulz(const NewtonSchulz&) = delete;
  NewtonSchulz& operator=(const NewtonSchulz&) = delete;
  void reserve(int batch, std::int64_t rows, std::int64_t cols);
  void run(bf16_bits* X, int batch, std::int64_t rows, std::int64_t cols, StreamHandle s);
  // Gram sizes m >= this use the symmetric block-row products for X Xᵀ and A A (default 2048;
  // tests lower it to exercise the path on small shapes).
  void set_symmetric_min(std::int64_t m);
  // At most this many block rows (default 8; 1 = plain GEMMs); the count used for a Gram size m is
  // the largest <= it that splits m into block rows of a multiple of 8 (symmetric_blocks(m)).
  void set_symmetric_blocks(int max_blocks);
  // Autotune (default off): the first GEMM of each shape times up to 8 cuBLASLt heuristic
  // candidates (all with fp32 split-K reduction) and keeps the fastest; set before the first run().
  // It synchronizes the host once per new shape, and the choice can differ between runs.
  void set_autotune(bool on);
  // The symmetric products' layout (default kDefaultNsLayout). Where tiles do not apply to a shape
  // (rows must split m into >= 2 tiles) the shape uses block rows. Throws std::invalid_argument for
  // tiles without positive rows that are a multiple of 8.
  void set_symmetric_layout(NsLayout layout);
  // The layout run() uses for this shape (rows = the block size; for block rows m / blocks). With
  // autotuning, the first run of a shape times block rows, the configured layout and the tiles of
  // 128, 256 and 512 rows that apply on that run's input and keeps the fastest (another host
  // synchronization, once per shape).
  [[nodiscard]] NsLayout layout(int batch, std::int64_t rows, std::int64_t cols) const;
  // For tests: the first iteration's symmetric products of X (X is not modified) with the
  // configured layout, downloaded as dense row-major [batch][m][m]: A = X Xᵀ (tall: Xᵀ X) and A A.
  std::pair<std::vector<bf16_bits>, std::vector<bf16_bits>> symmetric_products(const bf16_bits* X, int batch,
                                                                               std::int64_t rows, std::int64_t cols,
                                                                               StreamHandle s);
  [[nodiscard]] std::int64_t symmetric_blocks(std::int64_t m) const;
  // Nominal GEMM FLOPs of one run (§2.6.4): batch * (20 m^2 n + 10 m^3).
  static double flops(int batch, std::int64_t rows, std::int64_t cols);
  // GEMM FLOPs one run executes with the layout this shape uses (Polar Express / quintic: the
  // symmetric products' upper block triangles, (nb+1)/(2nb) of a full product each; Gram: plain
  // GEMMs, 8 m^2 n + 28 m^3, or 30 m^3 when square).
  [[nodiscard]] double executed_flops(int batch, std::int64_t rows, std::int64_t cols) const;
  // One plain bf16 GEMM [m x k] x [k x n] through the same cuBLASLt path, batched (for the
  // "cuBLAS's own" TFLOP/s baseline in the benchmark). A, B, C are device bf16.
  void gemm(const bf16_bits* A, const bf16_bits* B, bf16_bits* C, int batch, std::int64_t m, std::int64_t n,
            std::int64_t k, StreamHandle s);

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace dionsim::kernels
