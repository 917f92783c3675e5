#pragma once
// Naive reference implementations of the op set, templated on the scalar type and used
// in double: they are the oracle for the CPU backend (fp32) and are themselves checked
// against central finite differences (test_ops_reference.cpp). Also shared test helpers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace trainctl::ops::ref {

using VecD = std::vector<double>;

// --- helpers -----------------------------------------------------------------------------

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

inline VecD to_double(const std::vector<float>& v) { return VecD(v.begin(), v.end()); }

inline double max_abs(const VecD& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}

// got (fp32) matches want (double) within rtol relative to each value plus a floor of
// rtol * 0.1 * max|want| (sums of many terms carry absolute, not relative, rounding).
inline void require_close(const float* got, const VecD& want, double rtol, const char* what) {
  const double floor = 0.1 * max_abs(want) + 1e-30;
  size_t bad = 0;
  size_t first = want.size();
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= rtol * (std::fabs(want[i]) + floor))) {
      if (bad++ == 0) first = i;
    }
  }
  INFO(what << ": " << bad << " of " << want.size() << " values off; first at index " << first
            << (first < want.size()
                    ? " got " + std::to_string(got[first]) + " want " + std::to_string(want[first])
                    : std::string()));
  REQUIRE(bad == 0);
}

inline void require_close(const std::vector<float>& got, const VecD& want, double rtol,
                          const char* what) {
  REQUIRE(got.size() == want.size());
  require_close(got.data(), want, rtol, what);
}

// Central differences of a scalar function of x, in double.
inline VecD numeric_grad(const std::function<double(const VecD&)>& f, VecD x, double h = 1e-6) {
  VecD g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + h;
    const double up = f(x);
    x[i] = keep - h;
    const double down = f(x);
    x[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

inline double dot(const VecD& a, const VecD& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// --- reference ops -----------------------------------------------------------------------

template <typename T>
void gemm(bool ta, bool tb, int M, int N, int K, T alpha, const T* A, int lda, const T* B, int ldb,
          T beta, T* C, int ldc) {
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      T s = 0;
      for (int k = 0; k < K; ++k) {
        const T a = ta ? A[k * lda + i] : A[i * lda + k];
        const T b = tb ? B[j * ldb + k] : B[k * ldb + j];
        s += a * b;
      }
      C[i * ldc + j] = alpha * s + beta * C[i * ldc + j];
    }
  }
}

template <typename T>
void linear_forward(T* out, const T* inp, const T* w, const T* bias, int N, int IC, int OC) {
  for (int n = 0; n < N; ++n) {
    for (int o = 0; o < OC; ++o) {
      T s = bias ? bias[o] : T(0);
      for (int i = 0; i < IC; ++i) s += inp[n * IC + i] * w[o * IC + i];
      out[n * OC + o] = s;
    }
  }
}

template <typename T>
void linear_backward(T* dinp, T* dw, T* db, const T* dout, const T* inp, const T* w, int N, int IC,
                     int OC) {
  for (int n = 0; n < N; ++n) {
    for (int i = 0; i < IC; ++i) {
      T s = 0;
      for (int o = 0; o < OC; ++o) s += dout[n * OC + o] * w[o * IC + i];
      dinp[n * IC + i] = s;
    }
  }
  for (int o = 0; o < OC; ++o) {
    for (int i = 0; i < IC; ++i) {
      T s = 0;
      for (int n = 0; n < N; ++n) s += dout[n * OC + o] * inp[n * IC + i];
      dw[o * IC + i] += s;
    }
    if (db) {
      for (int n = 0; n < N; ++n) db[o] += dout[n * OC + o];
    }
  }
}

template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* w, const T* b, int N,
                       int C) {
  for (int n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    T m = 0;
    for (int i = 0; i < C; ++i) m += x[i];
    m /= C;
    T var = 0;
    for (int i = 0; i < C; ++i) var += (x[i] - m) * (x[i] - m);
    var /= C;
    const T s = T(1) / std::sqrt(var + T(1e-5));
    for (int i = 0; i < C; ++i) out[n * C + i] = (x[i] - m) * s * w[i] + b[i];
    mean[n] = m;
    rstd[n] = s;
  }
}

template <typename T>
void layernorm_backward(T* dinp, T* dw, T* db, const T* dout, const T* inp, const T* w,
                        const T* mean, const T* rstd, int N, int C) {
  for (int n = 0; n < N; ++n) {
    const T* x = inp + n * C;
    const T* g = dout + n * C;
    T a = 0, bsum = 0;
    for (int i = 0; i < C; ++i) {
      const T xhat = (x[i] - mean[n]) * rstd[n];
      a += g[i] * w[i];
      bsum += g[i] * w[i] * xhat;
      dw[i] += g[i] * xhat;
      db[i] += g[i];
    }
    a /= C;
    bsum /= C;
    for (int i = 0; i < C; ++i) {
      const T xhat = (x[i] - mean[n]) * rstd[n];
      dinp[n * C + i] = rstd[n] * (g[i] * w[i] - a - xhat * bsum);
    }
  }
}

template <typename T>
T gelu(T x) {
  const T k = std::sqrt(T(2) / T(M_PI));
  return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
}

template <typename T>
T gelu_grad(T x) {
  const T k = std::sqrt(T(2) / T(M_PI));
  const T u = k * (x + T(0.044715) * x * x * x);
  const T th = std::tanh(u);
  return T(0.5) * (T(1) + th) +
         T(0.5) * x * (T(1) - th * th) * k * (T(1) + T(3) * T(0.044715) * x * x);
}

// Naive causal attention over nanoGPT's qkv [B,T,3C]; lse [B,NH,T].
template <typename T>
void attention_forward(T* out, T* lse, const T* qkv, int B, int Tn, int C, int NH) {
  const int hs = C / NH;
  const T scale = T(1) / std::sqrt(T(hs));
  std::vector<T> s(static_cast<size_t>(Tn));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < Tn; ++t) {
        const T* q = qkv + (b * Tn + t) * 3 * C + h * hs;
        T m = -1e300;
        for (int j = 0; j <= t; ++j) {
          const T* k = qkv + (b * Tn + j) * 3 * C + C + h * hs;
          T d = 0;
          for (int c = 0; c < hs; ++c) d += q[c] * k[c];
          s[j] = d * scale;
          m = std::max(m, s[j]);
        }
        T sum = 0;
        for (int j = 0; j <= t; ++j) sum += std::exp(s[j] - m);
        const T l = m + std::log(sum);
        lse[(b * NH + h) * Tn + t] = l;
        T* o = out + (b * Tn + t) * C + h * hs;
        for (int c = 0; c < hs; ++c) o[c] = 0;
        for (int j = 0; j <= t; ++j) {
          const T p = std::exp(s[j] - l);
          const T* v = qkv + (b * Tn + j) * 3 * C + 2 * C + h * hs;
          for (int c = 0; c < hs; ++c) o[c] += p * v[c];
        }
      }
    }
  }
}

template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse, int B,
                        int Tn, int C, int NH) {
  const int hs = C / NH;
  const T scale = T(1) / std::sqrt(T(hs));
  std::fill(dqkv, dqkv + static_cast<size_t>(B) * Tn * 3 * C, T(0));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int t = 0; t < Tn; ++t) {
        const T* q = qkv + (b * Tn + t) * 3 * C + h * hs;
        T* dq = dqkv + (b * Tn + t) * 3 * C + h * hs;
        const T* dO = dout + (b * Tn + t) * C + h * hs;
        const T* O = out + (b * Tn + t) * C + h * hs;
        T D = 0;
        for (int c = 0; c < hs; ++c) D += dO[c] * O[c];
        for (int j = 0; j <= t; ++j) {
          const T* k = qkv + (b * Tn + j) * 3 * C + C + h * hs;
          const T* v = k + C;
          T* dk = dqkv + (b * Tn + j) * 3 * C + C + h * hs;
          T* dv = dk + C;
          T sc = 0, dp = 0;
          for (int c = 0; c < hs; ++c) {
            sc += q[c] * k[c];
            dp += dO[c] * v[c];
          }
          const T p = std::exp(sc * scale - lse[(b * NH + h) * Tn + t]);
          const T ds = p * (dp - D);
          for (int c = 0; c < hs; ++c) {
            dv[c] += p * dO[c];
            dq[c] += scale * ds * k[c];
            dk[c] += scale * ds * q[c];
          }
        }
      }
    }
  }
}

template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn,
                       int C) {
  for (int r = 0; r < B * Tn; ++r) {
    for (int c = 0; c < C; ++c) out[r * C + c] = wte[tokens[r] * C + c] + wpe[(r % Tn) * C + c];
  }
}

template <typename T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int B, int Tn,
                        int C) {
  for (int r = 0; r < B * Tn; ++r) {
    for (int c = 0; c < C; ++c) {
      dwte[tokens[r] * C + c] += dout[r * C + c];
      if (dwpe) dwpe[(r % Tn) * C + c] += dout[r * C + c];
    }
  }
}

// Losses [N]; with dx != null, dx (=) and dwte (+=) of dloss * sum(losses).
template <typename T>
void lm_head_cross_entropy(T* losses, T* dx, T* dwte, const T* x, const T* wte,
                           const int32_t* targets, int N, int C, int V, T dloss) {
  std::vector<T> l(static_cast<size_t>(V));
  for (int n = 0; n < N; ++n) {
    if (dx) std::fill(dx + n * C, dx + (n + 1) * C, T(0));
    if (targets[n] < 0) {
      losses[n] = 0;
      continue;
    }
    T m = -1e300;
    for (int v = 0; v < V; ++v) {
      T s = 0;
      for (int c = 0; c < C; ++c) s += x[n * C + c] * wte[v * C + c];
      l[v] = s;
      m = std::max(m, s);
    }
    T sum = 0;
    for (int v = 0; v < V; ++v) sum += std::exp(l[v] - m);
    const T lse = m + std::log(sum);
    losses[n] = lse - l[targets[n]];
    if (!dx) continue;
    for (int v = 0; v < V; ++v) {
      const T g = dloss * (std::exp(l[v] - lse) - (v == targets[n] ? T(1) : T(0)));
      for (int c = 0; c < C; ++c) {
        dx[n * C + c] += g * wte[v * C + c];
        dwte[v * C + c] += g * x[n * C + c];
      }
    }
  }
}

}  // namespace trainctl::ops::ref
