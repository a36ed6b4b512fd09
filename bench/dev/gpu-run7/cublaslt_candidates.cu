// Micro-benchmark: cuBLASLt plain X X^T and pointer-array upper-triangle tiles, every heuristic candidate.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#define CK(x) do { auto e = (x); if (e != cudaSuccess) { printf("CUDA %s line %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)
#define CB(x) do { auto e = (x); if (e != CUBLAS_STATUS_SUCCESS) { printf("cuBLAS %d line %d\n", (int)e, __LINE__); exit(1);} } while (0)
__global__ void fill(__nv_bfloat16* p, long long n, unsigned seed) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) { unsigned h = (unsigned)(i * 2654435761u) ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    p[i] = __float2bfloat16(((h & 0xffff) / 65535.0f - 0.5f) * 0.05f); }
}
cudaEvent_t e0, e1;
template <class F> float timeit(F&& f, int reps = 15) {
  for (int i = 0; i < 3; ++i) f();
  CK(cudaDeviceSynchronize());
  std::vector<float> ts;
  for (int r = 0; r < reps; ++r) { cudaEventRecord(e0); f(); cudaEventRecord(e1); cudaEventSynchronize(e1);
    float t; cudaEventElapsedTime(&t, e0, e1); ts.push_back(t); }
  std::sort(ts.begin(), ts.end()); return ts[ts.size() / 2];
}
int main() {
  cudaEventCreate(&e0); cudaEventCreate(&e1);
  cublasLtHandle_t lt; CB(cublasLtCreate(&lt));
  cublasHandle_t h; CB(cublasCreate(&h));
  void* ws; const size_t wsz = 64u << 20; CK(cudaMalloc(&ws, wsz)); CB(cublasSetWorkspace(h, ws, wsz));
  const long long m = 5120, n = 5120; const int batch = 4;
  __nv_bfloat16 *X, *C; CK(cudaMalloc(&X, 2LL * batch * m * n)); CK(cudaMalloc(&C, 2LL * batch * m * m));
  fill<<<(batch * m * n + 255) / 256, 256>>>(X, batch * m * n, 7);
  const double nominal = 2.0 * m * m * n * batch;
  float one = 1.f, zero = 0.f;
  float tp = timeit([&] { CB(cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, m, n, &one, X, CUDA_R_16BF, n, m * n,
      X, CUDA_R_16BF, n, m * n, &zero, C, CUDA_R_16BF, m, m * m, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)); });
  printf("cublas strided plain: %.3f ms %.1f TF/s\n", tp, nominal / tp / 1e9);
  // Lt: general runner. pointers: batch entries (tile GEMMs) of size tm x tn x n.
  auto run_lt = [&](const char* name, long long tm, long long tn, int count, bool pointers, long long sa, long long sc,
                    const void* A, const void* B, void* Cc, size_t wsbytes, bool restrict_red, double exec_flops) {
    cublasLtMatmulDesc_t d; CB(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t T = CUBLAS_OP_T, N = CUBLAS_OP_N;
    CB(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &T, sizeof(T)));
    CB(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &N, sizeof(N)));
    auto lay = [&](cublasLtMatrixLayout_t* l, long long r, long long c, long long ld, long long st) {
      CB(cublasLtMatrixLayoutCreate(l, CUDA_R_16BF, r, c, ld));
      CB(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      if (pointers) { uint32_t mode = CUBLASLT_BATCH_MODE_POINTER_ARRAY;
        CB(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &mode, sizeof(mode))); }
      else { int64_t s = st; CB(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s, sizeof(s))); }
    };
    cublasLtMatrixLayout_t la, lb, lc;
    lay(&la, n, tm, n, sa); lay(&lb, n, tn, n, sa); lay(&lc, tm, tn, m, sc);
    cublasLtMatmulPreference_t pref; CB(cublasLtMatmulPreferenceCreate(&pref));
    CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsbytes, sizeof(wsbytes)));
    if (restrict_red) { uint32_t s = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &s, sizeof(s))); }
    cublasLtMatmulHeuristicResult_t res[16]; int got = 0;
    CB(cublasLtMatmulAlgoGetHeuristic(lt, d, la, lb, lc, lc, pref, 16, res, &got));
    float best = 1e9; int bi = -1;
    for (int i = 0; i < got; ++i) {
      if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
      float t = timeit([&] { CB(cublasLtMatmul(lt, d, &one, A, la, B, lb, &zero, Cc, lc, Cc, lc, &res[i].algo, ws, wsbytes, 0)); });
      if (i == 0) printf("  %-28s ws %2zu MiB red %s: top-1 %.3f ms (%.1f TF/s nominal-equiv, %.1f executed)\n", name, wsbytes >> 20,
                         restrict_red ? "fp32" : "any ", t, nominal / t / 1e9, exec_flops / t / 1e9);
      if (t < best) { best = t; bi = i; }
    }
    printf("  %-28s                best of %d: #%d %.3f ms (%.1f TF/s nominal-equiv, %.1f executed)\n", name, got, bi, best,
           nominal / best / 1e9, exec_flops / best / 1e9);
  };
  for (size_t w : {size_t(32) << 20, size_t(64) << 20})
    for (bool r : {true, false}) run_lt("plain strided", m, m, batch, false, m * n, m * m, X, X, C, w, r, nominal);
  for (long long tile : {256LL, 512LL, 640LL, 1024LL, 1280LL}) {
    long long nb = m / tile, tiles = nb * (nb + 1) / 2;
    std::vector<const void*> a, b; std::vector<void*> c;
    for (int p = 0; p < batch; ++p) for (long long i = 0; i < nb; ++i) for (long long j = i; j < nb; ++j) {
      a.push_back(X + p * m * n + i * tile * n); b.push_back(X + p * m * n + j * tile * n);
      c.push_back(C + p * m * m + i * tile + j * tile * m); }
    void **da, **db, **dc; CK(cudaMalloc(&da, a.size() * 8)); CK(cudaMalloc(&db, b.size() * 8)); CK(cudaMalloc(&dc, c.size() * 8));
    CK(cudaMemcpy(da, a.data(), a.size() * 8, cudaMemcpyHostToDevice)); CK(cudaMemcpy(db, b.data(), b.size() * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dc, c.data(), c.size() * 8, cudaMemcpyHostToDevice));
    char name[64]; snprintf(name, sizeof name, "tiles %lld (%lld/matrix)", tile, tiles);
    double exec = 2.0 * tile * tile * n * tiles * batch;
    run_lt(name, tile, tile, (int)(tiles * batch), true, 0, 0, da, db, dc, size_t(32) << 20, true, exec);
  }
  return 0;
}
