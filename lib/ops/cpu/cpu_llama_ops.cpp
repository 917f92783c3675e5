// The Llama family's elementwise ops on the CPU: RMSNorm, rotary position embedding and
// SwiGLU, split over rows of the pool. RMSNorm and RoPE are plain loops: each is under 1% of
// a Llama step next to the matrix products (perf, L4/C256/T256); SwiGLU's exp goes through
// the per-instruction-set kernels.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_backend.h"

namespace trainctl::ops::cpu {

namespace {
int64_t rows_grain(int C) { return std::max<int64_t>(1, kElementwiseGrain / std::max(1, C)); }
}  // namespace

void CpuBackend::rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight,
                                 int N, int C, float eps) {
  pool_.parallel_for(N, rows_grain(C), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* x = inp + r * C;
      float* y = out + r * C;
      double ss = 0.0;
      for (int i = 0; i < C; ++i) ss += static_cast<double>(x[i]) * x[i];
      const float s = 1.0f / std::sqrt(static_cast<float>(ss / C) + eps);
      rstd[r] = s;
      for (int i = 0; i < C; ++i) y[i] = x[i] * s * weight[i];
    }
  });
}

void CpuBackend::rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                                  const float* weight, const float* rstd, int N, int C) {
  // dweight is summed per thread over fixed row ranges and then in thread order, so the
  // result is deterministic for a given thread count (as layernorm_backward).
  std::vector<float*> partials(static_cast<size_t>(pool_.size()), nullptr);
  pool_.parallel_for(N, rows_grain(C), [&](int64_t r0, int64_t r1, int t) {
    float* dw = scratch(t, static_cast<size_t>(C));
    std::fill_n(dw, C, 0.0f);
    partials[static_cast<size_t>(t)] = dw;
    for (int64_t r = r0; r < r1; ++r) {
      const float* x = inp + r * C;
      const float* dy = dout + r * C;
      float* dx = dinp + r * C;
      const float s = rstd[r];
      // y = xhat * w with xhat = x * s: dxhat = dy * w and
      // dx = s * (dxhat - xhat * mean(dxhat * xhat)).
      double dot = 0.0;
      for (int i = 0; i < C; ++i) {
        const float xhat = x[i] * s;
        dw[i] += dy[i] * xhat;
        dot += static_cast<double>(dy[i] * weight[i]) * xhat;
      }
      const float m = static_cast<float>(dot / C);
      for (int i = 0; i < C; ++i) dx[i] = s * (dy[i] * weight[i] - x[i] * s * m);
    }
  });
  for (float* p : partials) {
    if (p == nullptr) continue;
    for (int i = 0; i < C; ++i) dweight[i] += p[i];
  }
}

namespace {

// Rotates (x[i], x[i + half]) by +angle (forward) or -angle (backward), for every head of
// every row. Angles are computed as Hugging Face computes them (fp32 inverse frequencies
// times the position), so exported models agree with transformers' forward.
void rope_rows(ThreadPool& pool, float* x, int B, int T, int row_stride, int heads, int head_dim,
               float theta, int pos0, float sign) {
  const int half = head_dim / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    inv_freq[static_cast<size_t>(i)] =
        1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
  }
  const int64_t rows = int64_t{B} * T;
  pool.parallel_for(rows, rows_grain(heads * head_dim), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const float pos = static_cast<float>(pos0 + static_cast<int>(r % T));
      float* row = x + r * row_stride;
      for (int i = 0; i < half; ++i) {
        const float angle = pos * inv_freq[static_cast<size_t>(i)];
        const float c = std::cos(angle);
        const float s = sign * std::sin(angle);
        for (int h = 0; h < heads; ++h) {
          float* v = row + static_cast<int64_t>(h) * head_dim;
          const float a = v[i], b = v[i + half];
          v[i] = a * c - b * s;
          v[i + half] = b * c + a * s;
        }
      }
    }
  });
}

}  // namespace

void CpuBackend::rope_forward(float* x, int B, int T, int row_stride, int heads, int head_dim,
                              float theta, int pos0) {
  rope_rows(pool_, x, B, T, row_stride, heads, head_dim, theta, pos0, 1.0f);
}

void CpuBackend::rope_backward(float* dx, int B, int T, int row_stride, int heads, int head_dim,
                               float theta, int pos0) {
  rope_rows(pool_, dx, B, T, row_stride, heads, head_dim, theta, pos0, -1.0f);
}

// SwiGLU runs this instruction set's kernel (cpu_kernels.h): one vectorised exp per element.
void CpuBackend::swiglu_forward(float* out, const float* gate_up, int N, int H) {
  pool_.parallel_for(N, rows_grain(2 * H), [&](int64_t r0, int64_t r1, int) {
    kernels_.swiglu_forward_rows(out, gate_up, r0, r1, H);
  });
}

void CpuBackend::swiglu_backward(float* dgate_up, const float* dout, const float* gate_up, int N,
                                 int H) {
  pool_.parallel_for(N, rows_grain(2 * H), [&](int64_t r0, int64_t r1, int) {
    kernels_.swiglu_backward_rows(dgate_up, dout, gate_up, r0, r1, H);
  });
}

}  // namespace trainctl::ops::cpu
