// dtype conversions; bf16 <-> fp16 goes through fp32 (exact widening, one rounding).
#include <cstring>
#include <stdexcept>
#include <string>

#include "ops/cpu/cpu_backend.h"
#include "ops/cpu/float16.h"

namespace trainctl::ops::cpu {

namespace {

float load(const void* src, DType t, int64_t i) {
  switch (t) {
    case DType::fp32:
      return static_cast<const float*>(src)[i];
    case DType::bf16:
      return bf16_to_fp32(static_cast<const uint16_t*>(src)[i]);
    case DType::fp16:
      return fp16_to_fp32(static_cast<const uint16_t*>(src)[i]);
  }
  return 0.0f;
}

void store(void* dst, DType t, int64_t i, float f) {
  switch (t) {
    case DType::fp32:
      static_cast<float*>(dst)[i] = f;
      return;
    case DType::bf16:
      static_cast<uint16_t*>(dst)[i] = fp32_to_bf16(f);
      return;
    case DType::fp16:
      static_cast<uint16_t*>(dst)[i] = fp32_to_fp16(f);
      return;
  }
}

// One tight loop per (src, dst) pair so the dtype switch is not inside the element loop.
template <DType Src, DType Dst>
void cast_range(void* dst, const void* src, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) store(dst, Dst, i, load(src, Src, i));
}

using CastFn = void (*)(void*, const void*, int64_t, int64_t);

template <DType Src>
CastFn pick_dst(DType dst) {
  switch (dst) {
    case DType::fp32:
      return &cast_range<Src, DType::fp32>;
    case DType::bf16:
      return &cast_range<Src, DType::bf16>;
    case DType::fp16:
      return &cast_range<Src, DType::fp16>;
  }
  throw std::invalid_argument("cast: unknown destination dtype");
}

CastFn pick(DType dst, DType src) {
  switch (src) {
    case DType::fp32:
      return pick_dst<DType::fp32>(dst);
    case DType::bf16:
      return pick_dst<DType::bf16>(dst);
    case DType::fp16:
      return pick_dst<DType::fp16>(dst);
  }
  throw std::invalid_argument("cast: unknown source dtype");
}

}  // namespace

void CpuBackend::cast(void* dst, DType dst_type, const void* src, DType src_type, size_t n) {
  if (dst_type == src_type) {
    if (dst != src) {
      pool_.parallel_for(
          static_cast<int64_t>(n), kElementwiseGrain * 8, [&](int64_t b, int64_t e, int) {
            const size_t w = dtype_size(dst_type);
            std::memmove(static_cast<char*>(dst) + b * w, static_cast<const char*>(src) + b * w,
                         static_cast<size_t>(e - b) * w);
          });
    }
    return;
  }
  const CastFn fn = pick(dst_type, src_type);
  pool_.parallel_for(static_cast<int64_t>(n), kElementwiseGrain,
                     [&](int64_t b, int64_t e, int) { fn(dst, src, b, e); });
}

}  // namespace trainctl::ops::cpu
