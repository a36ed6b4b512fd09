// Micro-benchmark: symmetric product C = X X^T (upper triangle) via cuBLAS grouped GEMM vs plain.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cmath>
#define CK(x) do { auto e = (x); if (e != cudaSuccess) { printf("CUDA %s line %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)
#define CB(x) do { auto e = (x); if (e != CUBLAS_STATUS_SUCCESS) { printf("cuBLAS %d line %d\n", (int)e, __LINE__); exit(1);} } while (0)

__global__ void fill(__nv_bfloat16* p, long long n, unsigned seed) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) { unsigned h = (unsigned)(i * 2654435761u) ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    p[i] = __float2bfloat16(((h & 0xffff) / 65535.0f - 0.5f) * 0.05f); }
}
int main() {
  cublasHandle_t h; CB(cublasCreate(&h));
  void* ws; size_t wss = 64 << 20; CK(cudaMalloc(&ws, wss)); CB(cublasSetWorkspace(h, ws, wss));
  struct Shape { int batch; long long m, n; };
  Shape shapes[] = {{4, 5120, 5120}, {16, 1280, 5120}, {4, 1280, 20480}};
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  float one = 1.f, zero = 0.f;
  for (auto sh : shapes) {
    long long m = sh.m, n = sh.n; int batch = sh.batch;
    __nv_bfloat16 *X, *C0, *C1;
    CK(cudaMalloc(&X, sizeof(__nv_bfloat16) * batch * m * n));
    CK(cudaMalloc(&C0, sizeof(__nv_bfloat16) * batch * m * m));
    CK(cudaMalloc(&C1, sizeof(__nv_bfloat16) * batch * m * m));
    fill<<<(batch * m * n + 255) / 256, 256>>>(X, batch * m * n, 7);
    const double nominal = 2.0 * m * m * n * batch;
    auto timeit = [&](auto&& f, int reps) {
      for (int i = 0; i < 3; ++i) f();
      CK(cudaDeviceSynchronize());
      std::vector<float> ts;
      for (int r = 0; r < reps; ++r) { cudaEventRecord(e0); f(); cudaEventRecord(e1); cudaEventSynchronize(e1);
        float t; cudaEventElapsedTime(&t, e0, e1); ts.push_back(t); }
      std::sort(ts.begin(), ts.end()); return ts[ts.size() / 2];
    };
    // Column-major: Xc is n x m (ld n) per matrix; C = Xc^T Xc (m x m, ld m).
    auto plain = [&] { CB(cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, m, n, &one, X, CUDA_R_16BF, n, m * n,
                                                    X, CUDA_R_16BF, n, m * n, &zero, C0, CUDA_R_16BF, m, m * m, batch,
                                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)); };
    float tp = timeit(plain, 20);
    printf("shape %d x %lld x %lld: plain %.3f ms, %.1f TF/s\n", batch, m, n, tp, nominal / tp / 1e9);
    for (int nb : {2, 4, 5, 8, 10, 16, 20}) {
      if (m % nb || (m / nb) % 8) continue;
      long long b = m / nb;
      std::vector<cublasOperation_t> ta(nb, CUBLAS_OP_T), tb(nb, CUBLAS_OP_N);
      std::vector<int> ms(nb), ns(nb), ks(nb), lda(nb, n), ldb(nb, n), ldc(nb, m), gs(nb, batch);
      std::vector<float> al(nb, 1.f), be(nb, 0.f);
      std::vector<const void*> A, B; std::vector<void*> Cp;
      double exec = 0;
      for (int i = 0; i < nb; ++i) { ms[i] = b; ns[i] = m - i * b; ks[i] = n; exec += 2.0 * b * (m - i * b) * n * batch;
        for (int p = 0; p < batch; ++p) { A.push_back(X + p * m * n + i * b * n); B.push_back(X + p * m * n + i * b * n);
          Cp.push_back(C1 + p * m * m + i * b + i * b * m); } }
      const void **dA, **dB; void** dC;
      CK(cudaMalloc(&dA, A.size() * 8)); CK(cudaMalloc(&dB, B.size() * 8)); CK(cudaMalloc(&dC, Cp.size() * 8));
      CK(cudaMemcpy(dA, A.data(), A.size() * 8, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(dB, B.data(), B.size() * 8, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(dC, Cp.data(), Cp.size() * 8, cudaMemcpyHostToDevice));
      CK(cudaMemset(C1, 0, sizeof(__nv_bfloat16) * batch * m * m));
      auto grouped = [&] { CB(cublasGemmGroupedBatchedEx(h, ta.data(), tb.data(), ms.data(), ns.data(), ks.data(), al.data(), dA,
                                                        CUDA_R_16BF, lda.data(), dB, CUDA_R_16BF, ldb.data(), be.data(), dC,
                                                        CUDA_R_16BF, ldc.data(), nb, gs.data(), CUBLAS_COMPUTE_32F)); };
      float tg = timeit(grouped, 20);
      // check: upper triangle (column-major: row r <= col c within panel rows) equals plain
      std::vector<__nv_bfloat16> h0(batch * m * m), h1(batch * m * m);
      CK(cudaMemcpy(h0.data(), C0, h0.size() * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(h1.data(), C1, h1.size() * 2, cudaMemcpyDeviceToHost));
      long long bad = 0; double maxd = 0;
      for (int p = 0; p < batch; ++p) for (long long c = 0; c < m; ++c) for (long long r = 0; r < m; ++r) {
        long long panel_r = r / b; if (c < panel_r * b) continue;  // computed region: rows of panel i, cols >= i*b
        float a = __bfloat162float(h0[p * m * m + r + c * m]), g = __bfloat162float(h1[p * m * m + r + c * m]);
        double d = fabs(a - g); if (d > maxd) maxd = d; if (d > 1e-2 * fabs(a) + 1e-6) ++bad; }
      printf("  grouped nb=%2d b=%5lld: %.3f ms  nominal-equiv %.1f TF/s, executed %.1f TF/s, vs plain %.3f; max|diff| %.3g bad %lld\n",
             nb, b, tg, nominal / tg / 1e9, exec / tg / 1e9, tg / tp, maxd, bad);
      cudaFree(dA); cudaFree(dB); cudaFree(dC);
    }
    cudaFree(X); cudaFree(C0); cudaFree(C1);
  }
  return 0;
}
