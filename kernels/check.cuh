#pragma once
// Internal (CUDA translation units only): turn every CUDA / cuBLASLt / NCCL status into a
// DeviceError naming the call, the rank (set_error_rank) and the operation.
#include <cuda_runtime.h>

#include <string>

#include "common/error.hpp"
#include "kernels/device.hpp"

namespace dionsim::kernels::detail {

[[noreturn]] void throw_device_error(const char* call, const std::string& status, const char* op, const char* file,
                                     int line);

inline void check_cuda(cudaError_t e, const char* call, const char* op, const char* file, int line) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear a non-sticky error so the next launch check does not report it again
    throw_device_error(call, std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e), op, file, line);
  }
}

inline cudaStream_t stream(StreamHandle s) { return static_cast<cudaStream_t>(s); }

inline unsigned blocks_for(long long n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

}  // namespace dionsim::kernels::detail

// CUDA_CHECK(call, "op"): op is the optimizer/transport operation the call belongs to.
#define DIONSIM_CUDA_CHECK(call, op) ::dionsim::kernels::detail::check_cuda((call), #call, (op), __FILE__, __LINE__)
// After a kernel launch: launch-configuration errors surface here, not at the next sync.
#define DIONSIM_LAUNCH_CHECK(op) ::dionsim::kernels::detail::check_cuda(cudaGetLastError(), "kernel launch", (op), __FILE__, __LINE__)
