// The model as blocks (model/block.h): a new Branch plugs into the transformer block
// without touching the other parts, and the activation arena that sizes and counts every
// buffer.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/activation_arena.h"
#include "model/attention_mha.h"
#include "model/block.h"
#include "model/param_list.h"
#include "model/transformer_block.h"
#include "util/random.h"

using namespace trainctl;

namespace {

// A feed-forward the model does not know: y = h W^T, keeping nothing of its own (what an
// MoE layer would be, from the block's side).
class LinearFfn final : public model::Branch {
 public:
  LinearFfn(const model::ModelContext& ctx, model::ParamList& params, const std::string& prefix)
      : ctx_(ctx) {
    const int64_t C = ctx.config.d_model;
    first_ = params.replicated(prefix + ".weight", {C, C}, model::Init::normal, 0.02f, true);
    end_ = first_ + 1;
  }
  void allocate(model::ActivationArena&, int) override {}
  void forward(int, const float* h, float* y) override {
    const int C = ctx_.config.d_model;
    ctx_.be().linear_forward(y, h, ctx_.w().data(first_), nullptr, ctx_.N(), C, C);
  }
  void refill(int, float* y) override {
    if (y != nullptr) throw std::logic_error("LinearFfn keeps nothing to rebuild y from");
  }
  void backward(int, const float* h, const float* dy, float* dh,
                const model::PieceReport& report) override {
    const int C = ctx_.config.d_model;
    auto& w = ctx_.w();
    ctx_.be().linear_backward(dh, w.grad(first_), nullptr, dy, h, w.data(first_), ctx_.N(), C, C);
    report.ready();
  }
  double macs_per_token(int) const override {
    return static_cast<double>(ctx_.config.d_model) * ctx_.config.d_model;
  }

 private:
  const model::ModelContext& ctx_;
};

struct Result {
  std::vector<std::string> names;
  std::vector<int> piece_starts, reported;
  double macs = 0, analytic = 0, finite_difference = 0;
  std::vector<float> grads, dx;
};

// One block of a GPT-sized model with LinearFfn as its feed-forward: forward, backward of
// loss = sum(out * r), and a finite-difference check of the parameter gradient.
Result run_block(model::Recompute mode) {
  auto be = ops::make_cpu_backend({});
  model::ModelContext ctx;
  ctx.config.vocab_size = 19;
  ctx.config.max_seq_len = 8;
  ctx.config.n_head = 2;
  ctx.config.d_model = 16;
  ctx.shard = model::GptShardSpec::whole(ctx.config);
  ctx.B = 2;
  ctx.T = 4;
  ctx.recompute = mode;
  model::ParameterSet params(*be);
  ctx.backend = be.get();
  ctx.params = &params;
  model::ParamList list(ctx.shard);
  model::TransformerBlock block(
      ctx, list, "h.0.", "ln_1",
      [&](model::ParamList& p) {
        return std::make_unique<model::MhaAttention>(ctx, p, "h.0.attn");
      },
      "ln_2", [&](model::ParamList& p) { return std::make_unique<LinearFfn>(ctx, p, "h.0.ffn"); });
  Result r;
  for (const model::ParamSpec& s : list.specs()) {
    params.declare(s);
    r.names.push_back(s.name);
  }
  params.allocate();
  params.initialize(4);
  for (int64_t i = 0; i < params.total(); ++i) params.data()[i] *= 4.0f;  // signal everywhere
  model::ActivationArena arena(be.get());
  block.allocate(arena, 1);
  r.piece_starts = block.piece_starts();
  r.macs = block.macs_per_token(ctx.T);

  const size_t NC = ctx.NC();
  std::vector<float> x(NC), dres(NC), w0(params.data(), params.data() + params.total());
  for (size_t i = 0; i < NC; ++i) x[i] = static_cast<float>(rng::normal(1, i));
  auto loss = [&] {
    const float* out = block.forward(0, x.data());
    double s = 0;
    for (size_t i = 0; i < NC; ++i) s += static_cast<double>(out[i]) * rng::normal(2, i);
    return s;
  };
  loss();
  for (size_t i = 0; i < NC; ++i) dres[i] = static_cast<float>(rng::normal(2, i));
  const std::function<void(int)> hook = [&](int piece) { r.reported.push_back(piece); };
  block.recompute(0, x.data());
  block.backward(0, x.data(), dres.data(), model::PieceReport(&hook, 0));
  r.grads.assign(params.grads(), params.grads() + params.total());
  r.dx = dres;
  for (size_t i = 0; i < w0.size(); ++i) r.analytic += rng::normal(3, i) * r.grads[i];
  auto loss_at = [&](double eps) {
    for (size_t i = 0; i < w0.size(); ++i) {
      params.data()[i] = w0[i] + static_cast<float>(eps * rng::normal(3, i));
    }
    return loss();
  };
  r.finite_difference = (loss_at(1e-3) - loss_at(-1e-3)) / 2e-3;
  return r;
}

}  // namespace

TEST_CASE("a new feed-forward Branch plugs into the transformer block", "[model][blocks]") {
  const Result none = run_block(model::Recompute::none);
  // Declared in block order, the new branch's parameter last; its piece reported first.
  const std::vector<std::string> names = {
      "h.0.ln_1.weight",      "h.0.ln_1.bias",          "h.0.attn.c_attn.weight",
      "h.0.attn.c_attn.bias", "h.0.attn.c_proj.weight", "h.0.attn.c_proj.bias",
      "h.0.ln_2.weight",      "h.0.ln_2.bias",          "h.0.ffn.weight"};
  CHECK(none.names == names);
  CHECK(none.piece_starts == std::vector<int>{8, 6, 2, 0});
  CHECK(none.reported == std::vector<int>{0, 1, 2, 3});
  // Attention's 4 C^2 + 2 T C and the new branch's C^2, C = 16, T = 4.
  CHECK(none.macs == 5.0 * 16 * 16 + 2.0 * 4 * 16);
  INFO("analytic " << none.analytic << " finite difference " << none.finite_difference);
  CHECK(std::abs(none.analytic) > 1e-1);
  CHECK(none.finite_difference == Approx(none.analytic).epsilon(1e-2));
  // Recomputation around the new branch: the same bits.
  for (model::Recompute mode : {model::Recompute::selective, model::Recompute::full}) {
    INFO(model::to_string(mode));
    const Result r = run_block(mode);
    REQUIRE(r.grads.size() == none.grads.size());
    CHECK(std::memcmp(r.grads.data(), none.grads.data(), r.grads.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(r.dx.data(), none.dx.data(), r.dx.size() * sizeof(float)) == 0);
    CHECK(r.reported == none.reported);
  }
}

TEST_CASE("the activation arena counts what it allocates and shares by key", "[model][blocks]") {
  auto be = ops::make_cpu_backend({});
  for (ops::Backend* backend : {static_cast<ops::Backend*>(nullptr), be.get()}) {
    INFO((backend != nullptr ? "allocating" : "counting"));
    model::ActivationArena arena(backend);
    float* a = arena.take(64, model::MemoryUse::activations);
    float* s = arena.shared("kind.scratch", 32, model::MemoryUse::workspace);
    CHECK(arena.shared("kind.scratch", 16, model::MemoryUse::workspace) == s);
    CHECK_THROWS_AS(arena.shared("kind.scratch", 33, model::MemoryUse::workspace),
                    std::logic_error);
    CHECK_THROWS_AS(arena.shared("kind.scratch", 32, model::MemoryUse::recompute),
                    std::logic_error);
    arena.shared("other.scratch", 16, model::MemoryUse::recompute);
    CHECK(arena.floats().activations == 64);
    CHECK(arena.floats().workspace == 32);
    CHECK(arena.floats().recompute == 16);
    CHECK((a == nullptr) == (backend == nullptr));
    if (backend != nullptr) CHECK(a != s);
  }
  CHECK(be->peak_allocated_bytes() == (64 + 32 + 16) * sizeof(float));
}
