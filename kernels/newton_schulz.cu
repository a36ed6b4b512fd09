// Polar Express / quintic Newton-Schulz (§2.6.1, §2.6.2) on cuBLASLt bf16 GEMMs (fp32 accumulate,
// bf16 output) batched over a megabatch, with the reference's eager rounding sequence:
//   n = bf16(|X|_F); d = bf16(bf16(n*1.02) + eps); X = bf16(X/d)
//   A = bf16(X Xᵀ); B = bf16(bf16(b*A) + bf16(c*bf16(A A))); X = bf16(bf16(a*X) + bf16(B X))
// (tall inputs: A = XᵀX and X B). Row-major matrices are handed to column-major cuBLASLt as their
// transposes (Y = Xᵀ, ld = cols), so no copies are made.
#include "kernels/cublaslt.cuh"
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/check.cuh"
#include "kernels/common.cuh"
#include "kernels/ops.hpp"
#include "optimizer/newton_schulz_coefficients.hpp"

#define DIONSIM_CUBLAS_CHECK(call, op)                                                                    \
  do {                                                                                                    \
    const cublasStatus_t st_ = (call);                                                                    \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                                     \
      ::dionsim::kernels::detail::throw_device_error(#call, std::string("cublasStatus ") + std::to_string(static_cast<int>(st_)), (op), __FILE__, __LINE__); \
  } while (0)

namespace dionsim::kernels {
namespace {

constexpr int kFrobBlocks = 64;
constexpr std::size_t kWorkspaceBytes = 32u << 20;

__global__ void frob_partial_kernel(const std::uint16_t* X, long long per, float* partial) {
  const long long b = blockIdx.y;
  const std::uint16_t* x = X + b * per;
  float acc = 0.0F;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long first = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (per % 8 == 0 && detail::aligned16(x)) {
    const uint4* x8 = reinterpret_cast<const uint4*>(x);
    for (long long i = first; i < per / 8; i += stride) {
      float f[8];
      detail::unpack8(x8[i], f);
#pragma unroll
      for (int k = 0; k < 8; ++k) acc += f[k] * f[k];
    }
  } else {
    for (long long i = first; i < per; i += stride) {
      const float v = detail::bf16_to_float(x[i]);
      acc += v * v;
    }
  }
  acc = detail::block_sum(acc);
  if (threadIdx.x == 0) partial[b * gridDim.x + blockIdx.x] = acc;
}
// d = bf16(bf16(n*safety) + eps) with n = bf16(sqrt(sum)); safety 1.0 skips that rounding step.
__global__ void frob_finalize_kernel(const float* partial, int batch, float safety, float eps, float* denom) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= batch) return;
  float sum = 0.0F;
  for (int i = 0; i < kFrobBlocks; ++i) sum += partial[b * kFrobBlocks + i];
  const float n = detail::round_to_bf16(sqrtf(sum));
  const float scaled = safety == 1.0F ? n : detail::round_to_bf16(n * safety);
  denom[b] = detail::round_to_bf16(scaled + eps);
}
__global__ void divide_kernel(std::uint16_t* X, long long per, const float* denom) {
  const long long b = blockIdx.y;
  const float d = denom[b];
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long first = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  std::uint16_t* x = X + b * per;
  if (per % 8 == 0 && detail::aligned16(x)) {
    uint4* x8 = reinterpret_cast<uint4*>(x);
    for (long long i = first; i < per / 8; i += stride) {
      float f[8];
      detail::unpack8(x8[i], f);
#pragma unroll
      for (int k = 0; k < 8; ++k) f[k] = f[k] / d;
      x8[i] = detail::pack8(f);
    }
    return;
  }
  for (long long i = first; i < per; i += stride) x[i] = detail::float_to_bf16(detail::bf16_to_float(x[i]) / d);
}
// out = bf16(bf16(p*x) + bf16(q*y)) with q == 1 meaning y is already the rounded product.
__global__ void axpby_kernel(const std::uint16_t* x, const std::uint16_t* y, long long n, float p, float q,
                             std::uint16_t* out) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long first = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (n % 8 == 0 && detail::aligned16(x) && detail::aligned16(y) && detail::aligned16(out)) {
    const uint4* x8 = reinterpret_cast<const uint4*>(x);
    const uint4* y8 = reinterpret_cast<const uint4*>(y);
    uint4* o8 = reinterpret_cast<uint4*>(out);
    for (long long i = first; i < n / 8; i += stride) {
      float a[8], b[8];
      detail::unpack8(x8[i], a);
      detail::unpack8(y8[i], b);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float pa = detail::round_to_bf16(p * a[k]);
        const float qb = q == 1.0F ? b[k] : detail::round_to_bf16(q * b[k]);
        a[k] = pa + qb;
      }
      o8[i] = detail::pack8(a);
    }
    return;
  }
  for (long long i = first; i < n; i += stride) {
    const float a = detail::round_to_bf16(p * detail::bf16_to_float(x[i]));
    const float b = q == 1.0F ? detail::bf16_to_float(y[i]) : detail::round_to_bf16(q * detail::bf16_to_float(y[i]));
    out[i] = detail::float_to_bf16(a + b);
  }
}

// The symmetric products are computed as their upper block triangle of block size b (element (r, c)
// of a column-major [m x m] matrix with leading dimension ld is "lower" when r/b > c/b and then
// equals element (c, r)). One 64 x 64 tile per thread block of 32 x 8 threads; each thread moves
// two vertically adjacent elements (rows r, r + 1 of a column) as one 32-bit word, and the
// transposed tile is staged in shared memory, so that reads and writes are coalesced 128-byte
// rows. Requires m, ld and every matrix offset even and b a multiple of 2 (the callers' m and b
// are multiples of 8), so a word never straddles a block row or the matrix edge. Index math is
// 32-bit (m < 2^31); a tile that lies wholly above or below the block diagonal skips the per-word
// test. `sq` elements per matrix of the batch.
// (The first version — 32 x 32 tiles, one 16-bit element per thread, 64-bit divisions per element —
// ran at a fifth of HBM bandwidth: 1.1 ms per iteration for 4 x 5120², under ncu.)
// kUpdate = false: dst = src with the lower blocks mirrored; in place (dst == src) only the lower
// blocks are written.
// kUpdate = true: dst = bf16(bf16(p*full) + bf16(q*src)) with src's lower blocks read from its upper
// ones — the §2.6.1 `B` update fused with AA's mirror (AA itself is left half-filled).
constexpr int kTile = 64;
constexpr int kTileWords = kTile / 2;    // threads along a column (one 32-bit word each)
constexpr int kTileRows = 8;             // threads across columns
constexpr int kPerThread = kTile / kTileRows;  // columns per thread: loads issued together, unrolled
template <bool kUpdate>
__global__ void __launch_bounds__(kTileWords* kTileRows)
    symmetric_blocks_kernel(const std::uint16_t* src, const std::uint16_t* full, std::uint16_t* dst, int m, long long ld,
                            long long sq, int b, float p, float q) {
  // staged[i][j] = src(c0 + i, r0 + j): the source tile transposed; rows padded to keep 32-bit
  // alignment and spread the banks.
  __shared__ __align__(16) std::uint16_t staged[kTile][kTile + 2];
  const int tiles = (m + kTile - 1) / kTile;
  const int ti = static_cast<int>(blockIdx.x) % tiles, tj = static_cast<int>(blockIdx.x) / tiles;  // row, column tile
  const int r0 = ti * kTile, c0 = tj * kTile;
  const int r_end = min(r0 + kTile, m), c_end = min(c0 + kTile, m);
  const int row_block_first = r0 / b, row_block_last = (r_end - 1) / b;
  const int col_block_first = c0 / b, col_block_last = (c_end - 1) / b;
  const bool has_lower = row_block_last > col_block_first;
  const bool all_lower = row_block_first > col_block_last;
  const bool in_place = !kUpdate && dst == src;
  if (in_place && !has_lower) return;
  const long long base = static_cast<long long>(blockIdx.y) * sq;
  const auto* src_words = reinterpret_cast<const unsigned*>(src + base);
  const int x = static_cast<int>(threadIdx.x), y = static_cast<int>(threadIdx.y);
  if (has_lower) {  // words of src rows c0 + 2x, +1 in columns r0 + k, k = y + i * kTileRows
    unsigned v[kPerThread];
    const int row = c0 + 2 * x;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int col = r0 + y + i * kTileRows;
      v[i] = row < m && col < m ? src_words[(row + col * ld) / 2] : 0U;
    }
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int k = y + i * kTileRows;
      staged[2 * x][k] = static_cast<std::uint16_t>(v[i] & 0xFFFFU);
      staged[2 * x + 1][k] = static_cast<std::uint16_t>(v[i] >> 16);
    }
    __syncthreads();
  }
  const int r = r0 + 2 * x;
  if (r >= m) return;
  const int row_block = r / b;
  auto* dst_words = reinterpret_cast<unsigned*>(dst + base);
  // Loads first (the upper words, and `full` for the update), then the arithmetic and stores.
  unsigned from_src[kPerThread], from_full[kPerThread];
  bool lower[kPerThread], inside[kPerThread];
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int c = c0 + y + i * kTileRows;
    inside[i] = c < m;
    lower[i] = inside[i] && (all_lower || (has_lower && row_block > c / b));
    const long long at = (r + static_cast<long long>(c) * ld) / 2;
    const bool need_src = inside[i] && !lower[i] && !in_place;
    from_src[i] = need_src ? src_words[at] : 0U;
    from_full[i] = kUpdate && inside[i] ? reinterpret_cast<const unsigned*>(full + base)[at] : 0U;
  }
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    if (!inside[i]) continue;
    const int k = y + i * kTileRows;
    const long long at = (r + static_cast<long long>(c0 + k) * ld) / 2;
    const unsigned word = lower[i] ? *reinterpret_cast<const unsigned*>(&staged[k][2 * x]) : from_src[i];
    if constexpr (!kUpdate) {
      if (lower[i] || !in_place) dst_words[at] = word;
    } else {
      unsigned out = 0;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float pa =
            detail::round_to_bf16(p * detail::bf16_to_float(static_cast<std::uint16_t>(from_full[i] >> (16 * h))));
        const float qa = detail::round_to_bf16(q * detail::bf16_to_float(static_cast<std::uint16_t>(word >> (16 * h))));
        out |= static_cast<unsigned>(detail::float_to_bf16(pa + qa)) << (16 * h);
      }
      dst_words[at] = out;
    }
  }
}

// Operand pointers of the upper-triangle tiles of a symmetric product, for cuBLASLt's pointer-array
// batch: entry q = (matrix p, tile t), t enumerating the tiles (i, j), i <= j, row by row. Tile
// (i, j) is C(i*b.., j*b..) = op(A at a + p*sa + i*b*step_a) op(B at bb + p*sb + j*b*step_b), C at
// c + p*sc + i*b + j*b*ldc (column-major).
struct TileProduct {
  const std::uint16_t* a;
  const std::uint16_t* b;
  std::uint16_t* c;
  long long sa, sb, sc, step_a, step_b, ldc;
};
__global__ void tile_pointers_kernel(TileProduct x, TileProduct y, long long nb, long long b, long long count,
                                     const void** out) {
  const long long q = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (q >= count) return;
  const long long tiles = nb * (nb + 1) / 2;
  const long long p = q / tiles;
  long long t = q % tiles, i = 0;
  while (t >= nb - i) {  // row i of the upper triangle holds nb - i tiles
    t -= nb - i;
    ++i;
  }
  const long long j = i + t;
  const TileProduct* prods[2] = {&x, &y};
  for (int k = 0; k < 2; ++k) {
    const TileProduct& g = *prods[k];
    const void** o = out + k * 3 * count;
    o[q] = g.a + p * g.sa + i * b * g.step_a;
    o[count + q] = g.b + p * g.sb + j * b * g.step_b;
    o[2 * count + q] = g.c + p * g.sc + i * b + j * b * g.ldc;
  }
}

// ---- Gram Newton-Schulz (§2.6.3) helpers, fp16 ----
__device__ inline std::uint16_t float_to_fp16(float f) {
  const __half h = __float2half_rn(f);
  return *reinterpret_cast<const std::uint16_t*>(&h);
}
__device__ inline float fp16_to_float(std::uint16_t b) { return __half2float(*reinterpret_cast<const __half*>(&b)); }
// d = |X|_F + 1e-7 in fp32 (upstream normalizes the fp32 copy; no bf16 roundings).
__global__ void gram_denominator_kernel(const float* partial, int batch, float eps, float* denom) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= batch) return;
  float sum = 0.0F;
  for (int i = 0; i < kFrobBlocks; ++i) sum += partial[b * kFrobBlocks + i];
  denom[b] = __fadd_rn(sqrtf(sum), eps);
}
// out = fp16(x / d) (the fp32 quotient, then the cast), elementwise: the storage orientation is kept.
__global__ void gram_normalize_kernel(const std::uint16_t* x, long long per, const float* denom, std::uint16_t* out) {
  const long long b = blockIdx.y;
  const float d = denom[b];
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < per; i += stride)
    out[b * per + i] = float_to_fp16(__fdiv_rn(detail::bf16_to_float(x[b * per + i]), d));
}
// Q = fp16(Z + a I) on column-major [m x m] matrices with leading dimension ld (batch stride sq).
__global__ void gram_add_identity_kernel(const std::uint16_t* Z, long long m, long long ld, long long sq, float a,
                                         std::uint16_t* Q) {
  const long long b = blockIdx.y;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < sq; i += stride) {
    const long long r = i % ld, c = i / ld;
    const std::uint16_t z = Z[b * sq + i];
    Q[b * sq + i] = r == c && r < m ? float_to_fp16(__fadd_rn(fp16_to_float(z), a)) : z;
  }
}
// x = bf16(fp16 value) (X.to(original dtype)).
__global__ void gram_to_bf16_kernel(const std::uint16_t* in, long long n, std::uint16_t* x) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n; i += stride)
    x[i] = detail::float_to_bf16(fp16_to_float(in[i]));
}

unsigned elementwise_blocks(long long n) { return std::min<unsigned>(detail::blocks_for(n, 256), 8192u); }

}  // namespace

struct NewtonSchulz::Impl {
  // A layout applied to one shape: block size b (tile rows or block-row height; b = m means one
  // plain GEMM).
  struct Resolved {
    SymmetricLayout kind;
    long long b;
  };
  NsKind kind;
  float eps;
  // Gram size from which the symmetric block-row products are used, and how many block rows.
  // Measured on H200 (results/): [4 x 5120 x 5120] 25.0 -> 23.1 ms with 4 block rows; [16 x 1280 x
  // 5120] 5.1 -> 5.9 ms with 2 (640-row GEMMs lose more efficiency than the 25 % of FLOPs saved),
  // so only large Grams use it.
  long long sym_min = 2048;
  int sym_max_blocks = 8;
  NsLayout configured = kDefaultNsLayout;  // set_symmetric_layout
  DeviceArray<const void*> tile_ptrs;  // tiles: [2 products][a, b, c][batch * tiles]
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  DeviceArray<bf16_bits> A, AA, Bm, BX;
  DeviceArray<float> partial, denom;
  // (transa, transb, m, n, k, lda, ldb, ldc, batch, strideA, strideB, strideC, pointer-array batch)
  // -> cached descriptors
  // The last element: the element type (0 bf16, 1 fp16 — Gram NS).
  using Key = std::tuple<int, int, long long, long long, long long, long long, long long, long long, int, long long,
                         long long, long long, bool, int>;
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    std::vector<cublasLtMatmulAlgo_t> candidates;  // the heuristic's list, best first (autotune)
    bool tuned = false;
  };
  bool autotune = false;
  static constexpr int kCandidates = 8;
  std::map<Key, Plan> plans;

  Plan& plan(const Key& key) {
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
    const bool ta = std::get<0>(key) != 0, tb = std::get<1>(key) != 0;
    const long long m = std::get<2>(key), n = std::get<3>(key), k = std::get<4>(key);
    const long long lda = std::get<5>(key), ldb = std::get<6>(key), ldc = std::get<7>(key);
    const int batch = std::get<8>(key);
    const long long sa = std::get<9>(key), sb = std::get<10>(key), sc = std::get<11>(key);
    const bool pointers = std::get<12>(key);
    const cudaDataType_t type = std::get<13>(key) == 1 ? CUDA_R_16F : CUDA_R_16BF;
    Plan p;
    const char* op = "newton_schulz (cuBLASLt plan)";
    DIONSIM_CUBLAS_CHECK(cublaslt().desc_create(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), op);
    const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    DIONSIM_CUBLAS_CHECK(cublaslt().desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)), op);
    DIONSIM_CUBLAS_CHECK(cublaslt().desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)), op);
    auto layout = [&](cublasLtMatrixLayout_t* l, long long rows, long long cols, long long ld, long long stride) {
      DIONSIM_CUBLAS_CHECK(cublaslt().layout_create(l, type, static_cast<std::uint64_t>(rows),
                                                      static_cast<std::uint64_t>(cols), ld), op);
      const int bc = batch;
      DIONSIM_CUBLAS_CHECK(cublaslt().layout_set_attribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof(bc)), op);
      if (pointers) {
        const std::uint32_t mode = CUBLASLT_BATCH_MODE_POINTER_ARRAY;
        DIONSIM_CUBLAS_CHECK(cublaslt().layout_set_attribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &mode, sizeof(mode)), op);
        return;
      }
      const std::int64_t st = stride;
      DIONSIM_CUBLAS_CHECK(cublaslt().layout_set_attribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof(st)), op);
    };
    layout(&p.a, ta ? k : m, ta ? m : k, lda, sa);
    layout(&p.b, tb ? n : k, tb ? k : n, ldb, sb);
    layout(&p.c, m, n, ldc, sc);
    cublasLtMatmulPreference_t pref = nullptr;
    DIONSIM_CUBLAS_CHECK(cublaslt().preference_create(&pref), op);
    const std::size_t ws = kWorkspaceBytes;
    DIONSIM_CUBLAS_CHECK(cublaslt().preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)), op);
    // Split-K partial sums must be reduced in fp32: the in-place / output-type schemes add the
    // partials in the bf16 output, which put single small GEMMs (12 x 12 x 96, batch 1) 7 % off the
    // reference after Polar Express (measured on H200, cuBLAS 13; batch 2 of the same shape was exact).
    const std::uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    DIONSIM_CUBLAS_CHECK(cublaslt().preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof(schemes)), op);
    std::array<cublasLtMatmulHeuristicResult_t, kCandidates> results{};
    int returned = 0;
    DIONSIM_CUBLAS_CHECK(cublaslt().algo_get_heuristic(handle, p.desc, p.a, p.b, p.c, p.c, pref,
                                                        autotune ? kCandidates : 1, results.data(), &returned),
                         op);
    cublaslt().preference_destroy(pref);
    if (returned == 0)
      detail::throw_device_error("cublasLtMatmulAlgoGetHeuristic", "no algorithm for this GEMM shape", op, __FILE__, __LINE__);
    p.algo = results[0].algo;
    for (int i = 0; i < returned; ++i) {
      const auto& r = results[static_cast<std::size_t>(i)];
      if (r.state == CUBLAS_STATUS_SUCCESS) p.candidates.push_back(r.algo);
    }
    p.tuned = p.candidates.size() < 2;
    return plans.emplace(key, p).first->second;
  }

  // Block rows for the symmetric products: the most (<= sym_max_blocks) that divide m into block
  // rows of a multiple of 8 elements (16-byte aligned offsets); 1 = plain GEMM.
  [[nodiscard]] long long sym_blocks(long long m) const {
    if (m < sym_min) return 1;
    for (long long nb = sym_max_blocks; nb >= 2; --nb)
      if (m % nb == 0 && (m / nb) % 8 == 0) return nb;
    return 1;
  }
  // The layout used for a shape: tiles when `rows` splits m into >= 2 tiles, else block rows
  // (nb = sym_blocks(m), which is 1 — one plain GEMM — below the symmetric minimum).
  [[nodiscard]] Resolved resolve(NsLayout want, long long rows, long long cols) const {
    const long long m = std::min(rows, cols);
    if (want.kind == SymmetricLayout::tiles && want.rows > 0 && m % want.rows == 0 && m / want.rows >= 2)
      return {SymmetricLayout::tiles, want.rows};
    return {SymmetricLayout::block_rows, m / sym_blocks(m)};
  }
  static long long tile_count(long long m, long long b) { return (m / b) * (m / b + 1) / 2; }
  // Gram matrices are column-major with a leading dimension rounded up to 8 elements, so that every
  // column starts 16-byte aligned (the block products offset into them by rows).
  static long long gram_ld(long long m) { return (m + 7) / 8 * 8; }
  static long long gram_sq(long long m) { return m * gram_ld(m); }
  // Layouts the autotuning tries besides block rows (those that apply to the shape).
  static constexpr std::array<NsLayout, 3> kLayoutCandidates{
      {{SymmetricLayout::tiles, 128}, {SymmetricLayout::tiles, 256}, {SymmetricLayout::tiles, 512}}};
  std::map<std::tuple<int, long long, long long>, Resolved> layouts;  // autotuned: (batch, rows, cols) -> layout
  // Scratch a layout needs beyond A, AA, B (allocation synchronizes, so reserve() does it up front).
  void ensure_scratch(int batch, long long rows, long long cols, const Resolved& r) {
    const long long m = std::min(rows, cols);
    if (r.kind == SymmetricLayout::tiles) {
      const auto need = static_cast<std::size_t>(6 * batch * tile_count(m, r.b));
      if (tile_ptrs.size() < need) tile_ptrs = DeviceArray<const void*>(need, "ns tile pointers");
    }
  }
  void symmetric_products(const bf16_bits* X, int batch, long long rows, long long cols, const Resolved& r,
                          StreamHandle s);
  void prepare_tiles(const bf16_bits* X, int batch, long long rows, long long cols, long long tile, StreamHandle s);
  void run_layout(bf16_bits* X, int batch, long long rows, long long cols, const Resolved& r, StreamHandle s);
  Resolved tuned_layout(bf16_bits* X, int batch, long long rows, long long cols, StreamHandle s);
  // dst = src mirrored (in place: src == dst) or, with `update`, the B update from A = full (above).
  void fill_symmetric(bool update, const bf16_bits* src, const bf16_bits* full, bf16_bits* dst, long long m,
                      long long b, int batch, float p, float q, StreamHandle s) {
    // The kernel's word accesses need even m, ld and b; every symmetric layout splits m into blocks
    // of a multiple of 8 (block_rows / tiles rules), so this is a programming error, not input.
    if (m % 8 != 0 || b % 8 != 0 || m >= (1LL << 31))
      throw std::logic_error("newton_schulz: symmetric mirror needs m and b multiples of 8, got m=" + std::to_string(m) +
                             " b=" + std::to_string(b));
    const dim3 grid = tile_grid(m, batch), block(kTileWords, kTileRows);
    const int mi = static_cast<int>(m), bi = static_cast<int>(b);
    if (update)
      symmetric_blocks_kernel<true><<<grid, block, 0, detail::stream(s)>>>(src, full, dst, mi, gram_ld(m), gram_sq(m), bi, p, q);
    else
      symmetric_blocks_kernel<false><<<grid, block, 0, detail::stream(s)>>>(src, full, dst, mi, gram_ld(m), gram_sq(m), bi, p, q);
    DIONSIM_LAUNCH_CHECK(update ? "newton_schulz (B)" : "newton_schulz (mirror)");
  }
  static dim3 tile_grid(long long m, int batch) {
    const long long t = (m + kTile - 1) / kTile;
    return {static_cast<unsigned>(t * t), static_cast<unsigned>(batch)};
  }

  // Autotune (first use of a shape): time each heuristic candidate on the real operands (C is
  // rewritten by each; all GEMMs here are out of place) and keep the fastest. Synchronizes the
  // host once per shape, so a step that meets a new shape is not asynchronous.
  void tune(Plan& p, const void* a, const void* b, void* c, StreamHandle s) {
    const float alpha = 1.0F, beta = 0.0F;
    EventTimer timer;
    float best = 0;
    for (std::size_t i = 0; i < p.candidates.size(); ++i) {
      const cublasLtMatmulAlgo_t& algo = p.candidates[i];
      auto once = [&] {
        return cublaslt().matmul(handle, p.desc, &alpha, a, p.a, b, p.b, &beta, c, p.c, c, p.c, &algo, workspace,
                              kWorkspaceBytes, detail::stream(s));
      };
      if (once() != CUBLAS_STATUS_SUCCESS) continue;  // a candidate that cannot run is skipped
      timer.start(s);
      for (int r = 0; r < 3; ++r) DIONSIM_CUBLAS_CHECK(once(), "newton_schulz (GEMM autotune)");
      timer.stop(s);
      const float ms = timer.elapsed_ms();  // waits for the stream
      if (best == 0 || ms < best) {
        best = ms;
        p.algo = algo;
      }
    }
    p.tuned = true;
  }

  // Column-major C[m x n] = op(A) op(B), batched with strides (elements).
  void gemm_cm(bool ta, bool tb, long long m, long long n, long long k, const bf16_bits* a, long long lda, long long sa,
               const bf16_bits* b, long long ldb, long long sb, bf16_bits* c, long long ldc, long long sc, int batch,
               StreamHandle s) {
    Plan& p = plan({ta, tb, m, n, k, lda, ldb, ldc, batch, sa, sb, sc, false, 0});
    run_plan(p, a, b, c, s);
  }
  // The same with pointer-array batching: a, b, c are device arrays of `batch` operand pointers.
  void gemm_cm_pointers(bool ta, bool tb, long long m, long long n, long long k, const void* a, long long lda,
                        const void* b, long long ldb, void* c, long long ldc, int batch, StreamHandle s) {
    Plan& p = plan({ta, tb, m, n, k, lda, ldb, ldc, batch, 0, 0, 0, true, 0});
    run_plan(p, a, b, c, s);
  }
  void run_plan(Plan& p, const void* a, const void* b, void* c, StreamHandle s, float alpha = 1.0F, float beta = 0.0F,
                const void* cin = nullptr) {
    if (!p.tuned) tune(p, a, b, c, s);
    DIONSIM_CUBLAS_CHECK(cublaslt().matmul(handle, p.desc, &alpha, a, p.a, b, p.b, &beta, cin != nullptr ? cin : c, p.c, c,
                                        p.c, &p.algo, workspace, kWorkspaceBytes, detail::stream(s)),
                         "newton_schulz (GEMM)");
  }
  // Gram NS (fp16): column-major D[m x n] = alpha op(A) op(B) + beta C (C laid out as D, out of place).
  void gemm16(bool ta, bool tb, long long m, long long n, long long k, const fp16_bits* a, long long lda, long long sa,
              const fp16_bits* b, long long ldb, long long sb, fp16_bits* d, long long ldd, long long sd, int batch,
              StreamHandle s, float alpha = 1.0F, float beta = 0.0F, const fp16_bits* c = nullptr) {
    Plan& p = plan({ta, tb, m, n, k, lda, ldb, ldd, batch, sa, sb, sd, false, 1});
    run_plan(p, a, b, d, s, alpha, beta, c);
  }
  // Gram NS scratch (fp16): the working X and its next value, and the m x m iterates.
  DeviceArray<fp16_bits> gx, gx2, gR, gZ, gQ, gQ2, gRZ;
  void reserve_gram(int batch, long long rows, long long cols);
  void run_gram(bf16_bits* X, int batch, long long rows, long long cols, StreamHandle s);
};

NewtonSchulz::NewtonSchulz(NsKind kind, float eps) : impl_(new Impl{kind, eps}) {
  DIONSIM_CUBLAS_CHECK(cublaslt().create(&impl_->handle), "newton_schulz (cublasLtCreate)");
  impl_->workspace = device_alloc(kWorkspaceBytes, "newton_schulz workspace");
}

NewtonSchulz::~NewtonSchulz() {
  for (auto& [key, p] : impl_->plans) {
    cublaslt().layout_destroy(p.a);
    cublaslt().layout_destroy(p.b);
    cublaslt().layout_destroy(p.c);
    cublaslt().desc_destroy(p.desc);
  }
  device_free(impl_->workspace);
  if (impl_->handle != nullptr) cublaslt().destroy(impl_->handle);
  delete impl_;
}

void NewtonSchulz::reserve(int batch, std::int64_t rows, std::int64_t cols) {
  Impl& im = *impl_;
  if (im.kind == NsKind::gram) {
    im.reserve_gram(batch, rows, cols);
    return;
  }
  const long long m = std::min(rows, cols);
  const auto sq = static_cast<std::size_t>(batch * Impl::gram_sq(m));
  const auto full = static_cast<std::size_t>(batch) * rows * cols;
  if (im.A.size() < sq) {
    im.A = DeviceArray<bf16_bits>(sq, "ns A");
    im.AA = DeviceArray<bf16_bits>(sq, "ns AA");
    im.Bm = DeviceArray<bf16_bits>(sq, "ns B");
  }
  if (im.BX.size() < full) im.BX = DeviceArray<bf16_bits>(full, "ns BX");
  // Scratch of the configured layout, and of every candidate the autotuning may pick (so that run()
  // does not allocate after tuning).
  im.ensure_scratch(batch, rows, cols, im.resolve(im.configured, rows, cols));
  if (im.autotune)
    for (const NsLayout& c : Impl::kLayoutCandidates) im.ensure_scratch(batch, rows, cols, im.resolve(c, rows, cols));
  if (im.denom.size() < static_cast<std::size_t>(batch)) {
    im.denom = DeviceArray<float>(static_cast<std::size_t>(batch), "ns denom");
    im.partial = DeviceArray<float>(static_cast<std::size_t>(batch) * kFrobBlocks, "ns partial");
  }
}

void NewtonSchulz::set_symmetric_min(std::int64_t m) { impl_->sym_min = m; }
void NewtonSchulz::set_autotune(bool on) { impl_->autotune = on; }
void NewtonSchulz::set_symmetric_blocks(int max_blocks) {
  if (max_blocks < 1) throw std::invalid_argument("NewtonSchulz::set_symmetric_blocks: need max_blocks >= 1");
  impl_->sym_max_blocks = max_blocks;
}
std::int64_t NewtonSchulz::symmetric_blocks(std::int64_t m) const { return impl_->sym_blocks(m); }
void NewtonSchulz::set_symmetric_layout(NsLayout layout) {
  if (layout.kind != SymmetricLayout::block_rows && (layout.rows <= 0 || layout.rows % 8 != 0))
    throw std::invalid_argument("NewtonSchulz::set_symmetric_layout: tiles need rows, a positive multiple of 8");
  impl_->configured = layout;
}

NsLayout NewtonSchulz::layout(int batch, std::int64_t rows, std::int64_t cols) const {
  const auto it = impl_->layouts.find(std::make_tuple(batch, static_cast<long long>(rows), static_cast<long long>(cols)));
  const Impl::Resolved r = it != impl_->layouts.end() ? it->second : impl_->resolve(impl_->configured, rows, cols);
  return {r.kind, r.b};
}

double NewtonSchulz::executed_flops(int batch, std::int64_t rows, std::int64_t cols) const {
  const double m = static_cast<double>(std::min(rows, cols)), n = static_cast<double>(std::max(rows, cols));
  if (impl_->kind == NsKind::gram)  // plain GEMMs: the nominal count (§2.6.4)
    return batch * (m < n ? 8.0 * m * m * n + 28.0 * m * m * m : 30.0 * m * m * m);
  // X Xᵀ and A A as their upper block triangle: (nb+1)/(2nb) of a full product each, nb = m / b.
  const NsLayout l = layout(batch, rows, cols);
  const double b = l.rows > 0 ? static_cast<double>(l.rows) : m;
  const double nb = std::max(1.0, std::round(m / b));
  const double half = (nb + 1.0) / (2.0 * nb);
  return batch * 5.0 * (2.0 * m * m * n * half + 2.0 * m * m * m * half + 2.0 * m * m * n);
}

double NewtonSchulz::flops(int batch, std::int64_t rows, std::int64_t cols) {
  const double m = static_cast<double>(std::min(rows, cols)), n = static_cast<double>(std::max(rows, cols));
  return batch * (20.0 * m * m * n + 10.0 * m * m * m);
}

// The symmetric products of one iteration: A = X Xᵀ (tall: Xᵀ X) and AA = A A, each as its upper
// block triangle (block size r.b) — (nb+1)/(2nb) of a full GEMM's FLOPs, nb = m / b — and A
// mirrored to full (AA's mirror is fused into the B update):
// * block rows: nb strided GEMMs per product, row i covering columns >= i*b;
// * tiles: the (nb+1)nb/2 tiles (i <= j) of every matrix in one pointer-array GEMM per product
//   (operand pointers from prepare_tiles).
// (A third layout, recursive halving — L+1 strided GEMMs of every matrix's off-diagonal pairs per
// level, then the leaf diagonal blocks — was built and measured slower on H200: NS of 4 x 5120 x
// 5120 23.3–23.9 ms against 21.7–21.9 with tiles; not kept.)
void NewtonSchulz::Impl::symmetric_products(const bf16_bits* X, int batch, long long rows, long long cols,
                                            const Resolved& r, StreamHandle s) {
  const bool tall = rows > cols;
  const long long m = tall ? cols : rows, per = rows * cols, ld = gram_ld(m), sq = gram_sq(m), b = r.b;
  bf16_bits* a = A.data();
  bf16_bits* aa = AA.data();
  if (r.kind == SymmetricLayout::tiles) {
    const long long count = batch * tile_count(m, b);
    const void** ptrs = tile_ptrs.data();
    const int n = static_cast<int>(count);
    // Y = Xᵀ in column-major, ld = cols.
    if (!tall) gemm_cm_pointers(true, false, b, b, cols, ptrs, cols, ptrs + count, cols, ptrs + 2 * count, ld, n, s);
    else gemm_cm_pointers(false, true, b, b, rows, ptrs, cols, ptrs + count, cols, ptrs + 2 * count, ld, n, s);
    fill_symmetric(false, a, nullptr, a, m, b, batch, 0, 0, s);
    const void** sp = ptrs + 3 * count;
    gemm_cm_pointers(false, false, b, b, m, sp, ld, sp + count, ld, sp + 2 * count, ld, n, s);
    return;
  }
  const long long nb = m / b;
  for (long long i = 0; i < nb; ++i) {
    const long long o = i * b, w = m - o;
    if (!tall) gemm_cm(true, false, b, w, cols, X + o * cols, cols, per, X + o * cols, cols, per, a + o + o * ld, ld, sq, batch, s);
    else gemm_cm(false, true, b, w, rows, X + o, cols, per, X + o, cols, per, a + o + o * ld, ld, sq, batch, s);
  }
  if (nb > 1) fill_symmetric(false, a, nullptr, a, m, b, batch, 0, 0, s);
  for (long long i = 0; i < nb; ++i) {
    const long long o = i * b, w = m - o;
    gemm_cm(false, false, b, w, m, a + o, ld, sq, a + o * ld, ld, sq, aa + o + o * ld, ld, sq, batch, s);
  }
}

// Operand pointers of the tiled products for this X (fixed for all iterations: X is updated in place).
void NewtonSchulz::Impl::prepare_tiles(const bf16_bits* X, int batch, long long rows, long long cols, long long tile,
                                       StreamHandle s) {
  const bool tall = rows > cols;
  const long long m = tall ? cols : rows, per = rows * cols, ld = gram_ld(m), sq = gram_sq(m);
  const long long count = batch * tile_count(m, tile);
  const TileProduct gram{X, X, A.data(), per, per, sq, tall ? 1 : cols, tall ? 1 : cols, ld};
  const TileProduct square{A.data(), A.data(), AA.data(), sq, sq, sq, 1, ld, ld};
  tile_pointers_kernel<<<detail::blocks_for(count, 128), 128, 0, detail::stream(s)>>>(gram, square, m / tile, tile,
                                                                                     count, tile_ptrs.data());
  DIONSIM_LAUNCH_CHECK("newton_schulz (tile pointers)");
}

void NewtonSchulz::Impl::run_layout(bf16_bits* X, int batch, long long rows, long long cols, const Resolved& r,
                                    StreamHandle s) {
  const auto st = detail::stream(s);
  const long long per = rows * cols;
  const bool tall = rows > cols;
  const long long m = tall ? cols : rows;  // Gram size
  const bool pe = kind == NsKind::polar_express;

  frob_partial_kernel<<<dim3(kFrobBlocks, static_cast<unsigned>(batch)), 256, 0, st>>>(X, per, partial.data());
  DIONSIM_LAUNCH_CHECK("newton_schulz (norm)");
  frob_finalize_kernel<<<detail::blocks_for(batch, 128), 128, 0, st>>>(partial.data(), batch, pe ? 1.02F : 1.0F, eps,
                                                                       denom.data());
  DIONSIM_LAUNCH_CHECK("newton_schulz (norm finalize)");
  divide_kernel<<<dim3(std::min(elementwise_blocks(per), 1024u), static_cast<unsigned>(batch)), 256, 0, st>>>(
      X, per, denom.data());
  DIONSIM_LAUNCH_CHECK("newton_schulz (normalize)");

  const auto& coeffs = pe ? ns_coefficients::kPolarExpress : ns_coefficients::kQuintic;
  const long long ld = gram_ld(m), sq = gram_sq(m);
  if (r.kind == SymmetricLayout::tiles) prepare_tiles(X, batch, rows, cols, r.b, s);
  for (const auto& abc : coeffs) {
    symmetric_products(X, batch, rows, cols, r, s);
    const auto pb = static_cast<float>(abc.b), qc = static_cast<float>(abc.c);
    if (r.b < m) {  // B from the full A and AA's upper blocks (AA's mirror fused in)
      fill_symmetric(true, AA.data(), A.data(), Bm.data(), m, r.b, batch, pb, qc, s);
    } else {  // one plain GEMM: both are full, and stored alike
      axpby_kernel<<<elementwise_blocks(batch * sq), 256, 0, st>>>(A.data(), AA.data(), batch * sq, pb, qc, Bm.data());
      DIONSIM_LAUNCH_CHECK("newton_schulz (B)");
    }
    if (!tall) gemm_cm(false, false, cols, rows, rows, X, cols, per, Bm.data(), ld, sq, BX.data(), cols, per, batch, s);
    else gemm_cm(false, false, cols, rows, cols, Bm.data(), ld, sq, X, cols, per, BX.data(), cols, per, batch, s);
    axpby_kernel<<<elementwise_blocks(batch * per), 256, 0, st>>>(X, BX.data(), batch * per, static_cast<float>(abc.a),
                                                                  1.0F, X);
    DIONSIM_LAUNCH_CHECK("newton_schulz (X)");
  }
}

void NewtonSchulz::Impl::reserve_gram(int batch, long long rows, long long cols) {
  const long long m = std::min(rows, cols);
  const auto full = static_cast<std::size_t>(batch) * static_cast<std::size_t>(rows * cols);
  const auto sq = static_cast<std::size_t>(batch * gram_sq(m));
  if (gx.size() < full) {
    gx = DeviceArray<fp16_bits>(full, "gram ns X");
    gx2 = DeviceArray<fp16_bits>(full, "gram ns X next");
  }
  if (gR.size() < sq) {
    gR = DeviceArray<fp16_bits>(sq, "gram ns R");
    gZ = DeviceArray<fp16_bits>(sq, "gram ns Z");
    gQ = DeviceArray<fp16_bits>(sq, "gram ns Q");
    gQ2 = DeviceArray<fp16_bits>(sq, "gram ns Q next");
    gRZ = DeviceArray<fp16_bits>(sq, "gram ns RZ");
  }
  if (denom.size() < static_cast<std::size_t>(batch)) {
    denom = DeviceArray<float>(static_cast<std::size_t>(batch), "ns denom");
    partial = DeviceArray<float>(static_cast<std::size_t>(batch) * kFrobBlocks, "ns partial");
  }
}

// Gram Newton-Schulz as optimizer/newton_schulz.cpp's orthogonalize_gram, on plain fp16 cuBLASLt
// GEMMs (fp32 accumulate; alpha/beta epilogue, one rounding). The working copy keeps the input's
// storage: a wide X [m][n] row-major is Wᵀ in column-major (ld n); a tall X [n][m] row-major is the
// wide W itself in column-major (ld m), so no transposes are needed. m x m iterates are
// column-major with ld = gram_ld(m).
void NewtonSchulz::Impl::run_gram(bf16_bits* X, int batch, long long rows, long long cols, StreamHandle s) {
  const auto st = detail::stream(s);
  const bool tall = rows > cols;
  const long long m = tall ? cols : rows, n = tall ? rows : cols, per = rows * cols;
  const long long ld = gram_ld(m), sq = gram_sq(m);
  const auto& k = ns_coefficients::kGram;
  frob_partial_kernel<<<dim3(kFrobBlocks, static_cast<unsigned>(batch)), 256, 0, st>>>(X, per, partial.data());
  DIONSIM_LAUNCH_CHECK("gram newton_schulz (norm)");
  gram_denominator_kernel<<<detail::blocks_for(batch, 128), 128, 0, st>>>(partial.data(), batch,
                                                                          ns_coefficients::kGramEpsilon, denom.data());
  DIONSIM_LAUNCH_CHECK("gram newton_schulz (norm finalize)");
  gram_normalize_kernel<<<dim3(std::min(elementwise_blocks(per), 1024u), static_cast<unsigned>(batch)), 256, 0, st>>>(
      X, per, denom.data(), gx.data());
  DIONSIM_LAUNCH_CHECK("gram newton_schulz (normalize)");
  fp16_bits* x = gx.data();
  fp16_bits* x2 = gx2.data();
  // R = W Wᵀ ; Y = P W (P m x m) into `out`.
  auto gram = [&](const fp16_bits* w, fp16_bits* r) {
    if (!tall) gemm16(true, false, m, m, n, w, n, per, w, n, per, r, ld, sq, batch, s);
    else gemm16(false, true, m, m, n, w, m, per, w, m, per, r, ld, sq, batch, s);
  };
  auto left = [&](const fp16_bits* p, const fp16_bits* w, fp16_bits* out, float beta, const fp16_bits* c) {
    if (!tall) gemm16(false, true, n, m, m, w, n, per, p, ld, sq, out, n, per, batch, s, 1.0F, beta, c);
    else gemm16(false, false, m, n, m, p, ld, sq, w, m, per, out, m, per, batch, s, 1.0F, beta, c);
  };
  // D = alpha P Q + beta C on the m x m iterates.
  auto sqm = [&](const fp16_bits* p, const fp16_bits* q, fp16_bits* d, float alpha, float beta, const fp16_bits* c) {
    gemm16(false, false, m, m, m, p, ld, sq, q, ld, sq, d, ld, sq, batch, s, alpha, beta, c);
  };
  fp16_bits *R = gR.data(), *Z = gZ.data(), *Q = gQ.data(), *Q2 = gQ2.data(), *RZ = gRZ.data();
  if (m == n) {  // square: the standard iteration (R holds A, Z holds B)
    for (const auto& c : k) {
      gram(x, R);
      sqm(R, R, Z, static_cast<float>(c.c), static_cast<float>(c.b), R);
      left(Z, x, x2, static_cast<float>(c.a), x);
      std::swap(x, x2);
    }
  } else {
    gram(x, R);
    const int iters = static_cast<int>(k.size());
    for (int i = 0; i < iters; ++i) {
      const auto& c = k[static_cast<std::size_t>(i)];
      const float a = static_cast<float>(c.a);
      const bool reset = i == ns_coefficients::kGramReset;
      if (reset) {
        left(Q, x, x2, 0.0F, nullptr);
        std::swap(x, x2);
        gram(x, R);
      }
      sqm(R, R, Z, static_cast<float>(c.c), static_cast<float>(c.b), R);
      if (i == 0 || reset) {
        gram_add_identity_kernel<<<dim3(std::min(elementwise_blocks(sq), 1024u), static_cast<unsigned>(batch)), 256, 0,
                                   st>>>(Z, m, ld, sq, a, Q);
        DIONSIM_LAUNCH_CHECK("gram newton_schulz (Q = Z + aI)");
      } else {
        sqm(Q, Z, Q2, 1.0F, a, Q);
        std::swap(Q, Q2);
      }
      if (i < iters - 1 && i + 1 != ns_coefficients::kGramReset) {
        sqm(R, Z, RZ, 1.0F, a, R);
        sqm(Z, RZ, R, 1.0F, a, RZ);
      }
    }
    left(Q, x, x2, 0.0F, nullptr);
    std::swap(x, x2);
  }
  gram_to_bf16_kernel<<<elementwise_blocks(batch * per), 256, 0, st>>>(x, batch * per, X);
  DIONSIM_LAUNCH_CHECK("gram newton_schulz (to bf16)");
}

// Layout autotuning (first run of a shape with autotune on): block rows, the configured layout and
// every candidate layout that applies run the whole NS on a copy of this X four times (the first also tunes their GEMMs;
// the best of the other three counts: a single timing once picked 128-row tiles over 256 for
// [4 x 5120 x 5120] at 21.8 vs 21.0 ms), X is restored, and the fastest is kept for the shape.
// Synchronizes the host (once per shape).
NewtonSchulz::Impl::Resolved NewtonSchulz::Impl::tuned_layout(bf16_bits* X, int batch, long long rows, long long cols,
                                                              StreamHandle s) {
  const auto key = std::make_tuple(batch, rows, cols);
  if (const auto it = layouts.find(key); it != layouts.end()) return it->second;
  const auto bytes = static_cast<std::size_t>(batch * rows * cols) * sizeof(bf16_bits);
  DeviceArray<bf16_bits> saved(static_cast<std::size_t>(batch * rows * cols), "ns layout autotune copy");
  copy_device(saved.data(), X, bytes, s);
  std::vector<Resolved> candidates{resolve({SymmetricLayout::block_rows, 0}, rows, cols)};
  for (const NsLayout& c : kLayoutCandidates)
    if (const Resolved r = resolve(c, rows, cols); r.kind == c.kind) candidates.push_back(r);
  if (const Resolved r = resolve(configured, rows, cols);
      r.kind == SymmetricLayout::tiles && std::none_of(candidates.begin(), candidates.end(), [&](const Resolved& c) {
        return c.kind == r.kind && c.b == r.b;
      }))
    candidates.push_back(r);
  EventTimer timer;
  Resolved best = candidates.front();
  float best_ms = 0;
  for (const Resolved& r : candidates) {
    ensure_scratch(batch, rows, cols, r);
    float ms = 0;
    for (int rep = 0; rep < 4; ++rep) {
      copy_device(X, saved.data(), bytes, s);
      if (rep > 0) timer.start(s);
      run_layout(X, batch, rows, cols, r, s);
      if (rep == 0) continue;
      timer.stop(s);
      const float once = timer.elapsed_ms();
      ms = rep == 1 ? once : std::min(ms, once);
    }
    if (best_ms == 0 || ms < best_ms) {
      best_ms = ms;
      best = r;
    }
  }
  copy_device(X, saved.data(), bytes, s);
  synchronize(s);  // `saved` is freed on return
  layouts.emplace(key, best);
  return best;
}

void NewtonSchulz::run(bf16_bits* X, int batch, std::int64_t rows, std::int64_t cols, StreamHandle s) {
  if (batch < 0 || batch >= 65536 || rows <= 0 || cols <= 0)
    throw std::invalid_argument("NewtonSchulz::run: need 0 <= batch < 65536, rows > 0, cols > 0");
  if (batch == 0) return;
  reserve(batch, rows, cols);  // no-op once reserved (allocation would synchronize)
  Impl& im = *impl_;
  if (im.kind == NsKind::gram) {
    im.run_gram(X, batch, rows, cols, s);
    return;
  }
  const Impl::Resolved r = im.autotune ? im.tuned_layout(X, batch, rows, cols, s) : im.resolve(im.configured, rows, cols);
  im.run_layout(X, batch, rows, cols, r, s);
}

std::pair<std::vector<bf16_bits>, std::vector<bf16_bits>> NewtonSchulz::symmetric_products(const bf16_bits* X, int batch,
                                                                                         std::int64_t rows,
                                                                                         std::int64_t cols,
                                                                                         StreamHandle s) {
  reserve(batch, rows, cols);
  Impl& im = *impl_;
  const long long m = std::min(rows, cols), ld = Impl::gram_ld(m), sq = Impl::gram_sq(m);
  const Impl::Resolved r = im.resolve(im.configured, rows, cols);
  if (r.kind == SymmetricLayout::tiles) im.prepare_tiles(X, batch, rows, cols, r.b, s);
  im.symmetric_products(X, batch, rows, cols, r, s);
  if (r.b < m) im.fill_symmetric(false, im.AA.data(), nullptr, im.Bm.data(), m, r.b, batch, 0, 0, s);
  synchronize(s);
  auto dense = [&](const bf16_bits* g_data) {  // column-major (ld, batch stride sq) -> row-major
    std::vector<bf16_bits> all(static_cast<std::size_t>(batch * sq)), out(static_cast<std::size_t>(batch * m * m));
    copy_to_host(all.data(), g_data, all.size() * sizeof(bf16_bits));
    for (long long p = 0; p < batch; ++p)
      for (long long c = 0; c < m; ++c)
        for (long long i = 0; i < m; ++i)
          out[static_cast<std::size_t>((p * m + c) * m + i)] = all[static_cast<std::size_t>(p * sq + i + c * ld)];
    return out;
  };
  return {dense(im.A.data()), dense(r.b < m ? im.Bm.data() : im.AA.data())};
}

void NewtonSchulz::gemm(const bf16_bits* A, const bf16_bits* B, bf16_bits* C, int batch, std::int64_t m,
                        std::int64_t n, std::int64_t k, StreamHandle s) {
  // Row-major C = A B  <=>  column-major Cᵀ = Bᵀ Aᵀ.
  impl_->gemm_cm(false, false, n, m, k, B, n, k * n, A, k, m * k, C, n, m * n, batch, s);
}

}  // namespace dionsim::kernels
