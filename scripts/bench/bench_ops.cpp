// Per-op benchmark of the CPU backend at the GPT shapes the project trains
// (N = B*T = 2048 rows, T = 256, V = 256; C = 256/NH = 4 and C = 384/NH = 6), next to the
// machine's ceilings measured in the same run: OpenBLAS sgemm 1024^3 and memcpy bandwidth.
// Prints one JSON object per line; times are medians over repeated calls.
//
//   bench_ops [--threads 1,2] [--min-ms 300]
//
// GFLOP/s counts the FLOPs each op needs (attention: causal half only, plus the one score
// recomputation its backward does); GB/s counts bytes read plus bytes written once.
// The last lines estimate a full training step (sum of op times for one forward/backward/
// AdamW step of the model) so the op-level ceiling can be compared with the end-to-end run.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ops/backend.h"

namespace {

using trainctl::DType;
using trainctl::ops::Backend;

struct Options {
  std::vector<int> threads = {1, 2};
  double min_ms = 300.0;
};

// Wall-clock and process-CPU milliseconds of one op (or a sum of ops).
struct Timing {
  double ms = 0.0;
  double cpu_ms = 0.0;
  Timing& operator+=(const Timing& o) {
    ms += o.ms;
    cpu_ms += o.cpu_ms;
    return *this;
  }
};
Timing operator+(Timing a, const Timing& b) { return a += b; }
Timing operator*(double k, const Timing& a) { return {k * a.ms, k * a.cpu_ms}; }

double process_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

// Median milliseconds per call of fn (wall clock and process CPU time), sampled for at
// least min_ms after one warm-up call. On a shared machine
// the CPU time of a 1-thread run is what the op costs when it has a core to itself.
Timing median_ms(const std::function<void()>& fn, double min_ms) {
  using clock = std::chrono::steady_clock;
  fn();
  std::vector<double> samples, cpu;
  const auto start = clock::now();
  while (samples.size() < 5 ||
         std::chrono::duration<double, std::milli>(clock::now() - start).count() < min_ms) {
    const double c0 = process_cpu_ms();
    const auto t0 = clock::now();
    fn();
    samples.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
    cpu.push_back(process_cpu_ms() - c0);
    if (samples.size() >= 2000) break;
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  std::nth_element(cpu.begin(), cpu.begin() + cpu.size() / 2, cpu.end());
  return {samples[samples.size() / 2], cpu[cpu.size() / 2]};
}

// "N2048": built by appending (operator+ on a literal trips GCC 12's -Wrestrict bug).
std::string tag(const char* prefix, long long value) {
  std::string s(prefix);
  s += std::to_string(value);
  return s;
}

std::vector<float> randoms(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

// GFLOP/s and GB/s come from wall time; with one thread, *_cpu rates come from CPU time
// (what the op achieves with a core to itself, when other processes share the machine).
void emit(const std::string& op, const std::string& shape, int threads, const Timing& t,
          double flops, double bytes) {
  std::printf(R"({"op": "%s", "shape": "%s", "threads": %d, "ms": %.4f, "cpu_ms": %.4f)",
              op.c_str(), shape.c_str(), threads, t.ms, t.cpu_ms);
  if (flops > 0) std::printf(", \"gflops\": %.2f", flops / t.ms * 1e-6);
  if (bytes > 0) std::printf(", \"gbps\": %.2f", bytes / t.ms * 1e-6);
  if (threads == 1 && flops > 0) std::printf(", \"gflops_cpu\": %.2f", flops / t.cpu_ms * 1e-6);
  if (threads == 1 && bytes > 0) std::printf(", \"gbps_cpu\": %.2f", bytes / t.cpu_ms * 1e-6);
  std::printf("}\n");
  std::fflush(stdout);
}

void bench_ceilings(Backend& be, int threads, const Options& opt) {
  const int n = 1024;
  auto a = randoms(size_t{1} << 20, 1), b = randoms(size_t{1} << 20, 2);
  std::vector<float> c(size_t{1} << 20);
  const Timing ms = median_ms(
      [&] { be.gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n); },
      opt.min_ms);
  emit("sgemm_ceiling", "1024x1024x1024", threads, ms, 2.0 * n * n * n, 0);
  const size_t words = size_t{16} << 20;  // 64 MiB, far beyond L3
  std::vector<float> src = randoms(words, 3), dst(words);
  const Timing cms = median_ms([&] { be.copy(dst.data(), src.data(), words); }, opt.min_ms);
  emit("copy_bandwidth", "64MiB", threads, cms, 0, 2.0 * words * sizeof(float));
}

struct Model {
  int L, C, NH, T = 256, B = 8, V = 256;
  int N() const { return B * T; }
  size_t params() const {
    const size_t c = static_cast<size_t>(C);
    return static_cast<size_t>(V) * c + static_cast<size_t>(T) * c +
           static_cast<size_t>(L) * (12 * c * c + 13 * c) + 2 * c;
  }
};

// Times every op of one model config; returns the estimated step time.
Timing bench_model(Backend& be, const Model& m, int threads, const Options& opt) {
  const int N = m.N(), C = m.C, T = m.T, B = m.B, NH = m.NH, V = m.V;
  const std::string sh = tag("N", N) + tag("_C", C);
  const size_t nc = static_cast<size_t>(N) * C;
  const std::vector<float> x = randoms(4 * nc, 11), dy = randoms(4 * nc, 12);
  std::vector<float> y(4 * nc), dx(4 * nc);
  const std::vector<float> w = randoms(static_cast<size_t>(4) * C * C, 13, 0.05f);
  const std::vector<float> bias = randoms(4 * static_cast<size_t>(C), 14);
  std::vector<float> dw(w.size()), dbias(bias.size());
  Timing step;

  struct LinearShape {
    const char* name;
    int ic, oc;
  };
  const LinearShape linears[] = {
      {"qkv", C, 3 * C}, {"attn_proj", C, C}, {"fc", C, 4 * C}, {"mlp_proj", 4 * C, C}};
  for (const auto& l : linears) {
    const double f = 2.0 * N * l.ic * l.oc;
    const Timing fwd = median_ms(
        [&] { be.linear_forward(y.data(), x.data(), w.data(), bias.data(), N, l.ic, l.oc); },
        opt.min_ms);
    emit(std::string("linear_fwd_") + l.name, sh, threads, fwd, f, 0);
    const Timing bwd = median_ms(
        [&] {
          be.linear_backward(dx.data(), dw.data(), dbias.data(), dy.data(), x.data(), w.data(), N,
                             l.ic, l.oc);
        },
        opt.min_ms);
    emit(std::string("linear_bwd_") + l.name, sh, threads, bwd, 2 * f, 0);
    step += m.L * (fwd + bwd);
  }

  {  // attention: qkv in x ([N, 3C] fits in 4*nc), out in y
    const int hs = C / NH;
    const double causal = static_cast<double>(B) * NH * hs * T * (T + 1) / 2.0;
    std::vector<float> lse(static_cast<size_t>(B) * NH * T);
    std::vector<float> qkv = randoms(3 * nc, 15);
    const Timing fwd = median_ms(
        [&] { be.attention_forward(y.data(), lse.data(), qkv.data(), B, T, C, NH); }, opt.min_ms);
    emit("attention_fwd", sh + tag("_NH", NH), threads, fwd, 4 * causal, 0);
    const Timing bwd = median_ms(
        [&] {
          be.attention_backward(dx.data(), dy.data(), qkv.data(), y.data(), lse.data(), B, T, C,
                                NH);
        },
        opt.min_ms);
    emit("attention_bwd", sh + tag("_NH", NH), threads, bwd, 10 * causal, 0);
    step += m.L * (fwd + bwd);
  }

  {
    std::vector<float> mean(N), rstd(N);
    const Timing fwd = median_ms(
        [&] {
          be.layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), bias.data(),
                               bias.data() + C, N, C);
        },
        opt.min_ms);
    emit("layernorm_fwd", sh, threads, fwd, 0, 8.0 * nc);
    const Timing bwd = median_ms(
        [&] {
          be.layernorm_backward(dx.data(), dw.data(), dbias.data(), dy.data(), x.data(),
                                bias.data(), mean.data(), rstd.data(), N, C);
        },
        opt.min_ms);
    emit("layernorm_bwd", sh, threads, bwd, 0, 12.0 * nc);
    step += (2 * m.L + 1) * (fwd + bwd);
  }

  {
    const size_t n4 = 4 * nc;
    const Timing fwd = median_ms([&] { be.gelu_forward(y.data(), x.data(), n4); }, opt.min_ms);
    emit("gelu_fwd", sh + "x4", threads, fwd, 0, 8.0 * n4);
    const Timing bwd =
        median_ms([&] { be.gelu_backward(dx.data(), x.data(), dy.data(), n4); }, opt.min_ms);
    emit("gelu_bwd", sh + "x4", threads, bwd, 0, 12.0 * n4);
    step += m.L * (fwd + bwd);
  }

  {
    const Timing add = median_ms([&] { be.add(y.data(), x.data(), dy.data(), nc); }, opt.min_ms);
    emit("residual_add", sh, threads, add, 0, 12.0 * nc);
    const Timing acc = median_ms([&] { be.add_inplace(y.data(), dy.data(), nc); }, opt.min_ms);
    emit("add_inplace", sh, threads, acc, 0, 12.0 * nc);
    step += m.L * (2 * add + 2 * acc);  // two residual adds forward, two gradient sums back
  }

  {
    std::vector<int32_t> tokens(N);
    for (int i = 0; i < N; ++i) tokens[i] = (i * 31) % V;
    std::vector<float> wte = randoms(static_cast<size_t>(V) * C, 16, 0.05f), dwte(wte.size(), 0.0f),
                       wpe = randoms(static_cast<size_t>(T) * C, 17), dwpe(wpe.size(), 0.0f),
                       losses(N);
    const Timing fwd = median_ms(
        [&] {
          be.embedding_forward(y.data(), tokens.data(), wte.data(), {0, V}, wpe.data(), B, T, C);
        },
        opt.min_ms);
    emit("embedding_fwd", sh, threads, fwd, 0, 8.0 * nc);
    const Timing bwd = median_ms(
        [&] {
          be.embedding_backward(dwte.data(), dwpe.data(), dy.data(), tokens.data(), {0, V}, B, T,
                                C);
        },
        opt.min_ms);
    emit("embedding_bwd", sh, threads, bwd, 0, 4.0 * nc);
    const Timing lm = median_ms(
        [&] {
          be.lm_head_cross_entropy(losses.data(), dx.data(), dwte.data(), x.data(), wte.data(),
                                   tokens.data(), N, C, V, 1.0f / N);
        },
        opt.min_ms);
    emit("lm_head_ce_fwd_bwd", sh + tag("_V", V), threads, lm, 6.0 * N * C * V, 0);
    step += fwd + bwd + lm;
  }

  {
    const size_t P = m.params();
    std::vector<float> p = randoms(P, 18), g = randoms(P, 19), mm(P), vv(P);
    const Timing adam = median_ms(
        [&] {
          be.adamw(p.data(), g.data(), mm.data(), vv.data(), P, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f,
                   10);
        },
        opt.min_ms);
    emit("adamw", tag("P", static_cast<long long>(P)), threads, adam, 0, 28.0 * P);
    const Timing sq = median_ms([&] { (void)be.sum_squares(g.data(), P); }, opt.min_ms);
    emit("sum_squares", tag("P", static_cast<long long>(P)), threads, sq, 0, 4.0 * P);
    const Timing zero = median_ms([&] { be.zero(g.data(), P); }, opt.min_ms);
    emit("zero", tag("P", static_cast<long long>(P)), threads, zero, 0, 4.0 * P);
    std::vector<uint16_t> half(P);
    const Timing cast =
        median_ms([&] { be.cast(half.data(), DType::bf16, p.data(), DType::fp32, P); }, opt.min_ms);
    emit("cast_fp32_to_bf16", tag("P", static_cast<long long>(P)), threads, cast, 0, 6.0 * P);
    step += adam + sq + zero;
  }
  return step;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      o.threads.clear();
      std::string list = argv[++i];
      size_t pos = 0;
      while (pos <= list.size()) {
        const size_t comma = std::min(list.find(',', pos), list.size());
        o.threads.push_back(std::stoi(list.substr(pos, comma - pos)));
        pos = comma + 1;
      }
    } else if (a == "--min-ms" && i + 1 < argc) {
      o.min_ms = std::stod(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_ops [--threads 1,2] [--min-ms 300]\n");
      std::exit(2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  const Model models[] = {{4, 256, 4}, {6, 384, 6}};
  for (int threads : opt.threads) {
    auto be = trainctl::ops::make_cpu_backend(trainctl::ops::BackendOptions{threads});
    bench_ceilings(*be, threads, opt);
    for (const Model& m : models) {
      const Timing step = bench_model(*be, m, threads, opt);
      const double flops_per_token =
          6.0 * static_cast<double>(m.params()) + 12.0 * m.L * m.C * static_cast<double>(m.T);
      char shape[96];
      std::snprintf(shape, sizeof shape, "L%d_C%d_NH%d_T%d_B%d_V%d", m.L, m.C, m.NH, m.T, m.B, m.V);
      emit("model_step_estimate", shape, threads, step, flops_per_token * m.N(), 0);
      std::printf(R"({"op": "model_tokens_per_s_estimate", "shape": "%s", "threads": %d, )"
                  R"("tokens_per_s": %.0f, "tokens_per_s_cpu": %.0f})"
                  "\n",
                  shape, threads, m.N() / step.ms * 1e3,
                  threads == 1 ? m.N() / step.cpu_ms * 1e3 : 0.0);
    }
  }
  return 0;
}
