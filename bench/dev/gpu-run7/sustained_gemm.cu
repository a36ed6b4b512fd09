// Sustained bf16 GEMM rate on one GPU: 4 x 5120^3 strided-batched GEMMs back to back, TF/s per 0.5 s window.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#define CB(x) do { auto e = (x); if (e != CUBLAS_STATUS_SUCCESS) { printf("cuBLAS %d line %d\n", (int)e, __LINE__); exit(1);} } while (0)
__global__ void fill(__nv_bfloat16* p, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) { unsigned h = (unsigned)(i * 2654435761u); h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    p[i] = __float2bfloat16(((h & 0xffff) / 65535.0f - 0.5f) * 0.05f); }
}
int main(int argc, char** argv) {
  const double seconds = argc > 1 ? atof(argv[1]) : 10.0;
  cublasHandle_t h; CB(cublasCreate(&h));
  const long long m = 5120; const int batch = 4;
  __nv_bfloat16 *X, *C; cudaMalloc(&X, 2LL * batch * m * m); cudaMalloc(&C, 2LL * batch * m * m);
  fill<<<(batch * m * m + 255) / 256, 256>>>(X, batch * m * m);
  float one = 1.f, zero = 0.f;
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    const int n = 40;
    cudaEventRecord(a);
    for (int i = 0; i < n; ++i)
      CB(cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, m, m, &one, X, CUDA_R_16BF, m, m * m, X, CUDA_R_16BF, m,
                                    m * m, &zero, C, CUDA_R_16BF, m, m * m, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b);
    printf("t=%6.2f s  %7.1f TF/s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
           2.0 * m * m * m * batch * n / (ms * 1e9));
    fflush(stdout);
  }
  return 0;
}
