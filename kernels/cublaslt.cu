#include "kernels/cublaslt.cuh"

#include <cublas_api.h>
#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "common/error.hpp"

namespace dionsim::kernels {

namespace {

CublasLt open_cublaslt() {
  const std::string name = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  // RTLD_LOCAL: nothing else in the process resolves against it; RTLD_NOW: a missing symbol fails here.
  void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    throw DeviceError("cannot open " + name + " (cuBLASLt, needed for the GPU step's GEMMs): " +
                      (why != nullptr ? why : "unknown dlopen error") +
                      "; install the CUDA toolkit's cuBLAS or add its directory to LD_LIBRARY_PATH");
  }
  const auto resolve = [&](auto& fn, const char* symbol) {
    dlerror();
    void* p = dlsym(lib, symbol);
    if (p == nullptr) throw DeviceError("cannot resolve " + std::string(symbol) + " in " + name);
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  CublasLt lt;
#define DIONSIM_CUBLASLT_RESOLVE(symbol, member) resolve(lt.member, #symbol);
  DIONSIM_CUBLASLT_FUNCTIONS(DIONSIM_CUBLASLT_RESOLVE)
#undef DIONSIM_CUBLASLT_RESOLVE
  return lt;  // the library stays open for the process's life
}

}  // namespace

const CublasLt& cublaslt() {
  static const CublasLt lt = open_cublaslt();  // a failed open throws and is retried on the next call
  return lt;
}

}  // namespace dionsim::kernels
