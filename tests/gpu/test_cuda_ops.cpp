// Every CUDA op against the CPU backend on random inputs. Tolerances (fp32 throughout, TF32
// off): elementwise ops 1e-6 relative (the GPU may fuse multiply-adds, and uses expf where
// the CPU uses a polynomial exp); reductions and products 1e-4 relative + 1e-5 absolute
// (different summation orders); 16-bit casts bit-exact (shared conversion code).
// Mixed-precision products (matmul = bf16 / fp16): see the comment above their tests.
#include <cstring>

#include "gpu/gpu_support.h"
#include "ops/shared_math.h"

using namespace trainctl;
using namespace trainctl::gpu_test;

TEST_CASE("alloc is zero-filled, reuses freed blocks and reports its peak", "[gpu][memory]") {
  Backends b;
  const size_t before = device::peak_device_bytes(*b.cuda);
  void* p = b.cuda->alloc(3 << 20);
  CHECK(device::peak_device_bytes(*b.cuda) >= before + (3 << 20));
  std::vector<float> host(1000, 1.0f);
  b.cuda->copy(host.data(), static_cast<float*>(p), host.size());
  for (float x : host) REQUIRE(x == 0.0f);
  b.cuda->free(p);
  void* q = b.cuda->alloc(3 << 20);
  CHECK(q == p);  // the cached block comes back
  b.cuda->free(q);
}

TEST_CASE("zero, copy, add, add_inplace, scale", "[gpu][elementwise]") {
  Backends b;
  const size_t n = 100003;
  const auto x = random_vec(n, 1), y = random_vec(n, 2);
  DeviceVec dx(*b.cuda, x), dy(*b.cuda, y), out(*b.cuda, n);
  b.cuda->add(out.get(), dx.get(), dy.get(), n);
  std::vector<float> want(n);
  b.cpu->add(want.data(), x.data(), y.data(), n);
  check_close(out.download(), want, 0, 0, "add");
  b.cuda->add_inplace(out.get(), dx.get(), n);
  b.cpu->add_inplace(want.data(), x.data(), n);
  check_close(out.download(), want, 0, 0, "add_inplace");
  b.cuda->scale(out.get(), 0.37f, n);
  b.cpu->scale(want.data(), 0.37f, n);
  check_close(out.download(), want, 0, 0, "scale");
  b.cuda->copy(out.get(), dx.get(), n);
  check_close(out.download(), x, 0, 0, "copy");
  b.cuda->zero(out.get() + 5, n - 10);
  const auto z = out.download();
  CHECK(z[4] == x[4]);
  CHECK(z[5] == 0.0f);
  CHECK(z[n - 6] == 0.0f);
  CHECK(z[n - 5] == x[n - 5]);
}

TEST_CASE("gelu forward and backward", "[gpu][elementwise]") {
  Backends b;
  const size_t n = 65537;
  const auto x = random_vec(n, 3, -6, 6), g = random_vec(n, 4);
  DeviceVec dx(*b.cuda, x), dg(*b.cuda, g), out(*b.cuda, n);
  std::vector<float> want(n);
  b.cuda->gelu_forward(out.get(), dx.get(), n);
  b.cpu->gelu_forward(want.data(), x.data(), n);
  check_close(out.download(), want, 1e-5, 1e-6, "gelu_forward");
  b.cuda->gelu_backward(out.get(), dx.get(), dg.get(), n);
  b.cpu->gelu_backward(want.data(), x.data(), g.data(), n);
  check_close(out.download(), want, 1e-5, 1e-6, "gelu_backward");
}

TEST_CASE("gemm in every transpose combination, with leading dimensions and beta", "[gpu][gemm]") {
  Backends b;
  struct Case {
    bool ta, tb;
    int M, N, K, pad;
    float alpha, beta;
  };
  for (const Case c :
       {Case{false, false, 64, 48, 32, 0, 1.0f, 0.0f}, Case{false, true, 37, 51, 29, 3, 0.5f, 1.0f},
        Case{true, false, 128, 96, 300, 0, 1.0f, 1.0f}, Case{true, true, 7, 5, 3, 2, -2.0f, 0.25f},
        Case{false, false, 1, 1, 1, 0, 1.0f, 0.0f}}) {
    const int lda = (c.ta ? c.M : c.K) + c.pad, ldb = (c.tb ? c.K : c.N) + c.pad;
    const int ldc = c.N + c.pad;
    const auto A = random_vec(static_cast<size_t>(c.ta ? c.K : c.M) * lda, 5);
    const auto B = random_vec(static_cast<size_t>(c.tb ? c.N : c.K) * ldb, 6);
    auto C = random_vec(static_cast<size_t>(c.M) * ldc, 7);
    DeviceVec dA(*b.cuda, A), dB(*b.cuda, B), dC(*b.cuda, C);
    b.cuda->gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, dA.get(), lda, dB.get(), ldb, c.beta, dC.get(),
                 ldc);
    b.cpu->gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A.data(), lda, B.data(), ldb, c.beta, C.data(),
                ldc);
    check_close(dC.download(), C, 1e-4, 1e-5,
                "gemm ta=" + std::to_string(c.ta) + " tb=" + std::to_string(c.tb) +
                    " M=" + std::to_string(c.M));
  }
  CHECK_THROWS_AS(
      b.cuda->gemm(false, false, 4, 4, 4, 1.0f, nullptr, 2, nullptr, 4, 0.0f, nullptr, 4),
      std::invalid_argument);
}

TEST_CASE("linear forward and backward, with and without bias", "[gpu][linear]") {
  Backends b;
  const int N = 70, IC = 48, OC = 80;
  const auto x = random_vec(N * IC, 8), w = random_vec(OC * IC, 9), bias = random_vec(OC, 10);
  const auto dout = random_vec(N * OC, 11);
  for (bool with_bias : {true, false}) {
    DeviceVec dx(*b.cuda, x), dw(*b.cuda, w), dbias(*b.cuda, bias), ddout(*b.cuda, dout);
    DeviceVec out(*b.cuda, N * OC), dinp(*b.cuda, N * IC);
    auto gw0 = random_vec(OC * IC, 12), gb0 = random_vec(OC, 13);  // += onto existing grads
    DeviceVec gw(*b.cuda, gw0), gb(*b.cuda, gb0);
    std::vector<float> want(N * OC), want_dinp(N * IC);
    b.cuda->linear_forward(out.get(), dx.get(), dw.get(), with_bias ? dbias.get() : nullptr, N, IC,
                           OC);
    b.cpu->linear_forward(want.data(), x.data(), w.data(), with_bias ? bias.data() : nullptr, N, IC,
                          OC);
    check_close(out.download(), want, 1e-4, 1e-5, "linear_forward");
    b.cuda->linear_backward(dinp.get(), gw.get(), with_bias ? gb.get() : nullptr, ddout.get(),
                            dx.get(), dw.get(), N, IC, OC);
    b.cpu->linear_backward(want_dinp.data(), gw0.data(), with_bias ? gb0.data() : nullptr,
                           dout.data(), x.data(), w.data(), N, IC, OC);
    check_close(dinp.download(), want_dinp, 1e-4, 1e-5, "linear dinp");
    check_close(gw.download(), gw0, 1e-4, 1e-5, "linear dweight");
    check_close(gb.download(), gb0, 1e-4, 1e-5, "linear dbias");
  }
}

TEST_CASE("layernorm forward and backward", "[gpu][layernorm]") {
  Backends b;
  const int N = 300, C = 200;
  const auto x = random_vec(N * C, 14, -3, 3), w = random_vec(C, 15), bias = random_vec(C, 16);
  const auto dout = random_vec(N * C, 17);
  DeviceVec dx(*b.cuda, x), dw(*b.cuda, w), dbias(*b.cuda, bias), ddout(*b.cuda, dout);
  DeviceVec out(*b.cuda, N * C), mean(*b.cuda, N), rstd(*b.cuda, N), dinp(*b.cuda, N * C);
  std::vector<float> want(N * C), wmean(N), wrstd(N), wdinp(N * C);
  b.cuda->layernorm_forward(out.get(), mean.get(), rstd.get(), dx.get(), dw.get(), dbias.get(), N,
                            C);
  b.cpu->layernorm_forward(want.data(), wmean.data(), wrstd.data(), x.data(), w.data(), bias.data(),
                           N, C);
  check_close(out.download(), want, 1e-4, 1e-5, "layernorm out");
  check_close(mean.download(), wmean, 1e-4, 1e-6, "layernorm mean");
  check_close(rstd.download(), wrstd, 1e-4, 1e-6, "layernorm rstd");
  auto gw0 = random_vec(C, 18), gb0 = random_vec(C, 19);
  DeviceVec gw(*b.cuda, gw0), gb(*b.cuda, gb0);
  b.cuda->layernorm_backward(dinp.get(), gw.get(), gb.get(), ddout.get(), dx.get(), dw.get(),
                             mean.get(), rstd.get(), N, C);
  b.cpu->layernorm_backward(wdinp.data(), gw0.data(), gb0.data(), dout.data(), x.data(), w.data(),
                            wmean.data(), wrstd.data(), N, C);
  check_close(dinp.download(), wdinp, 1e-4, 1e-5, "layernorm dinp");
  check_close(gw.download(), gw0, 1e-4, 1e-4, "layernorm dweight");
  check_close(gb.download(), gb0, 1e-4, 1e-4, "layernorm dbias");
}

TEST_CASE("causal attention forward and backward", "[gpu][attention]") {
  Backends b;
  struct Case {
    int B, T, C, NH;
  };
  for (const Case c :
       {Case{2, 37, 64, 2}, Case{1, 130, 256, 4}, Case{2, 9, 300, 3}, Case{1, 1, 16, 1}}) {
    const size_t nqkv = static_cast<size_t>(c.B) * c.T * 3 * c.C;
    const size_t nout = static_cast<size_t>(c.B) * c.T * c.C;
    const size_t nlse = static_cast<size_t>(c.B) * c.NH * c.T;
    const auto qkv = random_vec(nqkv, 20), dout = random_vec(nout, 21);
    DeviceVec dqkv_in(*b.cuda, qkv), ddout(*b.cuda, dout);
    DeviceVec out(*b.cuda, nout), lse(*b.cuda, nlse), dqkv(*b.cuda, nqkv);
    std::vector<float> want(nout), wlse(nlse), wdqkv(nqkv);
    b.cuda->attention_forward(out.get(), lse.get(), dqkv_in.get(), c.B, c.T, c.C, c.NH);
    b.cpu->attention_forward(want.data(), wlse.data(), qkv.data(), c.B, c.T, c.C, c.NH);
    const std::string tag = " B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) +
                            " C=" + std::to_string(c.C) + " NH=" + std::to_string(c.NH);
    check_close(out.download(), want, 1e-4, 1e-5, "attention out" + tag);
    check_close(lse.download(), wlse, 1e-5, 1e-5, "attention lse" + tag);
    b.cuda->attention_backward(dqkv.get(), ddout.get(), dqkv_in.get(), out.get(), lse.get(), c.B,
                               c.T, c.C, c.NH);
    b.cpu->attention_backward(wdqkv.data(), dout.data(), qkv.data(), want.data(), wlse.data(), c.B,
                              c.T, c.C, c.NH);
    check_close(dqkv.download(), wdqkv, 1e-3, 1e-5, "attention dqkv" + tag);
  }
}

TEST_CASE("embedding forward and backward with a vocabulary slice", "[gpu][embedding]") {
  Backends b;
  const int B = 3, T = 17, C = 40, V = 50;
  const ops::VocabRange slice{20, 25};  // tokens 20..44 here; the rest on another TP rank
  std::vector<int32_t> tokens(B * T);
  std::mt19937 rng(22);
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % V);
  tokens[0] = tokens[5] = tokens[9] = 21;  // repeats accumulate
  const auto wte = random_vec(slice.count * C, 23), wpe = random_vec(T * C, 24);
  const auto dout = random_vec(B * T * C, 25);
  for (bool with_wpe : {true, false}) {
    DeviceVec<int32_t> dtok(*b.cuda, tokens);
    DeviceVec dwte_in(*b.cuda, wte), dwpe_in(*b.cuda, wpe), ddout(*b.cuda, dout);
    DeviceVec out(*b.cuda, B * T * C);
    std::vector<float> want(B * T * C);
    b.cuda->embedding_forward(out.get(), dtok.get(), dwte_in.get(), slice,
                              with_wpe ? dwpe_in.get() : nullptr, B, T, C);
    b.cpu->embedding_forward(want.data(), tokens.data(), wte.data(), slice,
                             with_wpe ? wpe.data() : nullptr, B, T, C);
    check_close(out.download(), want, 0, 0, "embedding_forward");
    auto gwte0 = random_vec(slice.count * C, 26), gwpe0 = random_vec(T * C, 27);
    DeviceVec gwte(*b.cuda, gwte0), gwpe(*b.cuda, gwpe0);
    // Host token array: the CUDA backend stages it itself.
    b.cuda->embedding_backward(gwte.get(), with_wpe ? gwpe.get() : nullptr, ddout.get(),
                               tokens.data(), slice, B, T, C);
    b.cpu->embedding_backward(gwte0.data(), with_wpe ? gwpe0.data() : nullptr, dout.data(),
                              tokens.data(), slice, B, T, C);
    check_close(gwte.download(), gwte0, 1e-5, 1e-6, "embedding dwte");
    check_close(gwpe.download(), gwpe0, 1e-5, 1e-6, "embedding dwpe");
  }
}

TEST_CASE("fused LM head cross-entropy, forward and backward", "[gpu][xent]") {
  Backends b;
  const int N = 45, C = 32, V = 77;
  const auto x = random_vec(N * C, 28), wte = random_vec(V * C, 29);
  std::vector<int32_t> targets(N);
  for (int i = 0; i < N; ++i) targets[i] = (i * 7) % V;
  targets[3] = -1;  // ignored
  DeviceVec dx_in(*b.cuda, x), dwte_in(*b.cuda, wte);
  DeviceVec losses(*b.cuda, N), dx(*b.cuda, N * C);
  auto gwte0 = random_vec(V * C, 30);
  DeviceVec gwte(*b.cuda, gwte0);
  std::vector<float> wlosses(N), wdx(N * C);
  b.cuda->lm_head_cross_entropy(losses.get(), nullptr, nullptr, dx_in.get(), dwte_in.get(),
                                targets.data(), N, C, V, 0.0f);
  b.cpu->lm_head_cross_entropy(wlosses.data(), nullptr, nullptr, x.data(), wte.data(),
                               targets.data(), N, C, V, 0.0f);
  check_close(losses.download(), wlosses, 1e-5, 1e-5, "lm_head losses (forward only)");
  b.cuda->lm_head_cross_entropy(losses.get(), dx.get(), gwte.get(), dx_in.get(), dwte_in.get(),
                                targets.data(), N, C, V, 0.5f);
  b.cpu->lm_head_cross_entropy(wlosses.data(), wdx.data(), gwte0.data(), x.data(), wte.data(),
                               targets.data(), N, C, V, 0.5f);
  check_close(losses.download(), wlosses, 1e-5, 1e-5, "lm_head losses");
  check_close(dx.download(), wdx, 1e-4, 1e-5, "lm_head dx");
  check_close(gwte.download(), gwte0, 1e-4, 1e-5, "lm_head dwte");
  targets[7] = V;
  CHECK_THROWS_AS(b.cuda->lm_head_cross_entropy(losses.get(), nullptr, nullptr, dx_in.get(),
                                                dwte_in.get(), targets.data(), N, C, V, 0.0f),
                  std::out_of_range);
}

TEST_CASE("vocab-parallel cross-entropy pieces", "[gpu][xent]") {
  Backends b;
  const int N = 33, Vl = 60;
  const ops::VocabRange vocab{60, Vl};  // the second of two ranks' slices
  const auto logits = random_vec(N * Vl, 31, -4, 4);
  std::vector<int32_t> targets(N);
  for (int i = 0; i < N; ++i) targets[i] = (i * 11) % 120;  // half held here, half not
  targets[2] = -1;
  DeviceVec dl(*b.cuda, logits), row_max(*b.cuda, N), stats(*b.cuda, 2 * N), losses(*b.cuda, N);
  std::vector<float> wmax(N), wstats(2 * N), wlosses(N);
  b.cuda->xent_row_max(row_max.get(), dl.get(), N, Vl);
  b.cpu->xent_row_max(wmax.data(), logits.data(), N, Vl);
  check_close(row_max.download(), wmax, 0, 0, "xent_row_max");
  b.cuda->xent_partial_sums(stats.get(), dl.get(), row_max.get(), targets.data(), vocab, N);
  b.cpu->xent_partial_sums(wstats.data(), logits.data(), wmax.data(), targets.data(), vocab, N);
  check_close(stats.download(), wstats, 1e-5, 1e-6, "xent_partial_sums");
  // Finish in place (dlogits aliases logits), as the model does.
  std::vector<float> wd = logits;
  b.cuda->xent_finish(losses.get(), dl.get(), dl.get(), row_max.get(), stats.get(), targets.data(),
                      vocab, N, 0.25f);
  b.cpu->xent_finish(wlosses.data(), wd.data(), wd.data(), wmax.data(), wstats.data(),
                     targets.data(), vocab, N, 0.25f);
  check_close(losses.download(), wlosses, 1e-5, 1e-5, "xent_finish losses");
  check_close(dl.download(), wd, 1e-5, 1e-7, "xent_finish dlogits");
}

TEST_CASE("sum_squares accumulates in double", "[gpu][reduce]") {
  Backends b;
  for (size_t n : {size_t{1}, size_t{1000}, size_t{1} << 20, (size_t{3} << 20) + 7}) {
    const auto x = random_vec(n, 32);
    DeviceVec dx(*b.cuda, x);
    const double got = b.cuda->sum_squares(dx.get(), n);
    const double want = b.cpu->sum_squares(x.data(), n);
    CHECK(got == Approx(want).epsilon(1e-10));
    CHECK(b.cuda->sum_squares(dx.get(), n) == got);  // deterministic
  }
  CHECK(b.cuda->sum_squares(nullptr, 0) == 0.0);
}

TEST_CASE("adamw over several steps", "[gpu][optim]") {
  Backends b;
  const size_t n = 50001;
  auto p = random_vec(n, 33), m = std::vector<float>(n, 0.0f), v = std::vector<float>(n, 0.0f);
  DeviceVec dp(*b.cuda, p), dm(*b.cuda, m), dv(*b.cuda, v), dg(*b.cuda, n);
  for (int step = 1; step <= 4; ++step) {
    const auto g = random_vec(n, 40 + step);
    dg.upload(g);
    b.cuda->adamw(dp.get(), dg.get(), dm.get(), dv.get(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
    b.cpu->adamw(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step);
  }
  check_close(dp.download(), p, 1e-6, 1e-7, "adamw param");
  check_close(dm.download(), m, 1e-5, 1e-8, "adamw m");
  check_close(dv.download(), v, 1e-5, 1e-10, "adamw v");
  CHECK_THROWS_AS(
      b.cuda->adamw(dp.get(), dg.get(), dm.get(), dv.get(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0),
      std::invalid_argument);
}

TEST_CASE("casts between fp32, bf16 and fp16 are bit-exact", "[gpu][cast]") {
  Backends b;
  const size_t n = 4096;  // even: 16-bit buffers move as whole floats through copy()
  auto src32 = random_vec(n, 50, -70000, 70000);
  src32[0] = 1e-7f;
  src32[1] = -0.0f;
  for (DType to : {DType::bf16, DType::fp16}) {
    DeviceVec d32(*b.cuda, src32), d16(*b.cuda, n / 2), back(*b.cuda, n);
    std::vector<float> want16(n / 2), wback(n);
    b.cuda->cast(d16.get(), to, d32.get(), DType::fp32, n);
    b.cpu->cast(want16.data(), to, src32.data(), DType::fp32, n);
    const auto got16 = d16.download();
    CHECK(std::memcmp(got16.data(), want16.data(), n * 2) == 0);
    b.cuda->cast(back.get(), DType::fp32, d16.get(), to, n);
    b.cpu->cast(wback.data(), DType::fp32, want16.data(), to, n);
    const auto gotback = back.download();
    CHECK(std::memcmp(gotback.data(), wback.data(), n * 4) == 0);
  }
  // bf16 <-> fp16 directly.
  DeviceVec d32(*b.cuda, src32), dbf(*b.cuda, n / 2), dh(*b.cuda, n / 2);
  std::vector<float> wbf(n / 2), wh(n / 2);
  b.cuda->cast(dbf.get(), DType::bf16, d32.get(), DType::fp32, n);
  b.cuda->cast(dh.get(), DType::fp16, dbf.get(), DType::bf16, n);
  b.cpu->cast(wbf.data(), DType::bf16, src32.data(), DType::fp32, n);
  b.cpu->cast(wh.data(), DType::fp16, wbf.data(), DType::bf16, n);
  const auto goth = dh.download();
  CHECK(std::memcmp(goth.data(), wh.data(), n * 2) == 0);
}

// --- mixed-precision matrix products (BackendOptions::matmul = bf16 / fp16) ----------------
// Both backends round the same fp32 operands to the same 16-bit values (round to nearest
// even; shared code in ops/shared_math.h), and the product of two bf16 (8-bit significand)
// or fp16 (11-bit) values is exact in fp32, so the results differ only by the order of
// the fp32 sums (cuBLASLt tensor cores vs OpenBLAS sgemm): a few fp32 ulps of the largest
// partial sums. Tolerance: kMixedRel = 3e-5 of the result's magnitude (max |want|).
//
// The LM head's backward products are the exception: their first operand, the softmax
// gradient, is itself computed by each backend (expf on the GPU, the CPU's own exp; other
// summation orders), so the fp32 values differ by ~1e-6 relative, and the few that lie that
// close to a rounding midpoint round to neighbouring 16-bit values. One such flip moves one
// term of a sum by one ulp of the type, at most 2^-7 (bf16) or 2^-10 (fp16) of |g| <= |dloss|
// times |x| or |wte| <= 1. dx and dwte are therefore checked to twice that, relative to
// their magnitude (about |dloss|): 2^-6 for bf16, 2^-9 for fp16. The losses involve no
// computed operand and keep the tight bound.
namespace {

constexpr double kMixedRel = 3e-5;

// The operands as the contract rounds them, back in fp32 (a reference independent of the
// CPU backend's own implementation of the option).
std::vector<float> rounded(const std::vector<float>& v, DType t) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    out[i] = t == DType::bf16 ? ops::math::bf16_to_fp32(ops::math::fp32_to_bf16(v[i]))
                              : ops::math::fp16_to_fp32(ops::math::fp32_to_fp16(v[i]));
  }
  return out;
}

std::string tag(DType t) { return t == DType::bf16 ? " [bf16]" : " [fp16]"; }

}  // namespace

TEST_CASE("mixed-precision gemm in every transpose combination, strided, with alpha and beta",
          "[gpu][gemm][mixed]") {
  for (const DType t : {DType::bf16, DType::fp16}) {
    Backends b(t);
    REQUIRE(b.cuda->matmul_dtype() == t);
    const auto ref = ops::make_cpu_backend({.threads = 1});  // fp32: rounded inputs by hand
    struct Case {
      bool ta, tb;
      int M, N, K, pad, offset;  // pad: extra leading dimension; offset: A, B start inside
      float alpha, beta;
    };
    for (const Case c : {Case{false, false, 64, 48, 32, 0, 0, 1.0f, 0.0f},
                         Case{false, true, 37, 51, 29, 3, 0, 0.5f, 1.0f},
                         Case{true, false, 128, 96, 300, 0, 0, 1.0f, 1.0f},
                         Case{true, true, 7, 5, 3, 2, 0, -2.0f, 0.25f},
                         Case{false, false, 33, 70, 131, 5, 3, 1.0f, -1.0f},
                         Case{true, true, 50, 19, 64, 7, 1, 0.75f, 0.0f},
                         Case{false, false, 1, 1, 1, 0, 0, 1.0f, 0.0f}}) {
      const int lda = (c.ta ? c.M : c.K) + c.pad, ldb = (c.tb ? c.K : c.N) + c.pad;
      const int ldc = c.N + c.pad;
      // The operand starts `offset` floats into its buffer (a column slice of a wider
      // matrix): the rows beyond its columns hold values a product must not read.
      const auto A = random_vec(static_cast<size_t>(c.ta ? c.K : c.M) * lda + c.offset, 5);
      const auto B = random_vec(static_cast<size_t>(c.tb ? c.N : c.K) * ldb + c.offset, 6);
      auto C = random_vec(static_cast<size_t>(c.M) * ldc, 7);
      auto C_ref = C;
      DeviceVec dA(*b.cuda, A), dB(*b.cuda, B), dC(*b.cuda, C);
      b.cuda->gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, dA.get() + c.offset, lda,
                   dB.get() + c.offset, ldb, c.beta, dC.get(), ldc);
      b.cpu->gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A.data() + c.offset, lda, B.data() + c.offset,
                  ldb, c.beta, C.data(), ldc);
      const auto Ar = rounded(A, t), Br = rounded(B, t);
      ref->gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, Ar.data() + c.offset, lda, Br.data() + c.offset,
                ldb, c.beta, C_ref.data(), ldc);
      const std::string what = "gemm ta=" + std::to_string(c.ta) + " tb=" + std::to_string(c.tb) +
                               " M=" + std::to_string(c.M) + tag(t);
      const auto got = dC.download();
      check_close_to_scale(got, C, kMixedRel, what + " vs CPU backend");
      check_close_to_scale(got, C_ref, kMixedRel, what + " vs fp32 on rounded operands");
    }
  }
}

TEST_CASE("mixed-precision linear forward and backward", "[gpu][linear][mixed]") {
  for (const DType t : {DType::bf16, DType::fp16}) {
    Backends b(t);
    const int N = 70, IC = 48, OC = 84;  // OC not a multiple of 8: padded operand rows
    const auto x = random_vec(N * IC, 8), w = random_vec(OC * IC, 9), bias = random_vec(OC, 10);
    const auto dout = random_vec(N * OC, 11);
    for (bool with_bias : {true, false}) {
      DeviceVec dx(*b.cuda, x), dw(*b.cuda, w), dbias(*b.cuda, bias), ddout(*b.cuda, dout);
      DeviceVec out(*b.cuda, N * OC), dinp(*b.cuda, N * IC);
      auto gw0 = random_vec(OC * IC, 12), gb0 = random_vec(OC, 13);  // += onto existing grads
      DeviceVec gw(*b.cuda, gw0), gb(*b.cuda, gb0);
      std::vector<float> want(N * OC), want_dinp(N * IC);
      b.cuda->linear_forward(out.get(), dx.get(), dw.get(), with_bias ? dbias.get() : nullptr, N,
                             IC, OC);
      b.cpu->linear_forward(want.data(), x.data(), w.data(), with_bias ? bias.data() : nullptr, N,
                            IC, OC);
      check_close_to_scale(out.download(), want, kMixedRel, "linear_forward" + tag(t));
      b.cuda->linear_backward(dinp.get(), gw.get(), with_bias ? gb.get() : nullptr, ddout.get(),
                              dx.get(), dw.get(), N, IC, OC);
      b.cpu->linear_backward(want_dinp.data(), gw0.data(), with_bias ? gb0.data() : nullptr,
                             dout.data(), x.data(), w.data(), N, IC, OC);
      check_close_to_scale(dinp.download(), want_dinp, kMixedRel, "linear dinp" + tag(t));
      check_close_to_scale(gw.download(), gw0, kMixedRel, "linear dweight" + tag(t));
      // Bias gradients are fp32 column sums: the fp32 tolerance.
      check_close(gb.download(), gb0, 1e-4, 1e-5, "linear dbias" + tag(t));
    }
    // Without dinp (the first layer's input needs no gradient).
    auto gw0 = random_vec(OC * IC, 14);
    DeviceVec dx(*b.cuda, x), dw(*b.cuda, w), ddout(*b.cuda, dout), gw(*b.cuda, gw0);
    b.cuda->linear_backward(nullptr, gw.get(), nullptr, ddout.get(), dx.get(), dw.get(), N, IC, OC);
    b.cpu->linear_backward(nullptr, gw0.data(), nullptr, dout.data(), x.data(), w.data(), N, IC,
                           OC);
    check_close_to_scale(gw.download(), gw0, kMixedRel, "linear dweight (no dinp)" + tag(t));
  }
}

TEST_CASE("mixed-precision fused LM head cross-entropy", "[gpu][xent][mixed]") {
  for (const DType t : {DType::bf16, DType::fp16}) {
    Backends b(t);
    const int N = 45, C = 36, V = 77;  // C, V not multiples of 8: padded operand rows
    const auto x = random_vec(N * C, 28), wte = random_vec(V * C, 29);
    std::vector<int32_t> targets(N);
    for (int i = 0; i < N; ++i) targets[i] = (i * 7) % V;
    targets[3] = -1;  // ignored
    DeviceVec dx_in(*b.cuda, x), dwte_in(*b.cuda, wte);
    DeviceVec losses(*b.cuda, N), dx(*b.cuda, N * C);
    auto gwte0 = random_vec(V * C, 30);
    DeviceVec gwte(*b.cuda, gwte0);
    std::vector<float> wlosses(N), wdx(N * C);
    b.cuda->lm_head_cross_entropy(losses.get(), nullptr, nullptr, dx_in.get(), dwte_in.get(),
                                  targets.data(), N, C, V, 0.0f);
    b.cpu->lm_head_cross_entropy(wlosses.data(), nullptr, nullptr, x.data(), wte.data(),
                                 targets.data(), N, C, V, 0.0f);
    check_close(losses.download(), wlosses, 1e-5, 1e-5, "lm_head losses (forward only)" + tag(t));
    // The forward rounds x and wte only: fp32 on rounded inputs gives the same losses.
    std::vector<float> rlosses(N);
    const auto xr = rounded(x, t), wter = rounded(wte, t);
    ops::make_cpu_backend({.threads = 1})
        ->lm_head_cross_entropy(rlosses.data(), nullptr, nullptr, xr.data(), wter.data(),
                                targets.data(), N, C, V, 0.0f);
    check_close(losses.download(), rlosses, 1e-5, 1e-5,
                "lm_head losses vs fp32 on rounded operands" + tag(t));
    const float dloss = 0.5f;
    b.cuda->lm_head_cross_entropy(losses.get(), dx.get(), gwte.get(), dx_in.get(), dwte_in.get(),
                                  targets.data(), N, C, V, dloss);
    b.cpu->lm_head_cross_entropy(wlosses.data(), wdx.data(), gwte0.data(), x.data(), wte.data(),
                                 targets.data(), N, C, V, dloss);
    check_close(losses.download(), wlosses, 1e-5, 1e-5, "lm_head losses" + tag(t));
    const double backward_rel = t == DType::bf16 ? 1.0 / 64 : 1.0 / 512;  // see above
    check_close_to_scale(dx.download(), wdx, backward_rel, "lm_head dx" + tag(t));
    // dwte accumulated onto random values of magnitude ~1: compare the increments.
    const auto got_gwte = gwte.download();
    const auto init = random_vec(V * C, 30);
    std::vector<float> got_inc(V * C), want_inc(V * C);
    for (size_t i = 0; i < got_inc.size(); ++i) {
      got_inc[i] = got_gwte[i] - init[i];
      want_inc[i] = gwte0[i] - init[i];
    }
    check_close_to_scale(got_inc, want_inc, backward_rel, "lm_head dwte increment" + tag(t));
  }
}
