#pragma once
// The element types of tensors and of a job's compute precision (precision.compute), and
// where tensors live: vocabulary shared by config/, tensor/, ops/ and the CUDA plugin.
// Header-only (the plugin links no trainctl library).
#include <cstddef>
#include <stdexcept>

namespace trainctl {

enum class DType { fp32, bf16, fp16 };
enum class Device { cpu, cuda };

// Bytes per element.
constexpr size_t dtype_size(DType d) {
  switch (d) {
    case DType::fp32:
      return 4;
    case DType::bf16:
    case DType::fp16:
      return 2;
  }
  throw std::invalid_argument("dtype_size: unknown dtype");
}

// "fp32", "bf16", "fp16": the names job specs and messages use.
constexpr const char* dtype_name(DType d) {
  switch (d) {
    case DType::fp32:
      return "fp32";
    case DType::bf16:
      return "bf16";
    case DType::fp16:
      return "fp16";
  }
  throw std::invalid_argument("dtype_name: unknown dtype");
}

}  // namespace trainctl
