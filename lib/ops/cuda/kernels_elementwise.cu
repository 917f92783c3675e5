// Memory-bound kernels: one grid-stride loop each, per-element math from ops/shared_math.h.
#include <stdexcept>
#include <string>

#include "cuda_abi/cuda_check.h"
#include "ops/cuda/device_reduce.cuh"
#include "ops/cuda/kernels.h"
#include "ops/shared_math.h"

namespace trainctl::ops::cuda {

namespace {

constexpr int kThreads = 256;

__device__ inline size_t global_index() {
  return static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline size_t grid_stride() { return static_cast<size_t>(gridDim.x) * blockDim.x; }

__global__ void add_kernel(float* out, const float* a, const float* b, size_t n) {
  for (size_t i = global_index(); i < n; i += grid_stride()) out[i] = a[i] + b[i];
}

__global__ void scale_kernel(float* x, float f, size_t n) {
  for (size_t i = global_index(); i < n; i += grid_stride()) x[i] *= f;
}

__global__ void gelu_forward_kernel(float* out, const float* inp, size_t n) {
  for (size_t i = global_index(); i < n; i += grid_stride()) out[i] = math::gelu(inp[i]);
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, size_t n) {
  for (size_t i = global_index(); i < n; i += grid_stride()) {
    dinp[i] = dout[i] * math::gelu_grad(inp[i]);
  }
}

__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, size_t n,
                             math::AdamWConstants k) {
  for (size_t i = global_index(); i < n; i += grid_stride()) {
    math::adamw_update(param[i], grad[i], m[i], v[i], k);
  }
}

__device__ inline float load_as_float(const void* src, DType t, size_t i) {
  switch (t) {
    case DType::fp32:
      return static_cast<const float*>(src)[i];
    case DType::bf16:
      return math::bf16_to_fp32(static_cast<const uint16_t*>(src)[i]);
    case DType::fp16:
      return math::fp16_to_fp32(static_cast<const uint16_t*>(src)[i]);
  }
  return 0.0f;
}

__device__ inline void store_float(void* dst, DType t, size_t i, float f) {
  switch (t) {
    case DType::fp32:
      static_cast<float*>(dst)[i] = f;
      return;
    case DType::bf16:
      static_cast<uint16_t*>(dst)[i] = math::fp32_to_bf16(f);
      return;
    case DType::fp16:
      static_cast<uint16_t*>(dst)[i] = math::fp32_to_fp16(f);
      return;
  }
}

// The dtype switch is uniform across the grid, so branches do not diverge.
__global__ void cast_kernel(void* dst, DType dst_type, const void* src, DType src_type, size_t n) {
  for (size_t i = global_index(); i < n; i += grid_stride()) {
    store_float(dst, dst_type, i, load_as_float(src, src_type, i));
  }
}

__global__ void round_to_type_kernel(float* p, DType type, size_t n) {
  for (size_t i = global_index(); i < n; i += grid_stride()) {
    p[i] = type == DType::bf16 ? math::bf16_to_fp32(math::fp32_to_bf16(p[i]))
                               : math::fp16_to_fp32(math::fp32_to_fp16(p[i]));
  }
}

// One thread per element of the padded destination; the type switch is uniform.
__global__ void pack_operand_kernel(void* dst, DType type, int ld_dst, const float* src, int rows,
                                    int cols, int ld_src) {
  const size_t n = static_cast<size_t>(rows) * ld_dst;
  for (size_t i = global_index(); i < n; i += grid_stride()) {
    const size_t r = i / ld_dst, c = i % ld_dst;
    const float f = c < static_cast<size_t>(cols) ? src[r * ld_src + c] : 0.0f;
    store_float(dst, type, i, f);
  }
}

__global__ void fill_rows_kernel(float* out, const float* bias, int rows, int cols) {
  const size_t n = static_cast<size_t>(rows) * cols;
  for (size_t i = global_index(); i < n; i += grid_stride()) out[i] = bias[i % cols];
}

__global__ void scale_matrix_kernel(float* C, int M, int N, int ldc, float beta) {
  const size_t n = static_cast<size_t>(M) * N;
  for (size_t i = global_index(); i < n; i += grid_stride()) {
    float& c = C[(i / N) * ldc + i % N];
    c = beta == 0.0f ? 0.0f : c * beta;
  }
}

// Column sums in two deterministic stages. Stage 1: block (x: 32 columns, y: 8 row lanes)
// sums rows [chunk * kRowsPerChunk, ...) of its 32 columns into partials[chunk][cols].
constexpr int kRowsPerChunk = 256;
constexpr int kRowLanes = 8;

__global__ void column_partials_kernel(float* partials, const float* x, int rows, int cols) {
  __shared__ float sums[kRowLanes][32];
  const int c = blockIdx.x * 32 + threadIdx.x;
  const int chunk = blockIdx.y;
  const int r0 = chunk * kRowsPerChunk;
  const int r1 = min(rows, r0 + kRowsPerChunk);
  float s = 0.0f;
  if (c < cols) {
    for (int r = r0 + threadIdx.y; r < r1; r += kRowLanes)
      s += x[static_cast<size_t>(r) * cols + c];
  }
  sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.0f;
    for (int k = 0; k < kRowLanes; ++k) total += sums[k][threadIdx.x];
    partials[static_cast<size_t>(chunk) * cols + c] = total;
  }
}

// Stage 2: dst[c] += sum over chunks, in chunk order.
__global__ void column_finish_kernel(float* dst, const float* partials, int chunks, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float total = 0.0f;
  for (int k = 0; k < chunks; ++k) total += partials[static_cast<size_t>(k) * cols + c];
  dst[c] += total;
}

__global__ void sum_squares_partials_kernel(double* partials, const float* x, size_t n) {
  __shared__ double shared[32];
  double s = 0.0;
  for (size_t i = global_index(); i < n; i += grid_stride()) {
    const double v = x[i];
    s += v * v;
  }
  s = block_sum(s, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

__global__ void sum_partials_kernel(double* result, const double* partials, int count) {
  __shared__ double shared[32];
  double s = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) s += partials[i];
  s = block_sum(s, shared);
  if (threadIdx.x == 0) *result = s;
}

}  // namespace

void launch_add(cudaStream_t s, float* out, const float* a, const float* b, size_t n) {
  if (n == 0) return;
  add_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(out, a, b, n);
  TRAINCTL_CUDA_CHECK_LAUNCH(add_kernel);
}

void launch_scale(cudaStream_t s, float* x, float f, size_t n) {
  if (n == 0) return;
  scale_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(x, f, n);
  TRAINCTL_CUDA_CHECK_LAUNCH(scale_kernel);
}

void launch_gelu_forward(cudaStream_t s, float* out, const float* inp, size_t n) {
  if (n == 0) return;
  gelu_forward_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(out, inp, n);
  TRAINCTL_CUDA_CHECK_LAUNCH(gelu_forward_kernel);
}

void launch_gelu_backward(cudaStream_t s, float* dinp, const float* inp, const float* dout,
                          size_t n) {
  if (n == 0) return;
  gelu_backward_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(dinp, inp, dout, n);
  TRAINCTL_CUDA_CHECK_LAUNCH(gelu_backward_kernel);
}

void launch_adamw(cudaStream_t s, float* param, const float* grad, float* m, float* v, size_t n,
                  float lr, float beta1, float beta2, float eps, float weight_decay, int step) {
  if (n == 0) return;
  const math::AdamWConstants k = math::adamw_constants(lr, beta1, beta2, eps, weight_decay, step);
  adamw_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(param, grad, m, v, n, k);
  TRAINCTL_CUDA_CHECK_LAUNCH(adamw_kernel);
}

void launch_cast(cudaStream_t s, void* dst, DType dst_type, const void* src, DType src_type,
                 size_t n) {
  if (n == 0) return;
  cast_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(dst, dst_type, src, src_type, n);
  TRAINCTL_CUDA_CHECK_LAUNCH(cast_kernel);
}

void launch_round_to_type(cudaStream_t s, float* p, DType type, size_t n) {
  if (n == 0) return;
  round_to_type_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(p, type, n);
  TRAINCTL_CUDA_CHECK_LAUNCH(round_to_type_kernel);
}

void launch_pack_operand(cudaStream_t s, void* dst, DType type, int ld_dst, const float* src,
                         int rows, int cols, int ld_src) {
  if (type != DType::bf16 && type != DType::fp16) {
    throw std::invalid_argument("pack_operand: the operand type must be bf16 or fp16");
  }
  if (rows < 0 || cols < 0 || ld_dst < cols || ld_src < cols) {
    throw std::invalid_argument(
        "pack_operand: bad shape (rows=" + std::to_string(rows) + ", cols=" + std::to_string(cols) +
        ", ld_dst=" + std::to_string(ld_dst) + ", ld_src=" + std::to_string(ld_src) + ")");
  }
  const size_t n = static_cast<size_t>(rows) * ld_dst;
  if (n == 0) return;
  pack_operand_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(dst, type, ld_dst, src, rows, cols,
                                                                 ld_src);
  TRAINCTL_CUDA_CHECK_LAUNCH(pack_operand_kernel);
}

void launch_fill_rows(cudaStream_t s, float* out, const float* bias, int rows, int cols) {
  const size_t n = static_cast<size_t>(rows) * cols;
  if (n == 0) return;
  fill_rows_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(out, bias, rows, cols);
  TRAINCTL_CUDA_CHECK_LAUNCH(fill_rows_kernel);
}

void launch_scale_matrix(cudaStream_t s, float* C, int M, int N, int ldc, float beta) {
  const size_t n = static_cast<size_t>(M) * N;
  if (n == 0) return;
  scale_matrix_kernel<<<grid_for(n, kThreads), kThreads, 0, s>>>(C, M, N, ldc, beta);
  TRAINCTL_CUDA_CHECK_LAUNCH(scale_matrix_kernel);
}

size_t column_sum_partials(int rows, int cols) {
  const size_t chunks = (static_cast<size_t>(rows) + kRowsPerChunk - 1) / kRowsPerChunk;
  return chunks * static_cast<size_t>(cols);
}

void launch_column_sum_add(cudaStream_t s, float* dst, const float* x, int rows, int cols,
                           float* partials) {
  if (rows <= 0 || cols <= 0) return;
  const int chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  const dim3 grid((cols + 31) / 32, chunks);
  column_partials_kernel<<<grid, dim3(32, kRowLanes), 0, s>>>(partials, x, rows, cols);
  TRAINCTL_CUDA_CHECK_LAUNCH(column_partials_kernel);
  column_finish_kernel<<<(cols + kThreads - 1) / kThreads, kThreads, 0, s>>>(dst, partials, chunks,
                                                                             cols);
  TRAINCTL_CUDA_CHECK_LAUNCH(column_finish_kernel);
}

void launch_sum_squares(cudaStream_t s, double* result, const float* x, size_t n,
                        double* partials) {
  // A fixed grid (not one sized by n) keeps the summation order a function of n alone.
  sum_squares_partials_kernel<<<kSumSqBlocks, kThreads, 0, s>>>(partials, x, n);
  TRAINCTL_CUDA_CHECK_LAUNCH(sum_squares_partials_kernel);
  sum_partials_kernel<<<1, kThreads, 0, s>>>(result, partials, kSumSqBlocks);
  TRAINCTL_CUDA_CHECK_LAUNCH(sum_partials_kernel);
}

}  // namespace trainctl::ops::cuda
