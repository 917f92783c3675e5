#pragma once
// Every CUDA runtime and cuBLAS(Lt) call goes through one of these macros: a failure
// throws std::runtime_error naming the call as written, its file:line and the library's
// own error text, e.g.
//   "cudaMallocManaged(&p, bytes) failed at lib/ops/cuda/caching_allocator.cpp:41:
//    out of memory (cudaErrorMemoryAllocation)".
// Shared by every part of the plugin (ops/cuda, comm/nccl, cuda_plugin/); includes only
// CUDA's own headers.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace trainctl::cuda_abi {

[[noreturn]] inline void throw_call_error(const char* call, const char* file, int line,
                                          const std::string& what) {
  throw std::runtime_error(std::string(call) + " failed at " + file + ":" + std::to_string(line) +
                           ": " + what);
}

inline std::string cuda_error_text(cudaError_t e) {
  return std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + ")";
}

inline std::string cublas_error_text(cublasStatus_t s) {
  return std::string(cublasLtGetStatusString(s)) + " (" + cublasLtGetStatusName(s) + ")";
}

inline void check_launch(const char* kernel, const char* file, int line) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    throw_call_error((std::string("launch of kernel ") + kernel).c_str(), file, line,
                     cuda_error_text(e));
  }
}

}  // namespace trainctl::cuda_abi

#define TRAINCTL_CUDA_CHECK(call)                                                           \
  do {                                                                                      \
    const cudaError_t trainctl_err_ = (call);                                               \
    if (trainctl_err_ != cudaSuccess) {                                                     \
      ::trainctl::cuda_abi::throw_call_error(                                               \
          #call, __FILE__, __LINE__, ::trainctl::cuda_abi::cuda_error_text(trainctl_err_)); \
    }                                                                                       \
  } while (0)

// After a kernel launch: reports launch-configuration errors at the launch site.
#define TRAINCTL_CUDA_CHECK_LAUNCH(kernel_name) \
  ::trainctl::cuda_abi::check_launch(#kernel_name, __FILE__, __LINE__)

#define TRAINCTL_CUBLAS_CHECK(call)                                                          \
  do {                                                                                       \
    const cublasStatus_t trainctl_st_ = (call);                                              \
    if (trainctl_st_ != CUBLAS_STATUS_SUCCESS) {                                             \
      ::trainctl::cuda_abi::throw_call_error(                                                \
          #call, __FILE__, __LINE__, ::trainctl::cuda_abi::cublas_error_text(trainctl_st_)); \
    }                                                                                        \
  } while (0)
