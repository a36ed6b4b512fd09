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

struct CublasLt {
  decltype(&::cublasLtCreate) create;
  decltype(&::cublasLtDestroy) destroy;
  decltype(&::cublasLtMatmul) matmul;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) algo_get_heuristic;
  decltype(&::cublasLtMatmulDescCreate) desc_create;
  decltype(&::cublasLtMatmulDescDestroy) desc_destroy;
  decltype(&::cublasLtMatmulDescSetAttribute) desc_set_attribute;
  decltype(&::cublasLtMatmulPreferenceCreate) preference_create;
  decltype(&::cublasLtMatmulPreferenceDestroy) preference_destroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) preference_set_attribute;
  decltype(&::cublasLtMatrixLayoutCreate) layout_create;
  decltype(&::cublasLtMatrixLayoutDestroy) layout_destroy;
  decltype(&::cublasLtMatrixLayoutSetAttribute) layout_set_attribute;
};

// The library of the cuBLAS major version this build was compiled against (libcublasLt.so.N), opened
// and resolved once per process (thread-safe). Throws DeviceError naming the library and dlerror().
[[nodiscard]] const CublasLt& cublaslt();

}  // namespace dionsim::kernels
