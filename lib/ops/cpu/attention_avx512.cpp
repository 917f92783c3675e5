// AVX-512 kernels for one attention head (see attention_avx512.h for the contract).
//
// Three register-blocked micro-kernels do all the multiply-adds, each keeping a tile of
// up to 6 rows x 64 floats (24 zmm accumulators) in registers:
//   scores:        C[6 x 64 keys] = A[6 x hs] K^T   (S = Q K^T, dP = dO V^T)
//   weighted_sum:  C[6 x hs] = alpha * P[6 x L] X   (O = P V, dQ = scale dS K)
//   transposed:    C[6 x hs] += alpha * P^T Y       (dV += P^T dO, dK += scale dS^T Q)
// K and V are packed once per head into 16-key panels, transposed ([hs][16]), so a score
// tile is 64 lane-parallel dot products; everything else is read in place. Rows only visit
// keys up to the causal diagonal of their tile, rounded up to 16 keys; masked entries of P
// and dS are written as exact zeros so that the products over them add nothing.
#include "ops/cpu/attention_avx512.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "ops/cpu/vec_math.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// GCC 12's AVX-512 intrinsics initialise `undefined` vectors from themselves (the
// reductions and masked operations use them), which -Wmaybe-uninitialized reports inside
// the header once the kernels are inlined: a known false positive, silenced for this file.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define TRAINCTL_AVX512 __attribute__((target("avx512f")))
#define TRAINCTL_HAVE_AVX512_KERNELS 1
#else
#define TRAINCTL_HAVE_AVX512_KERNELS 0
#endif

namespace trainctl::ops::cpu::attention_avx512 {

#if TRAINCTL_HAVE_AVX512_KERNELS

namespace {

constexpr int kPanel = 16;      // keys per packed panel (one zmm of floats)
constexpr int kTileRows = 6;    // rows of a register tile
constexpr int kTilePanels = 4;  // panels (x16 keys) of a score tile
constexpr int kTileVecs = 4;    // zmm vectors (x16 columns of hs) of an output tile
// Query rows per backward block: P and dS of a block are kept so that the transposed
// products (dK, dV) reduce over this many rows per pass over their accumulators.
constexpr int kBackwardBlock = 48;

int round_up(int n, int m) { return (n + m - 1) / m * m; }

float* align64(float* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  return reinterpret_cast<float*>((a + 63) & ~std::uintptr_t{63});
}

template <typename T>
T* row_of(T* base, int i, int ld) {
  return base + static_cast<std::ptrdiff_t>(i) * ld;
}

// dst[t][0, hs) = src[t][0, hs): strided rows made contiguous, so that streaming them does
// not keep landing in the same few L1 sets (qkv rows are 3C floats apart, 3 KiB for C=256).
void copy_rows(const float* src, int ld, int T, int hs, float* dst) {
  for (int t = 0; t < T; ++t) std::copy_n(row_of(src, t, ld), hs, row_of(dst, t, hs));
}

// panels[p][d][l] = k[16p + l][d], zero for keys >= T.
void pack_panels(const float* k, int ld, int T, int hs, float* panels) {
  const int npan = (T + kPanel - 1) / kPanel;
  for (int p = 0; p < npan; ++p) {
    float* dst = panels + static_cast<std::ptrdiff_t>(p) * hs * kPanel;
    for (int l = 0; l < kPanel; ++l) {
      const int j = p * kPanel + l;
      if (j < T) {
        const float* src = row_of(k, j, ld);
        for (int d = 0; d < hs; ++d) dst[d * kPanel + l] = src[d];
      } else {
        for (int d = 0; d < hs; ++d) dst[d * kPanel + l] = 0.0f;
      }
    }
  }
}

TRAINCTL_AVX512 inline __mmask16 first_lanes(int n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}

// fast_exp (vec_math.h) on 16 lanes: the same Cephes polynomial and clamps.
TRAINCTL_AVX512 inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
  x = _mm512_min_ps(x, _mm512_set1_ps(88.37f));
  const __m512 round = _mm512_set1_ps(12582912.0f);
  const __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), round);
  const __m512 n = _mm512_sub_ps(t, round);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(2.12194440e-4f), r);
  const __m512 r2 = _mm512_mul_ps(r, r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, r2, r), _mm512_set1_ps(1.0f));
  const __m512i bits = _mm512_slli_epi32(
      _mm512_add_epi32(_mm512_sub_epi32(_mm512_castps_si512(t), _mm512_castps_si512(round)),
                       _mm512_set1_epi32(127)),
      23);
  return _mm512_mul_ps(y, _mm512_castsi512_ps(bits));
}

// c[r][16p + l] = sum_d a[r][d] * panels[p][d][l] for R rows and NP panels.
template <int R, int NP>
TRAINCTL_AVX512 void scores_kernel(const float* a, int lda, const float* panels, int hs, float* c,
                                   int ldc) {
  __m512 acc[R][NP];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_setzero_ps();
  }
  const std::ptrdiff_t pstride = static_cast<std::ptrdiff_t>(hs) * kPanel;
  for (int d = 0; d < hs; ++d) {
    __m512 kv[NP];
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) kv[p] = _mm512_load_ps(panels + p * pstride + d * kPanel);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(row_of(a, r, lda)[d]);
#pragma GCC unroll 4
      for (int p = 0; p < NP; ++p) acc[r][p] = _mm512_fmadd_ps(av, kv[p], acc[r][p]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int p = 0; p < NP; ++p) _mm512_store_ps(row_of(c, r, ldc) + p * kPanel, acc[r][p]);
  }
}

// out[r][c] = alpha[r] * sum_{j < L} p[r][j] * x[j][c] for R rows and NV vectors of
// columns (the last one masked by `tail`).
template <int R, int NV>
TRAINCTL_AVX512 void weighted_sum_kernel(const float* p, int ldp, int L, const float* x, int ldx,
                                         __mmask16 tail, const float* alpha, float* out, int ldo) {
  __m512 acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  for (int j = 0; j < L; ++j) {
    const float* xr = row_of(x, j, ldx);
    __m512 xv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV - 1; ++v) xv[v] = _mm512_loadu_ps(xr + v * 16);
    xv[NV - 1] = _mm512_maskz_loadu_ps(tail, xr + (NV - 1) * 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 pv = _mm512_set1_ps(row_of(p, r, ldp)[j]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(pv, xv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512 s = _mm512_set1_ps(alpha[r]);
    float* o = row_of(out, r, ldo);
#pragma GCC unroll 4
    for (int v = 0; v < NV - 1; ++v) _mm512_storeu_ps(o + v * 16, _mm512_mul_ps(acc[r][v], s));
    _mm512_mask_storeu_ps(o + (NV - 1) * 16, tail, _mm512_mul_ps(acc[r][NV - 1], s));
  }
}

// out[r][c] += alpha * sum_{i0 <= i < i1} p[i][r] * y[i][c] for R rows of out and NV
// vectors of columns (the last one masked by `tail`).
template <int R, int NV>
TRAINCTL_AVX512 void transposed_sum_kernel(const float* p, int ldp, int i0, int i1, const float* y,
                                           int ldy, __mmask16 tail, float alpha, float* out,
                                           int ldo) {
  __m512 acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  for (int i = i0; i < i1; ++i) {
    const float* yr = row_of(y, i, ldy);
    const float* pr = row_of(p, i, ldp);
    __m512 yv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV - 1; ++v) yv[v] = _mm512_loadu_ps(yr + v * 16);
    yv[NV - 1] = _mm512_maskz_loadu_ps(tail, yr + (NV - 1) * 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 pv = _mm512_set1_ps(pr[r]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(pv, yv[v], acc[r][v]);
    }
  }
  const __m512 s = _mm512_set1_ps(alpha);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* o = row_of(out, r, ldo);
#pragma GCC unroll 4
    for (int v = 0; v < NV - 1; ++v) {
      _mm512_storeu_ps(o + v * 16, _mm512_fmadd_ps(acc[r][v], s, _mm512_loadu_ps(o + v * 16)));
    }
    float* last = o + (NV - 1) * 16;
    _mm512_mask_storeu_ps(last, tail,
                          _mm512_fmadd_ps(acc[r][NV - 1], s, _mm512_maskz_loadu_ps(tail, last)));
  }
}

// Tables of the kernels by (rows - 1, panels or vectors - 1), so ragged edges run the same
// code with smaller tiles.
using ScoresFn = void (*)(const float*, int, const float*, int, float*, int);
using WeightedFn = void (*)(const float*, int, int, const float*, int, __mmask16, const float*,
                            float*, int);
using TransposedFn = void (*)(const float*, int, int, int, const float*, int, __mmask16, float,
                              float*, int);

template <int R>
constexpr std::array<ScoresFn, kTilePanels> scores_row() {
  return {&scores_kernel<R, 1>, &scores_kernel<R, 2>, &scores_kernel<R, 3>, &scores_kernel<R, 4>};
}
template <int R>
constexpr std::array<WeightedFn, kTileVecs> weighted_row() {
  return {&weighted_sum_kernel<R, 1>, &weighted_sum_kernel<R, 2>, &weighted_sum_kernel<R, 3>,
          &weighted_sum_kernel<R, 4>};
}
template <int R>
constexpr std::array<TransposedFn, kTileVecs> transposed_row() {
  return {&transposed_sum_kernel<R, 1>, &transposed_sum_kernel<R, 2>, &transposed_sum_kernel<R, 3>,
          &transposed_sum_kernel<R, 4>};
}

constexpr std::array<std::array<ScoresFn, kTilePanels>, kTileRows> kScores = {
    scores_row<1>(), scores_row<2>(), scores_row<3>(),
    scores_row<4>(), scores_row<5>(), scores_row<6>()};
constexpr std::array<std::array<WeightedFn, kTileVecs>, kTileRows> kWeighted = {
    weighted_row<1>(), weighted_row<2>(), weighted_row<3>(),
    weighted_row<4>(), weighted_row<5>(), weighted_row<6>()};
constexpr std::array<std::array<TransposedFn, kTileVecs>, kTileRows> kTransposed = {
    transposed_row<1>(), transposed_row<2>(), transposed_row<3>(),
    transposed_row<4>(), transposed_row<5>(), transposed_row<6>()};

// c[r][0 .. 16 npan) = a[r] . key j, for R <= kTileRows rows of a.
void scores(const float* a, int lda, int R, const float* panels, int npan, int hs, float* c,
            int ldc) {
  for (int p0 = 0; p0 < npan; p0 += kTilePanels) {
    const int np = std::min(kTilePanels, npan - p0);
    kScores[R - 1][np - 1](a, lda, panels + static_cast<std::ptrdiff_t>(p0) * hs * kPanel, hs,
                           c + p0 * kPanel, ldc);
  }
}

// Column chunks of at most 64 (kTileVecs zmm) of an hs-wide output.
struct Chunk {
  int c0, nv;
  __mmask16 tail;
};

template <typename Fn>
void for_each_chunk(int hs, Fn&& fn) {
  for (int c0 = 0; c0 < hs; c0 += kTileVecs * 16) {
    const int cw = std::min(kTileVecs * 16, hs - c0);
    const int nv = (cw + 15) / 16;
    const int last = cw - 16 * (nv - 1);
    fn(Chunk{c0, nv, static_cast<__mmask16>(last >= 16 ? 0xFFFFu : (1u << last) - 1u)});
  }
}

void weighted_sum(const float* p, int ldp, int R, int L, const float* x, int ldx, int hs,
                  const float* alpha, float* out, int ldo) {
  for_each_chunk(hs, [&](const Chunk& ch) {
    kWeighted[R - 1][ch.nv - 1](p, ldp, L, x + ch.c0, ldx, ch.tail, alpha, out + ch.c0, ldo);
  });
}

void transposed_sum(const float* p, int ldp, int R, int i0, int i1, const float* y, int ldy, int hs,
                    float alpha, float* out, int ldo) {
  for_each_chunk(hs, [&](const Chunk& ch) {
    kTransposed[R - 1][ch.nv - 1](p, ldp, i0, i1, y + ch.c0, ldy, ch.tail, alpha, out + ch.c0, ldo);
  });
}

// Row of raw scores s[0, width) -> unnormalised probabilities exp(scale (s - max)) on the
// first `valid` entries, exact zeros after. Returns the log-sum-exp; *inv_sum = 1 / sum.
TRAINCTL_AVX512 float softmax_row(float* s, int valid, int width, float scale, float* inv_sum) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int j = 0; j < valid; j += 16) {
    mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(mx, first_lanes(valid - j), s + j));
  }
  const float m = _mm512_reduce_max_ps(mx);
  const __m512 vscale = _mm512_set1_ps(scale);
  const __m512 shift = _mm512_set1_ps(-scale * m);
  __m512 sum = _mm512_setzero_ps();
  int j = 0;
  for (; j < valid; j += 16) {
    const __mmask16 keep = first_lanes(valid - j);
    const __m512 e = _mm512_maskz_mov_ps(
        keep, exp16(_mm512_fmadd_ps(_mm512_maskz_load_ps(keep, s + j), vscale, shift)));
    sum = _mm512_add_ps(sum, e);
    _mm512_store_ps(s + j, e);
  }
  for (; j < width; j += 16) _mm512_store_ps(s + j, _mm512_setzero_ps());
  const float total = _mm512_reduce_add_ps(sum);
  *inv_sum = 1.0f / total;
  return scale * m + std::log(total);
}

// p[j] = exp(scale s[j] - lse) for j < valid, 0 up to width (p may alias s).
TRAINCTL_AVX512 void probabilities_row(float* s, int valid, int width, float scale, float lse) {
  const __m512 vscale = _mm512_set1_ps(scale);
  const __m512 shift = _mm512_set1_ps(-lse);
  int j = 0;
  for (; j < valid; j += 16) {
    const __mmask16 keep = first_lanes(valid - j);
    const __m512 e = _mm512_maskz_mov_ps(
        keep, exp16(_mm512_fmadd_ps(_mm512_maskz_load_ps(keep, s + j), vscale, shift)));
    _mm512_store_ps(s + j, e);
  }
  for (; j < width; j += 16) _mm512_store_ps(s + j, _mm512_setzero_ps());
}

// ds[j] = p[j] (dp[j] - d) for j < valid, 0 up to width (ds may alias dp).
TRAINCTL_AVX512 void score_grad_row(float* ds, const float* p, int valid, int width, float d) {
  const __m512 vd = _mm512_set1_ps(d);
  int j = 0;
  for (; j < valid; j += 16) {
    const __mmask16 keep = first_lanes(valid - j);
    const __m512 g = _mm512_mul_ps(_mm512_maskz_load_ps(keep, p + j),
                                   _mm512_sub_ps(_mm512_maskz_load_ps(keep, ds + j), vd));
    _mm512_store_ps(ds + j, g);
  }
  for (; j < width; j += 16) _mm512_store_ps(ds + j, _mm512_setzero_ps());
}

}  // namespace

bool supported() { return __builtin_cpu_supports("avx512f") != 0; }

size_t forward_scratch_floats(int T, int hs) {
  const size_t tpad = static_cast<size_t>(round_up(T, kPanel));
  return 2 * tpad * hs + kTileRows * tpad + 16;
}

size_t backward_scratch_floats(int T, int hs) {
  const size_t tpad = static_cast<size_t>(round_up(T, kPanel));
  return 6 * tpad * hs + 2 * kBackwardBlock * tpad + tpad + 16;
}

void forward_head(float* out, int ldo, float* lse, const float* q, const float* k, const float* v,
                  int ld, int T, int hs, float scale, float* scratch) {
  const int tpad = round_up(T, kPanel);
  float* kpan = align64(scratch);
  float* vrows = kpan + static_cast<std::ptrdiff_t>(tpad) * hs;
  float* s = vrows + static_cast<std::ptrdiff_t>(tpad) * hs;
  pack_panels(k, ld, T, hs, kpan);
  copy_rows(v, ld, T, hs, vrows);
  float inv_sum[kTileRows];
  for (int t0 = 0; t0 < T; t0 += kTileRows) {
    const int R = std::min(kTileRows, T - t0);
    const int npan = (t0 + R + kPanel - 1) / kPanel;  // keys 0 .. t0+R-1, whole panels
    scores(row_of(q, t0, ld), ld, R, kpan, npan, hs, s, tpad);
    for (int r = 0; r < R; ++r) {
      lse[t0 + r] = softmax_row(row_of(s, r, tpad), t0 + r + 1, npan * kPanel, scale, &inv_sum[r]);
    }
    weighted_sum(s, tpad, R, t0 + R, vrows, hs, hs, inv_sum, row_of(out, t0, ldo), ldo);
  }
}

void backward_head(float* dq, float* dk, float* dv, const float* dout, const float* out, int ldo,
                   const float* q, const float* k, const float* v, int ld, const float* lse, int T,
                   int hs, float scale, float* scratch) {
  const int tpad = round_up(T, kPanel);
  const std::ptrdiff_t head = static_cast<std::ptrdiff_t>(tpad) * hs;
  float* kpan = align64(scratch);
  float* vpan = kpan + head;
  float* qrows = vpan + head;
  float* krows = qrows + head;
  float* dkrows = krows + head;
  float* dvrows = dkrows + head;
  float* p = dvrows + head;
  float* ds = p + static_cast<std::ptrdiff_t>(kBackwardBlock) * tpad;
  float* drow = ds + static_cast<std::ptrdiff_t>(kBackwardBlock) * tpad;
  pack_panels(k, ld, T, hs, kpan);
  pack_panels(v, ld, T, hs, vpan);
  copy_rows(q, ld, T, hs, qrows);
  copy_rows(k, ld, T, hs, krows);
  std::fill_n(dkrows, head, 0.0f);
  std::fill_n(dvrows, head, 0.0f);
  // D[t] = dO[t] . O[t]: the softmax Jacobian's row term, dS = P (dP - D).
  for (int t = 0; t < T; ++t) drow[t] = dot_of(row_of(dout, t, ldo), row_of(out, t, ldo), hs);
  const std::array<float, kTileRows> scales = {scale, scale, scale, scale, scale, scale};
  for (int q0 = 0; q0 < T; q0 += kBackwardBlock) {
    const int nb = std::min(kBackwardBlock, T - q0);
    const int keys = q0 + nb;  // keys any row of the block sees
    const int width = round_up(keys, kPanel);
    for (int r0 = 0; r0 < nb; r0 += kTileRows) {
      const int R = std::min(kTileRows, nb - r0);
      const int t0 = q0 + r0;
      const int npan = (t0 + R + kPanel - 1) / kPanel;
      float* pt = row_of(p, r0, tpad);
      float* dst = row_of(ds, r0, tpad);
      scores(row_of(qrows, t0, hs), hs, R, kpan, npan, hs, pt, tpad);
      scores(row_of(dout, t0, ldo), ldo, R, vpan, npan, hs, dst, tpad);
      for (int r = 0; r < R; ++r) {
        const int t = t0 + r;
        probabilities_row(row_of(pt, r, tpad), t + 1, width, scale, lse[t]);
        score_grad_row(row_of(dst, r, tpad), row_of(pt, r, tpad), t + 1, width, drow[t]);
      }
      // dQ rows of this tile are complete: they only need this tile's dS.
      weighted_sum(dst, tpad, R, t0 + R, krows, hs, hs, scales.data(), row_of(dq, t0, ld), ld);
    }
    // dV += P^T dO and dK += scale dS^T Q over the block; key j only gets rows t >= j.
    for (int j0 = 0; j0 < keys; j0 += kTileRows) {
      const int R = std::min(kTileRows, keys - j0);
      const int i0 = std::max(0, j0 - q0);
      transposed_sum(p + j0, tpad, R, i0, nb, row_of(dout, q0, ldo), ldo, hs, 1.0f,
                     row_of(dvrows, j0, hs), hs);
      transposed_sum(ds + j0, tpad, R, i0, nb, row_of(qrows, q0, hs), hs, hs, scale,
                     row_of(dkrows, j0, hs), hs);
    }
  }
  for (int t = 0; t < T; ++t) {
    std::copy_n(row_of(dkrows, t, hs), hs, row_of(dk, t, ld));
    std::copy_n(row_of(dvrows, t, hs), hs, row_of(dv, t, ld));
  }
}

#else  // not x86-64 with GCC or Clang: the kernels do not exist, supported() says so

bool supported() { return false; }
size_t forward_scratch_floats(int, int) { return 0; }
size_t backward_scratch_floats(int, int) { return 0; }
void forward_head(float*, int, float*, const float*, const float*, const float*, int, int, int,
                  float, float*) {
  throw std::logic_error("attention_avx512::forward_head called although supported() is false");
}
void backward_head(float*, float*, float*, const float*, const float*, int, const float*,
                   const float*, const float*, int, const float*, int, int, float, float*) {
  throw std::logic_error("attention_avx512::backward_head called although supported() is false");
}

#endif

}  // namespace trainctl::ops::cpu::attention_avx512
