// Register-blocked causal attention of one (batch, head) pair, for AVX2 and AVX-512 (the
// vector operations come from simd.h; cpu_kernels.h has the contract).
//
// The per-head products are small (T x T x hs, hs = 64 typically), where a general sgemm
// spends much of its time on call overhead and packing and cannot skip the masked half at
// a fine grain. Three micro-kernels do all the multiply-adds, each keeping a tile of up to
// 6 rows in registers (6 x 64 floats in 24 zmm, or 6 x 16 in 12 ymm):
//   scores:        C[6 x keys] = A[6 x hs] K^T   (S = Q K^T, dP = dO V^T)
//   weighted_sum:  C[6 x hs] = alpha * P[6 x L] X   (O = P V, dQ = scale dS K)
//   transposed:    C[6 x hs] += alpha * P^T Y       (dV += P^T dO, dK += scale dS^T Q)
// K and V are packed once per head into 16-key panels, transposed ([hs][16]), so a score
// tile is lane-parallel dot products; everything else is read in place. Rows only visit
// keys up to the causal diagonal of their tile, rounded up to 16 keys; masked entries of P
// and dS are written as exact zeros so that the products over them add nothing.
//
// Each output element is summed in the same order on both instruction sets, and the row
// sums of the softmax go through the same 16 lanes: AVX2 and AVX-512 agree bitwise.
#include <cmath>
#include <cstdint>
#include <utility>

#include "ops/cpu/kernels/parts.h"
#include "ops/cpu/kernels/simd.h"
#include "ops/cpu/vec_math.h"

namespace trainctl::ops::cpu::TRAINCTL_ISA {

namespace {

using simd::kWidth;
using simd::V;
using Mask = simd::Mask;

constexpr int kPanel = 16;                         // keys per packed panel
constexpr int kPanelVecs = kPanel / kWidth;        // vectors per panel row
constexpr int kTileRows = 6;                       // rows of a register tile
constexpr int kTilePanels = kWidth == 16 ? 4 : 1;  // panels of a score tile
constexpr int kTileVecs = kWidth == 16 ? 4 : 2;    // vectors of an output tile's row
static_assert(kPanel % kWidth == 0, "a panel is whole vectors");
// Query rows per backward block: P and dS of a block are kept so that the transposed
// products (dK, dV) reduce over this many rows per pass over their accumulators.
constexpr int kBackwardBlock = 48;

// Own helpers rather than <algorithm>: a template from a shared header instantiated here
// would be compiled with this file's instruction set, and the linker could pick that copy
// for code that must run on any CPU (tests/cpu_isa/check_symbols.sh guards this).
inline int min_int(int a, int b) { return a < b ? a : b; }
inline int max_int(int a, int b) { return a > b ? a : b; }
inline int round_up(int n, int m) { return (n + m - 1) / m * m; }

inline float* align64(float* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  return reinterpret_cast<float*>((a + 63) & ~std::uintptr_t{63});
}

template <typename T>
inline T* row_of(T* base, int i, int ld) {
  return base + static_cast<std::ptrdiff_t>(i) * ld;
}

inline void copy_floats(const float* src, int n, float* dst) {
  for (int i = 0; i < n; ++i) dst[i] = src[i];
}

// dst[t][0, hs) = src[t][0, hs): strided rows made contiguous, so that streaming them does
// not keep landing in the same few L1 sets (qkv rows are 3C floats apart, 3 KiB for C=256).
void copy_rows(const float* src, int ld, int T, int hs, float* dst) {
  for (int t = 0; t < T; ++t) copy_floats(row_of(src, t, ld), hs, row_of(dst, t, hs));
}

// panels[p][d][l] = k[16p + l][d], zero for keys >= T.
void pack_panels(const float* k, int ld, int T, int hs, float* panels) {
  const int npan = (T + kPanel - 1) / kPanel;
  for (int p = 0; p < npan; ++p) {
    float* dst = panels + static_cast<std::ptrdiff_t>(p) * hs * kPanel;
    for (int l = 0; l < kPanel; ++l) {
      const int j = p * kPanel + l;
      const float* src = j < T ? row_of(k, j, ld) : nullptr;
      for (int d = 0; d < hs; ++d) dst[d * kPanel + l] = src != nullptr ? src[d] : 0.0f;
    }
  }
}

// c[r][16p + l] = sum_d a[r][d] * panels[p][d][l] for R rows and NP panels.
template <int R, int NP>
void scores_kernel(const float* a, int lda, const float* panels, int hs, float* c, int ldc) {
  constexpr int NV = NP * kPanelVecs;
  V acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = simd::zero();
  }
  const std::ptrdiff_t pstride = static_cast<std::ptrdiff_t>(hs) * kPanel;
  for (int d = 0; d < hs; ++d) {
    V kv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      kv[v] =
          simd::load(panels + (v / kPanelVecs) * pstride + d * kPanel + (v % kPanelVecs) * kWidth);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const V av = simd::set1(row_of(a, r, lda)[d]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = simd::fmadd(av, kv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) simd::store(row_of(c, r, ldc) + v * kWidth, acc[r][v]);
  }
}

// out[r][c] = alpha[r] * sum_{j < L} p[r][j] * x[j][c] for R rows and NV vectors of
// columns (the last one holds `tail` columns).
template <int R, int NV>
void weighted_sum_kernel(const float* p, int ldp, int L, const float* x, int ldx, int tail_cols,
                         const float* alpha, float* out, int ldo) {
  const Mask tail = simd::first_lanes(tail_cols);
  V acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = simd::zero();
  }
  for (int j = 0; j < L; ++j) {
    const float* xr = row_of(x, j, ldx);
    V xv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV - 1; ++v) xv[v] = simd::loadu(xr + v * kWidth);
    xv[NV - 1] = simd::load_first(tail, xr + (NV - 1) * kWidth);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const V pv = simd::set1(row_of(p, r, ldp)[j]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = simd::fmadd(pv, xv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const V s = simd::set1(alpha[r]);
    float* o = row_of(out, r, ldo);
#pragma GCC unroll 4
    for (int v = 0; v < NV - 1; ++v) simd::storeu(o + v * kWidth, simd::mul(acc[r][v], s));
    simd::store_first(o + (NV - 1) * kWidth, tail, simd::mul(acc[r][NV - 1], s));
  }
}

// out[r][c] += alpha * sum_{i0 <= i < i1} p[i][r] * y[i][c] for R rows of out and NV
// vectors of columns (the last one holds `tail` columns).
template <int R, int NV>
void transposed_sum_kernel(const float* p, int ldp, int i0, int i1, const float* y, int ldy,
                           int tail_cols, float alpha, float* out, int ldo) {
  const Mask tail = simd::first_lanes(tail_cols);
  V acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = simd::zero();
  }
  for (int i = i0; i < i1; ++i) {
    const float* yr = row_of(y, i, ldy);
    const float* pr = row_of(p, i, ldp);
    V yv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV - 1; ++v) yv[v] = simd::loadu(yr + v * kWidth);
    yv[NV - 1] = simd::load_first(tail, yr + (NV - 1) * kWidth);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const V pv = simd::set1(pr[r]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = simd::fmadd(pv, yv[v], acc[r][v]);
    }
  }
  const V s = simd::set1(alpha);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* o = row_of(out, r, ldo);
#pragma GCC unroll 4
    for (int v = 0; v < NV - 1; ++v) {
      simd::storeu(o + v * kWidth, simd::fmadd(acc[r][v], s, simd::loadu(o + v * kWidth)));
    }
    float* last = o + (NV - 1) * kWidth;
    simd::store_first(last, tail, simd::fmadd(acc[r][NV - 1], s, simd::load_first(tail, last)));
  }
}

// Tables of the kernels by (rows - 1, panels or vectors - 1), so ragged edges run the same
// code with smaller tiles.
using ScoresFn = void (*)(const float*, int, const float*, int, float*, int);
using WeightedFn = void (*)(const float*, int, int, const float*, int, int, const float*, float*,
                            int);
using TransposedFn = void (*)(const float*, int, int, int, const float*, int, int, float, float*,
                              int);

// Plain aggregates rather than std::array: no member function of a shared template gets
// compiled with this file's instruction set (see min_int).
template <typename Fn, int N>
struct Row {
  Fn at[N];
};

template <int R, int... N>
constexpr Row<ScoresFn, sizeof...(N)> scores_row(std::integer_sequence<int, N...>) {
  return {{&scores_kernel<R, N + 1>...}};
}
template <int R, int... N>
constexpr Row<WeightedFn, sizeof...(N)> weighted_row(std::integer_sequence<int, N...>) {
  return {{&weighted_sum_kernel<R, N + 1>...}};
}
template <int R, int... N>
constexpr Row<TransposedFn, sizeof...(N)> transposed_row(std::integer_sequence<int, N...>) {
  return {{&transposed_sum_kernel<R, N + 1>...}};
}
template <int... R>
constexpr Row<Row<ScoresFn, kTilePanels>, kTileRows> scores_table(
    std::integer_sequence<int, R...>) {
  return {{scores_row<R + 1>(std::make_integer_sequence<int, kTilePanels>{})...}};
}
template <int... R>
constexpr Row<Row<WeightedFn, kTileVecs>, kTileRows> weighted_table(
    std::integer_sequence<int, R...>) {
  return {{weighted_row<R + 1>(std::make_integer_sequence<int, kTileVecs>{})...}};
}
template <int... R>
constexpr Row<Row<TransposedFn, kTileVecs>, kTileRows> transposed_table(
    std::integer_sequence<int, R...>) {
  return {{transposed_row<R + 1>(std::make_integer_sequence<int, kTileVecs>{})...}};
}

constexpr auto kScores = scores_table(std::make_integer_sequence<int, kTileRows>{});
constexpr auto kWeighted = weighted_table(std::make_integer_sequence<int, kTileRows>{});
constexpr auto kTransposed = transposed_table(std::make_integer_sequence<int, kTileRows>{});

// c[r][0 .. 16 npan) = a[r] . key j, for R <= kTileRows rows of a.
void scores(const float* a, int lda, int R, const float* panels, int npan, int hs, float* c,
            int ldc) {
  for (int p0 = 0; p0 < npan; p0 += kTilePanels) {
    const int np = min_int(kTilePanels, npan - p0);
    kScores.at[R - 1].at[np - 1](a, lda, panels + static_cast<std::ptrdiff_t>(p0) * hs * kPanel, hs,
                                 c + p0 * kPanel, ldc);
  }
}

// Column chunks of at most kTileVecs vectors of an hs-wide output.
struct Chunk {
  int c0, nv, tail;  // first column, vectors, columns of the last vector
};

template <typename Fn>
void for_each_chunk(int hs, Fn&& fn) {
  for (int c0 = 0; c0 < hs; c0 += kTileVecs * kWidth) {
    const int cw = min_int(kTileVecs * kWidth, hs - c0);
    const int nv = (cw + kWidth - 1) / kWidth;
    fn(Chunk{c0, nv, cw - kWidth * (nv - 1)});
  }
}

void weighted_sum(const float* p, int ldp, int R, int L, const float* x, int ldx, int hs,
                  const float* alpha, float* out, int ldo) {
  for_each_chunk(hs, [&](const Chunk& ch) {
    kWeighted.at[R - 1].at[ch.nv - 1](p, ldp, L, x + ch.c0, ldx, ch.tail, alpha, out + ch.c0, ldo);
  });
}

void transposed_sum(const float* p, int ldp, int R, int i0, int i1, const float* y, int ldy, int hs,
                    float alpha, float* out, int ldo) {
  for_each_chunk(hs, [&](const Chunk& ch) {
    kTransposed.at[R - 1].at[ch.nv - 1](p, ldp, i0, i1, y + ch.c0, ldy, ch.tail, alpha, out + ch.c0,
                                        ldo);
  });
}

// For j < valid: s[j] = f(s[j]) where f maps a vector of raw entries (masked lanes read
// as 0) and the result is kept only in valid lanes; exact zeros from `valid` to `width`
// (a multiple of kPanel). `sum` gets the kept values in 16 lanes per panel.
template <typename Fn>
void map_row(float* s, int valid, int width, Fn&& f, float* lanes16) {
  V sum[kPanelVecs];
  for (int u = 0; u < kPanelVecs; ++u) sum[u] = simd::zero();
  int j = 0;
  for (; j < valid; j += kPanel) {
#pragma GCC unroll 2
    for (int u = 0; u < kPanelVecs; ++u) {
      float* at = s + j + u * kWidth;
      const Mask keep = simd::first_lanes(valid - j - u * kWidth);
      const V e = simd::keep_first(keep, f(simd::load_first(keep, at), j + u * kWidth));
      sum[u] = simd::add(sum[u], e);
      simd::store(at, e);
    }
  }
  for (; j < width; j += kWidth) simd::store(s + j, simd::zero());
  if (lanes16 != nullptr) {
    for (int u = 0; u < kPanelVecs; ++u) simd::storeu(lanes16 + u * kWidth, sum[u]);
  }
}

// Row of raw scores s[0, width) -> unnormalised probabilities exp(scale (s - max)) on the
// first `valid` entries, exact zeros after. Returns the log-sum-exp; *inv_sum = 1 / sum.
float softmax_row(float* s, int valid, int width, float scale, float* inv_sum) {
  V mx = simd::set1(-INFINITY);
  for (int j = 0; j < valid; j += kWidth) {
    mx = simd::max(mx, simd::load_first_or(simd::first_lanes(valid - j), s + j, mx));
  }
  alignas(64) float lanes[kLanes];
  simd::storeu(lanes, mx);
  float m = lanes[0];
  for (int k = 1; k < kWidth; ++k) m = lanes[k] > m ? lanes[k] : m;
  const V vscale = simd::set1(scale);
  const V shift = simd::set1(-scale * m);
  map_row(
      s, valid, width, [&](V x, int) { return simd::exp<true>(simd::fmadd(x, vscale, shift)); },
      lanes);
  const float total = reduce_lanes(lanes);
  *inv_sum = 1.0f / total;
  return scale * m + __builtin_logf(total);
}

// p[j] = exp(scale s[j] - lse) for j < valid, 0 up to width (p may alias s).
void probabilities_row(float* s, int valid, int width, float scale, float lse) {
  const V vscale = simd::set1(scale);
  const V shift = simd::set1(-lse);
  map_row(
      s, valid, width, [&](V x, int) { return simd::exp<true>(simd::fmadd(x, vscale, shift)); },
      nullptr);
}

// ds[j] = p[j] (dp[j] - d) for j < valid, 0 up to width (ds may alias dp).
void score_grad_row(float* ds, const float* p, int valid, int width, float d) {
  const V vd = simd::set1(d);
  map_row(
      ds, valid, width,
      [&](V x, int j) {
        return simd::mul(simd::load_first(simd::first_lanes(valid - j), p + j), simd::sub(x, vd));
      },
      nullptr);
}

}  // namespace

size_t attention_forward_scratch_floats(int T, int hs) {
  const size_t tpad = static_cast<size_t>(round_up(T, kPanel));
  return 2 * tpad * hs + kTileRows * tpad + 16;
}

size_t attention_backward_scratch_floats(int T, int hs) {
  const size_t tpad = static_cast<size_t>(round_up(T, kPanel));
  return 6 * tpad * hs + 2 * kBackwardBlock * tpad + tpad + 16;
}

void attention_forward_head(float* out, int ldo, float* lse, const float* q, const float* k,
                            const float* v, int ld, int T, int hs, float scale, float* scratch) {
  const int tpad = round_up(T, kPanel);
  float* kpan = align64(scratch);
  float* vrows = kpan + static_cast<std::ptrdiff_t>(tpad) * hs;
  float* s = vrows + static_cast<std::ptrdiff_t>(tpad) * hs;
  pack_panels(k, ld, T, hs, kpan);
  copy_rows(v, ld, T, hs, vrows);
  float inv_sum[kTileRows];
  for (int t0 = 0; t0 < T; t0 += kTileRows) {
    const int R = min_int(kTileRows, T - t0);
    const int npan = (t0 + R + kPanel - 1) / kPanel;  // keys 0 .. t0+R-1, whole panels
    scores(row_of(q, t0, ld), ld, R, kpan, npan, hs, s, tpad);
    for (int r = 0; r < R; ++r) {
      lse[t0 + r] = softmax_row(row_of(s, r, tpad), t0 + r + 1, npan * kPanel, scale, &inv_sum[r]);
    }
    weighted_sum(s, tpad, R, t0 + R, vrows, hs, hs, inv_sum, row_of(out, t0, ldo), ldo);
  }
}

void attention_backward_head(float* dq, float* dk, float* dv, const float* dout, const float* out,
                             int ldo, const float* q, const float* k, const float* v, int ld,
                             const float* lse, int T, int hs, float scale, float* scratch) {
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
  for (std::ptrdiff_t i = 0; i < 2 * head; ++i) dkrows[i] = 0.0f;  // dkrows and dvrows
  // D[t] = dO[t] . O[t]: the softmax Jacobian's row term, dS = P (dP - D).
  for (int t = 0; t < T; ++t) drow[t] = dot_of(row_of(dout, t, ldo), row_of(out, t, ldo), hs);
  float scales[kTileRows];
  for (float& s : scales) s = scale;
  for (int q0 = 0; q0 < T; q0 += kBackwardBlock) {
    const int nb = min_int(kBackwardBlock, T - q0);
    const int keys = q0 + nb;  // keys any row of the block sees
    const int width = round_up(keys, kPanel);
    for (int r0 = 0; r0 < nb; r0 += kTileRows) {
      const int R = min_int(kTileRows, nb - r0);
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
      weighted_sum(dst, tpad, R, t0 + R, krows, hs, hs, scales, row_of(dq, t0, ld), ld);
    }
    // dV += P^T dO and dK += scale dS^T Q over the block; key j only gets rows t >= j.
    for (int j0 = 0; j0 < keys; j0 += kTileRows) {
      const int R = min_int(kTileRows, keys - j0);
      const int i0 = max_int(0, j0 - q0);
      transposed_sum(p + j0, tpad, R, i0, nb, row_of(dout, q0, ldo), ldo, hs, 1.0f,
                     row_of(dvrows, j0, hs), hs);
      transposed_sum(ds + j0, tpad, R, i0, nb, row_of(qrows, q0, hs), hs, hs, scale,
                     row_of(dkrows, j0, hs), hs);
    }
  }
  for (int t = 0; t < T; ++t) {
    copy_floats(row_of(dkrows, t, hs), hs, row_of(dk, t, ld));
    copy_floats(row_of(dvrows, t, hs), hs, row_of(dv, t, ld));
  }
}

}  // namespace trainctl::ops::cpu::TRAINCTL_ISA
