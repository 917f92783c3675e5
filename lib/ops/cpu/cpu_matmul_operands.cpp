// Mixed-precision matrix products on the CPU: each operand is rounded to the backend's
// matmul type (bf16/fp16, round to nearest even) into a buffer the backend owns, and the
// product runs in fp32 sgemm. A bf16 x bf16 (or fp16 x fp16) product is exact in fp32
// (16 or 22 significant bits), so this is the arithmetic of tensor cores with fp32
// accumulation, up to summation order: the CPU and CUDA backends stay comparable and the
// CPU shows what a low-precision run would do to the losses.
#include <algorithm>
#include <stdexcept>

#include "ops/cpu/cpu_backend.h"
#include "ops/cpu/float16.h"

namespace trainctl::ops::cpu {

namespace {

template <DType To>
void round_range(float* dst, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if constexpr (To == DType::bf16) {
      dst[i] = bf16_to_fp32(fp32_to_bf16(src[i]));
    } else {
      dst[i] = fp16_to_fp32(fp32_to_fp16(src[i]));
    }
  }
}

}  // namespace

void round_to(DType type, float* dst, const float* src, size_t n) {
  switch (type) {
    case DType::fp32:
      if (dst != src) std::copy(src, src + n, dst);
      return;
    case DType::bf16:
      round_range<DType::bf16>(dst, src, n);
      return;
    case DType::fp16:
      round_range<DType::fp16>(dst, src, n);
      return;
  }
}

void CpuBackend::round_to_type(float* p, size_t n, DType type) {
  if (type == DType::fp32) return;
  pool_.parallel_for(
      static_cast<int64_t>(n), kElementwiseGrain * 8,
      [&](int64_t b, int64_t e, int) { round_to(type, p + b, p + b, static_cast<size_t>(e - b)); });
}

void CpuBackend::round_to_matmul_type(float* dst, const float* src, size_t n) {
  pool_.parallel_for(static_cast<int64_t>(n), kElementwiseGrain * 8,
                     [&](int64_t b, int64_t e, int) {
                       round_to(matmul_, dst + b, src + b, static_cast<size_t>(e - b));
                     });
}

const float* CpuBackend::matmul_operand(int slot, const float* src, int64_t rows, int64_t cols,
                                        int64_t ld) {
  if (matmul_ == DType::fp32 || src == nullptr || rows <= 0 || cols <= 0) return src;
  if (slot < 0 || slot >= kMatmulOperandSlots) {
    throw std::logic_error("matmul_operand: slot out of range");
  }
  // The strided region the product reads: whole rows but the last, which ends at `cols`.
  const size_t n = static_cast<size_t>((rows - 1) * ld + cols);
  for (const auto& [begin, end] : exact_) {
    if (src >= begin && src + n <= end) return src;  // rounding would change nothing
  }
  auto& buf = operands_[static_cast<size_t>(slot)];
  if (buf.size() < n) buf.resize(n);
  round_to_matmul_type(buf.data(), src, n);
  return buf.data();
}

void CpuBackend::note_matmul_exact(const float* p, size_t n) {
  if (p != nullptr && n > 0) exact_.emplace_back(p, p + n);
}

void CpuBackend::forget_matmul_exact(const float* p) {
  std::erase_if(exact_, [p](const auto& range) { return range.first == p; });
}

}  // namespace trainctl::ops::cpu
