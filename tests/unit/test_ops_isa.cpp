// The CPU kernel paths (ops/cpu/isa.h) against each other: the choice and its errors, and
// every path this CPU runs on the same inputs. AVX2 and AVX-512 must agree bitwise (same
// arithmetic in the same order); generic multiplies through OpenBLAS and agrees to float
// rounding. The whole [ops] suite also runs once per path (tests/CMakeLists.txt).
#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include "ops/cpu/cpu_backend.h"
#include "ops/cpu/isa.h"
#include "test_ops_reference.h"

namespace ops = trainctl::ops;
namespace cpu = trainctl::ops::cpu;
namespace ref = trainctl::ops::ref;

namespace {

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Everything a backend computes for one attention shape, forward and backward.
struct AttentionRun {
  std::vector<float> out, lse, dqkv;
};

AttentionRun run_attention(cpu::Isa isa, int B, int T, int C, int NH, int threads) {
  cpu::CpuBackend be(ops::BackendOptions{threads}, isa);
  const auto qkv = ref::random_floats(static_cast<size_t>(B) * T * 3 * C, 7, -2.0f, 2.0f);
  const auto dout = ref::random_floats(static_cast<size_t>(B) * T * C, 8);
  AttentionRun r{std::vector<float>(dout.size()), std::vector<float>(size_t(B) * NH * T),
                 std::vector<float>(qkv.size())};
  be.attention_forward(r.out.data(), r.lse.data(), qkv.data(), B, T, C, NH);
  be.attention_backward(r.dqkv.data(), dout.data(), qkv.data(), r.out.data(), r.lse.data(), B, T, C,
                        NH);
  return r;
}

// The elementwise kernels on one input, through the backend's public ops.
std::vector<float> run_elementwise(cpu::Isa isa) {
  cpu::CpuBackend be(ops::BackendOptions{1}, isa);
  const int N = 7, C = 83, V = 45;
  const auto x = ref::random_floats(size_t(N) * C, 11, -3.0f, 3.0f);
  const auto g = ref::random_floats(x.size(), 12);
  const auto w = ref::random_floats(size_t(C), 13);
  const auto b = ref::random_floats(size_t(C), 14);
  std::vector<float> all;
  auto keep = [&](const std::vector<float>& v) { all.insert(all.end(), v.begin(), v.end()); };
  std::vector<float> y(x.size()), dx(x.size()), mean(N), rstd(N), dw(C), db(C);
  be.gelu_forward(y.data(), x.data(), x.size());
  keep(y);
  be.gelu_backward(dx.data(), x.data(), g.data(), x.size());
  keep(dx);
  be.layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  keep(y), keep(mean), keep(rstd);
  be.layernorm_backward(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), mean.data(),
                        rstd.data(), N, C);
  keep(dx), keep(dw), keep(db);
  std::vector<float> p = x, m(x.size(), 0.0f), v(x.size(), 0.0f);
  for (int step = 1; step <= 3; ++step) {
    be.adamw(p.data(), g.data(), m.data(), v.data(), p.size(), 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f,
             step);
  }
  keep(p), keep(m), keep(v);
  const auto wte = ref::random_floats(size_t(V) * C, 15);
  std::vector<int32_t> targets(N);
  for (int i = 0; i < N; ++i) targets[size_t(i)] = (i * 7) % V;
  std::vector<float> losses(N), dlx(x.size()), dwte(wte.size(), 0.0f);
  be.lm_head_cross_entropy(losses.data(), dlx.data(), dwte.data(), x.data(), wte.data(),
                           targets.data(), N, C, V, 1.0f / N);
  keep(losses), keep(dlx), keep(dwte);
  // SwiGLU, H = 41: vector loops and a scalar tail on every row.
  const int H = C / 2;
  std::vector<float> act(size_t(N) * H), dgu(size_t(N) * 2 * H);
  be.swiglu_forward(act.data(), x.data(), N, H);
  keep(act);
  be.swiglu_backward(dgu.data(), g.data(), x.data(), N, H);
  keep(dgu);
  return all;
}

}  // namespace

TEST_CASE("the CPU kernel path: fastest by default, named ones checked", "[ops][isa]") {
  const std::vector<cpu::Isa> supported = cpu::supported_isas();
  REQUIRE_FALSE(supported.empty());
  CHECK(supported.front() == cpu::Isa::generic);  // every CPU runs the baseline
  CHECK(cpu::choose_isa("") == supported.back());
  for (cpu::Isa isa : supported) CHECK(cpu::choose_isa(cpu::isa_name(isa)) == isa);
  CHECK(cpu::cpu_kernels(cpu::Isa::generic).isa == cpu::Isa::generic);

  try {
    cpu::choose_isa("avx9");
    FAIL("an unknown path was accepted");
  } catch (const cpu::IsaError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("TRAINCTL_CPU_ISA=avx9 is not a CPU kernel path") != std::string::npos);
    CHECK(msg.find("this CPU supports: " + cpu::isa_list(supported)) != std::string::npos);
  }
  for (cpu::Isa isa : cpu::built_isas()) {
    bool runs = false;
    for (cpu::Isa s : supported) runs = runs || s == isa;
    if (runs) continue;
    INFO(cpu::isa_name(isa));
    CHECK_THROWS_WITH(cpu::choose_isa(cpu::isa_name(isa)),
                      Catch::Contains("needs instructions this CPU lacks"));
    CHECK_THROWS_AS(cpu::CpuBackend(ops::BackendOptions{1}, isa), cpu::IsaError);
  }
}

TEST_CASE("attention gives the same result on every CPU kernel path", "[ops][isa]") {
  const std::vector<cpu::Isa> supported = cpu::supported_isas();
  struct Shape {
    int B, T, C, NH;
  };
  // Ragged T around the 6-row tiles and 16-key panels, head sizes below, at and above one
  // output tile (16 columns on AVX2, 64 on AVX-512) and not multiples of 8.
  const Shape shapes[] = {{1, 1, 8, 1},    {2, 5, 12, 3},   {1, 17, 40, 2}, {1, 50, 128, 2},
                          {2, 97, 144, 2}, {1, 130, 20, 2}, {1, 64, 256, 4}};
  for (const Shape& s : shapes) {
    for (int threads : {1, 2}) {
      INFO("B=" << s.B << " T=" << s.T << " C=" << s.C << " NH=" << s.NH << " threads=" << threads);
      const AttentionRun want = run_attention(cpu::Isa::generic, s.B, s.T, s.C, s.NH, threads);
      const AttentionRun* vec = nullptr;
      AttentionRun runs[2];
      int n = 0;
      for (cpu::Isa isa : supported) {
        if (isa == cpu::Isa::generic) continue;
        INFO(cpu::isa_name(isa));
        runs[n] = run_attention(isa, s.B, s.T, s.C, s.NH, threads);
        ref::require_close(runs[n].out, ref::to_double(want.out), 2e-5, "out");
        ref::require_close(runs[n].lse, ref::to_double(want.lse), 2e-5, "lse");
        ref::require_close(runs[n].dqkv, ref::to_double(want.dqkv), 2e-5, "dqkv");
        if (vec != nullptr) {
          CHECK(bitwise_equal(runs[n].out, vec->out));
          CHECK(bitwise_equal(runs[n].lse, vec->lse));
          CHECK(bitwise_equal(runs[n].dqkv, vec->dqkv));
        }
        vec = &runs[n++];
      }
    }
  }
}

TEST_CASE("gelu, layernorm, AdamW, the LM head softmax and SwiGLU are bitwise equal on every path",
          "[ops][isa]") {
  const std::vector<float> want = run_elementwise(cpu::Isa::generic);
  for (cpu::Isa isa : cpu::supported_isas()) {
    INFO(cpu::isa_name(isa));
    CHECK(bitwise_equal(run_elementwise(isa), want));
  }
}
