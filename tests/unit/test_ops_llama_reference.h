#pragma once
// Naive double-precision references for the Llama family's ops (RMSNorm, rotary position
// embedding, SwiGLU, grouped-query attention), checked against finite differences in
// test_ops_llama.cpp and used there as the oracle for the CPU backend.
#include <cmath>
#include <vector>

namespace trainctl::ops::ref {

template <typename T>
void rmsnorm_forward(T* out, T* rstd, const T* inp, const T* w, int N, int C, T eps) {
  for (int n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    T ss = 0;
    for (int i = 0; i < C; ++i) ss += x[i] * x[i];
    const T s = T(1) / std::sqrt(ss / C + eps);
    rstd[n] = s;
    for (int i = 0; i < C; ++i) out[n * C + i] = x[i] * s * w[i];
  }
}

// dinp (=), dw (+=).
template <typename T>
void rmsnorm_backward(T* dinp, T* dw, const T* dout, const T* inp, const T* w, const T* rstd, int N,
                      int C) {
  for (int n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    const T* g = dout + n * C;
    const T s = rstd[n];
    T dot = 0;
    for (int i = 0; i < C; ++i) {
      dw[i] += g[i] * x[i] * s;
      dot += g[i] * w[i] * x[i];
    }
    // d/dx_i of x_j * s * w_j with ds/dx_i = -s^3 x_i / C.
    for (int i = 0; i < C; ++i) dinp[n * C + i] = s * g[i] * w[i] - s * s * s * x[i] * dot / C;
  }
}

// Hugging Face's rotate_half rotation, `sign` = +1 forward, -1 its inverse (the gradient).
template <typename T>
void rope(T* x, int B, int Tn, int stride, int heads, int hd, T theta, int pos0, T sign = 1) {
  const int half = hd / 2;
  for (int r = 0; r < B * Tn; ++r) {
    const T pos = T(pos0 + r % Tn);
    for (int h = 0; h < heads; ++h) {
      T* v = x + r * stride + h * hd;
      for (int i = 0; i < half; ++i) {
        const T angle = pos * std::pow(theta, -T(2 * i) / hd);
        const T c = std::cos(angle), s = sign * std::sin(angle);
        const T a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
      }
    }
  }
}

template <typename T>
void swiglu_forward(T* out, const T* gu, int N, int H) {
  for (int n = 0; n < N; ++n) {
    for (int i = 0; i < H; ++i) {
      const T g = gu[n * 2 * H + i], u = gu[n * 2 * H + H + i];
      out[n * H + i] = g / (T(1) + std::exp(-g)) * u;
    }
  }
}

template <typename T>
void swiglu_backward(T* dgu, const T* dout, const T* gu, int N, int H) {
  for (int n = 0; n < N; ++n) {
    for (int i = 0; i < H; ++i) {
      const T g = gu[n * 2 * H + i], u = gu[n * 2 * H + H + i];
      const T sig = T(1) / (T(1) + std::exp(-g));
      dgu[n * 2 * H + i] = dout[n * H + i] * u * (sig + g * sig * (T(1) - sig));
      dgu[n * 2 * H + H + i] = dout[n * H + i] * g * sig;
    }
  }
}

// Grouped-query causal attention over qkv [B, T, (NH + 2 NKV) hd]; out [B, T, NH hd],
// lse [B, NH, T]. Query head h reads k/v head h / (NH / NKV).
template <typename T>
void gqa_forward(T* out, T* lse, const T* qkv, int B, int Tn, int NH, int NKV, int hd) {
  const int W = (NH + 2 * NKV) * hd, Cq = NH * hd, Ckv = NKV * hd, group = NH / NKV;
  const T scale = T(1) / std::sqrt(T(hd));
  std::vector<T> s(static_cast<size_t>(Tn));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const int g = h / group;
      for (int t = 0; t < Tn; ++t) {
        const T* q = qkv + (b * Tn + t) * W + h * hd;
        T m = -1e300;
        for (int j = 0; j <= t; ++j) {
          const T* k = qkv + (b * Tn + j) * W + Cq + g * hd;
          T d = 0;
          for (int c = 0; c < hd; ++c) d += q[c] * k[c];
          s[j] = d * scale;
          m = std::max(m, s[j]);
        }
        T sum = 0;
        for (int j = 0; j <= t; ++j) sum += std::exp(s[j] - m);
        const T l = m + std::log(sum);
        lse[(b * NH + h) * Tn + t] = l;
        T* o = out + (b * Tn + t) * Cq + h * hd;
        for (int c = 0; c < hd; ++c) o[c] = 0;
        for (int j = 0; j <= t; ++j) {
          const T p = std::exp(s[j] - l);
          const T* v = qkv + (b * Tn + j) * W + Cq + Ckv + g * hd;
          for (int c = 0; c < hd; ++c) o[c] += p * v[c];
        }
      }
    }
  }
}

template <typename T>
void gqa_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse, int B, int Tn,
                  int NH, int NKV, int hd) {
  const int W = (NH + 2 * NKV) * hd, Cq = NH * hd, Ckv = NKV * hd, group = NH / NKV;
  const T scale = T(1) / std::sqrt(T(hd));
  std::fill(dqkv, dqkv + static_cast<size_t>(B) * Tn * W, T(0));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const int g = h / group;
      for (int t = 0; t < Tn; ++t) {
        const T* q = qkv + (b * Tn + t) * W + h * hd;
        T* dq = dqkv + (b * Tn + t) * W + h * hd;
        const T* dO = dout + (b * Tn + t) * Cq + h * hd;
        const T* O = out + (b * Tn + t) * Cq + h * hd;
        T D = 0;
        for (int c = 0; c < hd; ++c) D += dO[c] * O[c];
        for (int j = 0; j <= t; ++j) {
          const T* k = qkv + (b * Tn + j) * W + Cq + g * hd;
          const T* v = k + Ckv;
          T* dk = dqkv + (b * Tn + j) * W + Cq + g * hd;
          T* dv = dk + Ckv;
          T sc = 0, dp = 0;
          for (int c = 0; c < hd; ++c) {
            sc += q[c] * k[c];
            dp += dO[c] * v[c];
          }
          const T p = std::exp(sc * scale - lse[(b * NH + h) * Tn + t]);
          const T ds = p * (dp - D);
          for (int c = 0; c < hd; ++c) {
            dv[c] += p * dO[c];
            dq[c] += scale * ds * k[c];
            dk[c] += scale * ds * q[c];
          }
        }
      }
    }
  }
}

}  // namespace trainctl::ops::ref
