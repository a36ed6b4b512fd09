#pragma once
// Internal (CUDA translation units only): cuBLASLt, opened on first use instead of linked.
//
// Why: libcublasLt's static initialisers cost every process that links it ~50 ms at start (measured:
// a C `main` linked to it alone starts in 50-90 ms, to libcudart or libnccl alone in < 5 ms), and
// only `dionsim measure` and the GPU tests run a GEMM. The executable's other subcommands must not
// pay it (`dionsim collective` is held to 50 ms a call). dlopen resolves the library as the linker
// would have (the executable's RUNPATH, then the loader's path).
//
// Call sites go through cublaslt().matmul(...) etc.; the members are cuBLASLt's functions by type.
#include <cublasLt.h>

namespace dionsim::kernels {

// Every cuBLASLt function dionsim calls: (cuBLASLt's name, the member that holds it).
#define DIONSIM_CUBLASLT_FUNCTIONS(X)                                 \
  X(cublasLtCreate, create)                                           \
  X(cublasLtDestroy, destroy)                                         \
  X(cublasLtMatmul, matmul)                                           \
  X(cublasLtMatmulAlgoGetHeuristic, algo_get_heuristic)               \
  X(cublasLtMatmulDescCreate, desc_create)                            \
  X(cublasLtMatmulDescDestroy, desc_destroy)                          \
  X(cublasLtMatmulDescSetAttribute, desc_set_attribute)               \
  X(cublasLtMatmulPreferenceCreate, preference_create)                \
  X(cublasLtMatmulPreferenceDestroy, preference_destroy)              \
  X(cublasLtMatmulPreferenceSetAttribute, preference_set_attribute)   \
  X(cublasLtMatrixLayoutCreate, layout_create)                        \
  X(cublasLtMatrixLayoutDestroy, layout_destroy)                      \
  X(cublasLtMatrixLayoutSetAttribute, layout_set_attribute)

struct CublasLt {
#define DIONSIM_CUBLASLT_MEMBER(symbol, member) decltype(&::symbol) member = nullptr;
  DIONSIM_CUBLASLT_FUNCTIONS(DIONSIM_CUBLASLT_MEMBER)
#undef DIONSIM_CUBLASLT_MEMBER
};

// The library of the cuBLAS major version this build was compiled against (libcublasLt.so.N), opened
// and resolved once per process (thread-safe). Throws DeviceError naming the library and dlerror().
[[nodiscard]] const CublasLt& cublaslt();

}  // namespace dionsim::kernels
