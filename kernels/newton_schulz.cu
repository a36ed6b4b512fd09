// Polar Express / quintic Newton-Schulz (§2.6.1, §2.6.2) on cuBLASLt bf16 GEMMs (fp32 accumulate,
// bf16 output) batched over a megabatch, with the reference's eager rounding sequence:
//   n = bf16(|X|_F); d = bf16(bf16(n*1.02) + eps); X = bf16(X/d)
//   A = bf16(X Xᵀ); B = bf16(bf16(b*A) + bf16(c*bf16(A A))); X = bf16(bf16(a*X) + bf16(B X))
// (tall inputs: A = XᵀX and X B). Row-major matrices are handed to column-major cuBLASLt as their
// transposes (Y = Xᵀ, ld = cols), so no copies are made.
#include <cublasLt.h>

#include <array>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/check.cuh"
#include "kernels/common.cuh"
#include "kernels/ops.hpp"

#define DIONSIM_CUBLAS_CHECK(call, op)                                                                    \
  do {                                                                                                    \
    const cublasStatus_t st_ = (call);                                                                    \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                                     \
      ::dionsim::kernels::detail::throw_device_error(#call, std::string("cublasStatus ") + std::to_string(static_cast<int>(st_)), (op), __FILE__, __LINE__); \
  } while (0)

namespace dionsim::kernels {
namespace {

constexpr std::array<std::array<double, 3>, 5> kPolarExpress{{
    {8.156554524902461, -22.48329292557795, 15.878769915207462},
    {4.042929935166739, -2.808917465908714, 0.5000178451051316},
    {3.8916678022926607, -2.772484153217685, 0.5060648178503393},
    {3.285753657755655, -2.3681294933425376, 0.46449024233003106},
    {2.3465413258596377, -1.7097828382687081, 0.42323551169305323},
}};
constexpr std::array<std::array<double, 3>, 5> kQuintic{{
    {4.0848, -6.8946, 2.9270},
    {3.9505, -6.3029, 2.6377},
    {3.7418, -5.5913, 2.3037},
    {2.8769, -3.1427, 1.2046},
    {2.8366, -3.0525, 1.2012},
}};
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

// Symmetric Gram products computed by block rows of width b (upper block triangle only): element
// (r, c) of a column-major [m x m] matrix (leading dimension ld, `sq` elements per batch) is
// "lower" when r/b > c/b and then equals element (c, r). One 32 x 32 tile per thread block, the
// transposed tile staged in shared memory so that reads and writes are both coalesced.
// kAxpby = false: mirror A's lower blocks in place (A is then the full product).
// kAxpby = true: out = bf16(bf16(p*A) + bf16(q*AA)) with AA's lower blocks read from its upper
// ones — the §2.6.1 `B` update fused with AA's mirror (AA itself is left half-filled).
constexpr int kTile = 32;
template <bool kAxpby>
__global__ void symmetric_tiles_kernel(std::uint16_t* A, const std::uint16_t* AA, long long m, long long ld,
                                       long long sq, long long b, float p, float q, std::uint16_t* out) {
  __shared__ std::uint16_t tile[kTile][kTile + 1];
  const long long tiles = (m + kTile - 1) / kTile;
  const long long ti = blockIdx.x % tiles, tj = blockIdx.x / tiles;  // row tile, column tile
  const long long r0 = ti * kTile, c0 = tj * kTile;
  const long long batch = blockIdx.y;
  const long long r_last = (r0 + kTile < m ? r0 + kTile : m) - 1;
  const bool has_lower = r_last / b > c0 / b;
  if (!kAxpby && !has_lower) return;
  const std::uint16_t* src = kAxpby ? AA + batch * sq : A + batch * sq;
  if (has_lower) {  // stage the transposed tile: tile[cc][rr] = src(c0 + cc, r0 + rr)
    for (int k = threadIdx.y; k < kTile; k += blockDim.y) {
      const long long row = c0 + threadIdx.x, col = r0 + k;
      if (row < m && col < m) tile[threadIdx.x][k] = src[row + col * ld];
    }
    __syncthreads();
  }
  const long long r = r0 + threadIdx.x;
  if (r >= m) return;
  for (int k = threadIdx.y; k < kTile; k += blockDim.y) {
    const long long c = c0 + k;
    if (c >= m) break;
    const bool lower = r / b > c / b;
    const long long at = batch * sq + r + c * ld;
    if constexpr (!kAxpby) {
      if (lower) A[at] = tile[k][threadIdx.x];
    } else {
      const float aa = detail::bf16_to_float(lower ? tile[k][threadIdx.x] : AA[at]);
      const float pa = detail::round_to_bf16(p * detail::bf16_to_float(A[at]));
      out[at] = detail::float_to_bf16(pa + detail::round_to_bf16(q * aa));
    }
  }
}

unsigned elementwise_blocks(long long n) { return std::min<unsigned>(detail::blocks_for(n, 256), 8192u); }

}  // namespace

struct NewtonSchulz::Impl {
  NsKind kind;
  float eps;
  // Gram size from which the symmetric block-row products are used, and how many block rows.
  // Measured on H200 (results/): [4 x 5120 x 5120] 25.0 -> 23.1 ms with 4 block rows; [16 x 1280 x
  // 5120] 5.1 -> 5.9 ms with 2 (640-row GEMMs lose more efficiency than the 25 % of FLOPs saved),
  // so only large Grams use it.
  long long sym_min = 2048;
  int sym_max_blocks = 8;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  DeviceArray<bf16_bits> A, AA, Bm, BX;
  DeviceArray<float> partial, denom;
  // (transa, transb, m, n, k, lda, ldb, ldc, batch, strideA, strideB, strideC) -> cached descriptors
  using Key = std::tuple<int, int, long long, long long, long long, long long, long long, long long, int, long long,
                         long long, long long>;
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
    Plan p;
    const char* op = "newton_schulz (cuBLASLt plan)";
    DIONSIM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), op);
    const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    DIONSIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)), op);
    DIONSIM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)), op);
    auto layout = [&](cublasLtMatrixLayout_t* l, long long rows, long long cols, long long ld, long long stride) {
      DIONSIM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(l, CUDA_R_16BF, static_cast<std::uint64_t>(rows),
                                                      static_cast<std::uint64_t>(cols), ld), op);
      const int bc = batch;
      DIONSIM_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof(bc)), op);
      const std::int64_t st = stride;
      DIONSIM_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof(st)), op);
    };
    layout(&p.a, ta ? k : m, ta ? m : k, lda, sa);
    layout(&p.b, tb ? n : k, tb ? k : n, ldb, sb);
    layout(&p.c, m, n, ldc, sc);
    cublasLtMatmulPreference_t pref = nullptr;
    DIONSIM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref), op);
    const std::size_t ws = kWorkspaceBytes;
    DIONSIM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)), op);
    // Split-K partial sums must be reduced in fp32: the in-place / output-type schemes add the
    // partials in the bf16 output, which put single small GEMMs (12 x 12 x 96, batch 1) 7 % off the
    // reference after Polar Express (measured on H200, cuBLAS 13; batch 2 of the same shape was exact).
    const std::uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    DIONSIM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof(schemes)), op);
    std::array<cublasLtMatmulHeuristicResult_t, kCandidates> results{};
    int returned = 0;
    DIONSIM_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.a, p.b, p.c, p.c, pref,
                                                        autotune ? kCandidates : 1, results.data(), &returned),
                         op);
    cublasLtMatmulPreferenceDestroy(pref);
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
  static dim3 tile_grid(long long m, int batch) {
    const long long t = (m + kTile - 1) / kTile;
    return {static_cast<unsigned>(t * t), static_cast<unsigned>(batch)};
  }
  void mirror(bf16_bits* A, long long m, long long ld, long long sq, long long b, int batch, StreamHandle s) {
    symmetric_tiles_kernel<false>
        <<<tile_grid(m, batch), dim3(kTile, 8), 0, detail::stream(s)>>>(A, nullptr, m, ld, sq, b, 0.0F, 0.0F, nullptr);
    DIONSIM_LAUNCH_CHECK("newton_schulz (mirror)");
  }

  // Autotune (first use of a shape): time each heuristic candidate on the real operands (C is
  // rewritten by each; all GEMMs here are out of place) and keep the fastest. Synchronizes the
  // host once per shape, so a step that meets a new shape is not asynchronous.
  void tune(Plan& p, const bf16_bits* a, const bf16_bits* b, bf16_bits* c, StreamHandle s) {
    const float alpha = 1.0F, beta = 0.0F;
    EventTimer timer;
    float best = 0;
    for (std::size_t i = 0; i < p.candidates.size(); ++i) {
      const cublasLtMatmulAlgo_t& algo = p.candidates[i];
      auto once = [&] {
        return cublasLtMatmul(handle, p.desc, &alpha, a, p.a, b, p.b, &beta, c, p.c, c, p.c, &algo, workspace,
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
    Plan& p = plan({ta, tb, m, n, k, lda, ldb, ldc, batch, sa, sb, sc});
    const float alpha = 1.0F, beta = 0.0F;
    if (!p.tuned) tune(p, a, b, c, s);
    DIONSIM_CUBLAS_CHECK(cublasLtMatmul(handle, p.desc, &alpha, a, p.a, b, p.b, &beta, c, p.c, c, p.c, &p.algo,
                                        workspace, kWorkspaceBytes, detail::stream(s)),
                         "newton_schulz (GEMM)");
  }
};

NewtonSchulz::NewtonSchulz(NsKind kind, float eps) : impl_(new Impl{kind, eps}) {
  DIONSIM_CUBLAS_CHECK(cublasLtCreate(&impl_->handle), "newton_schulz (cublasLtCreate)");
  impl_->workspace = device_alloc(kWorkspaceBytes, "newton_schulz workspace");
}

NewtonSchulz::~NewtonSchulz() {
  for (auto& [key, p] : impl_->plans) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.desc);
  }
  device_free(impl_->workspace);
  if (impl_->handle != nullptr) cublasLtDestroy(impl_->handle);
  delete impl_;
}

void NewtonSchulz::reserve(int batch, std::int64_t rows, std::int64_t cols) {
  const long long m = std::min(rows, cols);
  const long long ld = (m + 7) / 8 * 8;  // Gram matrices: 16-byte aligned columns (see run())
  const auto sq = static_cast<std::size_t>(batch) * m * ld;
  const auto full = static_cast<std::size_t>(batch) * rows * cols;
  if (impl_->A.size() < sq) {
    impl_->A = DeviceArray<bf16_bits>(sq, "ns A");
    impl_->AA = DeviceArray<bf16_bits>(sq, "ns AA");
    impl_->Bm = DeviceArray<bf16_bits>(sq, "ns B");
  }
  if (impl_->BX.size() < full) impl_->BX = DeviceArray<bf16_bits>(full, "ns BX");
  if (impl_->denom.size() < static_cast<std::size_t>(batch)) {
    impl_->denom = DeviceArray<float>(static_cast<std::size_t>(batch), "ns denom");
    impl_->partial = DeviceArray<float>(static_cast<std::size_t>(batch) * kFrobBlocks, "ns partial");
  }
}

void NewtonSchulz::set_symmetric_min(std::int64_t m) { impl_->sym_min = m; }
void NewtonSchulz::set_autotune(bool on) { impl_->autotune = on; }
void NewtonSchulz::set_symmetric_blocks(int max_blocks) {
  if (max_blocks < 1) throw std::invalid_argument("NewtonSchulz::set_symmetric_blocks: need max_blocks >= 1");
  impl_->sym_max_blocks = max_blocks;
}
std::int64_t NewtonSchulz::symmetric_blocks(std::int64_t m) const { return impl_->sym_blocks(m); }

double NewtonSchulz::flops(int batch, std::int64_t rows, std::int64_t cols) {
  const double m = static_cast<double>(std::min(rows, cols)), n = static_cast<double>(std::max(rows, cols));
  return batch * (20.0 * m * m * n + 10.0 * m * m * m);
}

void NewtonSchulz::run(bf16_bits* X, int batch, std::int64_t rows, std::int64_t cols, StreamHandle s) {
  if (batch < 0 || batch >= 65536 || rows <= 0 || cols <= 0)
    throw std::invalid_argument("NewtonSchulz::run: need 0 <= batch < 65536, rows > 0, cols > 0");
  if (batch == 0) return;
  reserve(batch, rows, cols);  // no-op once reserved (allocation would synchronize)
  Impl& im = *impl_;
  const auto st = detail::stream(s);
  const long long per = rows * cols;
  const bool tall = rows > cols;
  const long long m = tall ? cols : rows;  // Gram size
  const bool pe = im.kind == NsKind::polar_express;

  frob_partial_kernel<<<dim3(kFrobBlocks, static_cast<unsigned>(batch)), 256, 0, st>>>(X, per, im.partial.data());
  DIONSIM_LAUNCH_CHECK("newton_schulz (norm)");
  frob_finalize_kernel<<<detail::blocks_for(batch, 128), 128, 0, st>>>(im.partial.data(), batch, pe ? 1.02F : 1.0F,
                                                                       im.eps, im.denom.data());
  DIONSIM_LAUNCH_CHECK("newton_schulz (norm finalize)");
  divide_kernel<<<dim3(std::min(elementwise_blocks(per), 1024u), static_cast<unsigned>(batch)), 256, 0, st>>>(
      X, per, im.denom.data());
  DIONSIM_LAUNCH_CHECK("newton_schulz (normalize)");

  const auto& coeffs = pe ? kPolarExpress : kQuintic;
  // The m x m Gram matrices are stored with a leading dimension rounded up to 8 elements so that
  // every column starts 16-byte aligned (the block-row products offset into them by rows).
  const long long ld = (m + 7) / 8 * 8;
  const long long sq = m * ld;
  for (const auto& abc : coeffs) {
    // Y = Xᵀ in column-major, ld = cols.
    // A = X Xᵀ (tall: Xᵀ X) and AA = A A are symmetric: compute block rows i of the upper block
    // triangle (columns >= i*b) and mirror the rest — (nb+1)/(2nb) of the FLOPs of a full GEMM.
    const long long nb = im.sym_blocks(m), b = m / nb;
    bf16_bits* A = im.A.data();
    bf16_bits* AA = im.AA.data();
    for (long long i = 0; i < nb; ++i) {
      const long long o = i * b, w = m - o;
      if (!tall) im.gemm_cm(true, false, b, w, cols, X + o * cols, cols, per, X + o * cols, cols, per, A + o + o * ld, ld, sq, batch, s);
      else im.gemm_cm(false, true, b, w, rows, X + o, cols, per, X + o, cols, per, A + o + o * ld, ld, sq, batch, s);
    }
    if (nb > 1) im.mirror(A, m, ld, sq, b, batch, s);
    for (long long i = 0; i < nb; ++i) {
      const long long o = i * b, w = m - o;
      im.gemm_cm(false, false, b, w, m, A + o, ld, sq, A + o * ld, ld, sq, AA + o + o * ld, ld, sq, batch, s);
    }
    const auto pb = static_cast<float>(abc[1]), qc = static_cast<float>(abc[2]);
    if (nb > 1) {  // B from the full A and AA's upper blocks (AA's mirror fused in)
      symmetric_tiles_kernel<true><<<Impl::tile_grid(m, batch), dim3(kTile, 8), 0, st>>>(im.A.data(), im.AA.data(), m,
                                                                                       ld, sq, b, pb, qc, im.Bm.data());
    } else {
      axpby_kernel<<<elementwise_blocks(batch * sq), 256, 0, st>>>(im.A.data(), im.AA.data(), batch * sq, pb, qc,
                                                                   im.Bm.data());
    }
    DIONSIM_LAUNCH_CHECK("newton_schulz (B)");
    if (!tall) im.gemm_cm(false, false, cols, rows, rows, X, cols, per, im.Bm.data(), ld, sq, im.BX.data(), cols, per, batch, s);
    else im.gemm_cm(false, false, cols, rows, cols, im.Bm.data(), ld, sq, X, cols, per, im.BX.data(), cols, per, batch, s);
    axpby_kernel<<<elementwise_blocks(batch * per), 256, 0, st>>>(X, im.BX.data(), batch * per,
                                                                  static_cast<float>(abc[0]), 1.0F, X);
    DIONSIM_LAUNCH_CHECK("newton_schulz (X)");
  }
}

void NewtonSchulz::gemm(const bf16_bits* A, const bf16_bits* B, bf16_bits* C, int batch, std::int64_t m,
                        std::int64_t n, std::int64_t k, StreamHandle s) {
  // Row-major C = A B  <=>  column-major Cᵀ = Bᵀ Aᵀ.
  impl_->gemm_cm(false, false, n, m, k, B, n, k * n, A, k, m * k, C, n, m * n, batch, s);
}

}  // namespace dionsim::kernels
