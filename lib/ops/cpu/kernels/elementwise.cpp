// GELU, AdamW, LayerNorm rows and the softmax cross-entropy of one row, written as plain
// loops that the compiler vectorises with this translation unit's instruction set.
//
// Built with -ffp-contract=off (no fused multiply-adds the source does not ask for) and
// -fno-math-errno (so sqrt vectorises), reductions through vec_math.h's 16 lanes: every
// instruction set gives the same bits.
//
// The loops around fast_exp are written with simd.h on AVX2 and AVX-512: GCC vectorises
// fast_exp's clamps only with AVX-512's masks, and left GELU scalar (8x slower) on AVX2.
// The vector code does the scalar code's operations in the same order.
#include "ops/cpu/kernels/parts.h"
#include "ops/cpu/vec_math.h"

#if defined(__AVX2__)
#include "ops/cpu/kernels/simd.h"
#define TRAINCTL_VECTOR_EXP 1
#else
#define TRAINCTL_VECTOR_EXP 0
#endif

namespace trainctl::ops::cpu::TRAINCTL_ISA {

namespace {

#if TRAINCTL_VECTOR_EXP
using simd::V;

inline V gelu_u(V x) {  // sqrt(2/pi) (x + 0.044715 x^3)
  const V x3 = simd::mul(simd::mul(simd::mul(simd::set1(math::kGeluCoeff), x), x), x);
  return simd::mul(simd::set1(math::kSqrt2OverPi), simd::add(x, x3));
}

inline V gelu_sigmoid(V x) {  // 1 / (1 + exp(-2u)) = 0.5 (1 + tanh u)
  return simd::add(simd::set1(1.0f), simd::exp<false>(simd::mul(simd::set1(-2.0f), gelu_u(x))));
}
#endif

}  // namespace

// GELU, tanh approximation (GPT-2, PyTorch's approximate='tanh'), through the identity
// 0.5 (1 + tanh u) = 1 / (1 + exp(-2u)): one vectorisable exp does the work of tanh.
void gelu_forward(float* out, const float* inp, int64_t begin, int64_t end) {
  int64_t i = begin;
#if TRAINCTL_VECTOR_EXP
  for (; i + simd::kWidth <= end; i += simd::kWidth) {
    const V x = simd::loadu(inp + i);
    simd::storeu(out + i, simd::div(x, gelu_sigmoid(x)));
  }
#endif
  for (; i < end; ++i) {
    const float x = inp[i];
    const float u = math::kSqrt2OverPi * (x + math::kGeluCoeff * x * x * x);
    out[i] = x / (1.0f + fast_exp(-2.0f * u));
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t begin, int64_t end) {
  int64_t i = begin;
#if TRAINCTL_VECTOR_EXP
  const V one = simd::set1(1.0f);
  for (; i + simd::kWidth <= end; i += simd::kWidth) {
    const V x = simd::loadu(inp + i);
    const V s = simd::div(one, gelu_sigmoid(x));
    const V du =
        simd::mul(simd::set1(math::kSqrt2OverPi),
                  simd::add(one, simd::mul(simd::mul(simd::set1(3.0f * math::kGeluCoeff), x), x)));
    const V two_x = simd::mul(simd::set1(2.0f), x);
    const V slope = simd::mul(simd::mul(simd::mul(two_x, s), simd::sub(one, s)), du);
    simd::storeu(dinp + i, simd::mul(simd::loadu(dout + i), simd::add(s, slope)));
  }
#endif
  for (; i < end; ++i) {
    const float x = inp[i];
    const float u = math::kSqrt2OverPi * (x + math::kGeluCoeff * x * x * x);
    const float s = 1.0f / (1.0f + fast_exp(-2.0f * u));  // 0.5 (1 + tanh u)
    const float du = math::kSqrt2OverPi * (1.0f + 3.0f * math::kGeluCoeff * x * x);
    // d/dx [x s(2u)] = s + x * 2 s (1 - s) du   (since 1 - tanh^2 u = 4 s (1 - s))
    dinp[i] = dout[i] * (s + 2.0f * x * s * (1.0f - s) * du);
  }
}

// torch.optim.AdamW's order of operations (foreach=False), one pass over the four arrays.
void adamw(float* param, const float* grad, float* m, float* v, int64_t begin, int64_t end,
           const math::AdamWConstants& k) {
  for (int64_t i = begin; i < end; ++i) {
    const float g = grad[i];
    const float mi = k.beta1 * m[i] + k.one_minus_b1 * g;
    const float vi = k.beta2 * v[i] + k.one_minus_b2 * (g * g);
    m[i] = mi;
    v[i] = vi;
    const float denom = __builtin_sqrtf(vi) * k.inv_bc2_sqrt + k.eps;
    param[i] = param[i] * k.decay - (k.step_size * mi) / denom;
  }
}

// PyTorch semantics (biased variance). A row (C floats) stays in L1 between the
// statistics and the normalisation, so reading it twice costs one pass over memory.
void layernorm_forward_rows(float* out, float* mean, float* rstd, const float* inp,
                            const float* weight, const float* bias, int64_t r0, int64_t r1, int C) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* x = inp + r * C;
    float* o = out + r * C;
    const float m = sum_of(x, C) / static_cast<float>(C);
    const float var = sum_sq_dev(x, m, C) / static_cast<float>(C);
    const float s = 1.0f / __builtin_sqrtf(var + math::kLayerNormEps);
    for (int i = 0; i < C; ++i) o[i] = (x[i] - m) * s * weight[i] + bias[i];
    mean[r] = m;
    rstd[r] = s;
  }
}

void layernorm_backward_rows(float* dinp, float* dweight, float* dbias, const float* dout,
                             const float* inp, const float* weight, const float* mean,
                             const float* rstd, int64_t r0, int64_t r1, int C) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* x = inp + r * C;
    const float* g = dout + r * C;
    float* dx = dinp + r * C;
    const float m = mean[r];
    const float s = rstd[r];
    // dnorm = g * w; dx = s * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)), with
    // lane accumulators (vec_math.h) so the loop vectorises.
    float lane_dnorm[kLanes] = {};
    float lane_dnorm_xhat[kLanes] = {};
    int i = 0;
    for (; i + kLanes <= C; i += kLanes) {
      for (int k = 0; k < kLanes; ++k) {
        const float xhat = (x[i + k] - m) * s;
        const float dnorm = g[i + k] * weight[i + k];
        lane_dnorm[k] += dnorm;
        lane_dnorm_xhat[k] += dnorm * xhat;
        dweight[i + k] += g[i + k] * xhat;
        dbias[i + k] += g[i + k];
      }
    }
    for (; i < C; ++i) {
      const float xhat = (x[i] - m) * s;
      const float dnorm = g[i] * weight[i];
      lane_dnorm[i % kLanes] += dnorm;
      lane_dnorm_xhat[i % kLanes] += dnorm * xhat;
      dweight[i] += g[i] * xhat;
      dbias[i] += g[i];
    }
    const float mean_dnorm = reduce_lanes(lane_dnorm) / static_cast<float>(C);
    const float mean_dnorm_xhat = reduce_lanes(lane_dnorm_xhat) / static_cast<float>(C);
    for (i = 0; i < C; ++i) {
      const float xhat = (x[i] - m) * s;
      dx[i] = s * (g[i] * weight[i] - mean_dnorm - xhat * mean_dnorm_xhat);
    }
  }
}

float xent_row(float* l, int V, int target, float dloss, bool backward) {
  const float target_logit = l[target];
  const float mx = max_of(l, V);
  int j = 0;
#if TRAINCTL_VECTOR_EXP
  for (; j + simd::kWidth <= V; j += simd::kWidth) {
    simd::storeu(l + j, simd::exp<false>(simd::sub(simd::loadu(l + j), simd::set1(mx))));
  }
#endif
  for (; j < V; ++j) l[j] = fast_exp(l[j] - mx);
  const float sum = sum_of(l, V);
  if (backward) {
    // dlogits = dloss * (softmax - onehot), in place
    const float f = dloss / sum;
    for (j = 0; j < V; ++j) l[j] *= f;
    l[target] -= dloss;
  }
  return mx + __builtin_logf(sum) - target_logit;
}

}  // namespace trainctl::ops::cpu::TRAINCTL_ISA
