#include "model/fused_linear.h"

#include <vector>

#include "model/deferred_weight_grads.h"

namespace trainctl::model {

namespace {
int rows_of(const ModelContext& ctx, int w) {
  return static_cast<int>(ctx.w().at(static_cast<size_t>(w)).shape[0]);
}
}  // namespace

void fused_forward(const ModelContext& ctx, float* out, int out_width, const float* inp,
                   std::initializer_list<int> ws, int IC) {
  const int N = ctx.N();
  int col = 0;
  for (int w : ws) {
    const int rows = rows_of(ctx, w);
    ctx.be().gemm(false, true, N, rows, IC, 1.0f, inp, IC, ctx.w().data(w), IC, 0.0f, out + col,
                  out_width);
    col += rows;
  }
}

namespace {
void weight_grads_now(const ModelContext& ctx, const float* dout, int out_width, const float* inp,
                      const std::vector<int>& ws, int IC) {
  const int N = ctx.N();
  int col = 0;
  for (int w : ws) {
    const int rows = rows_of(ctx, w);
    ctx.be().gemm(true, false, rows, IC, N, 1.0f, dout + col, out_width, inp, IC, 1.0f,
                  ctx.w().grad(w), IC);
    col += rows;
  }
}
}  // namespace

void fused_weight_grads(const ModelContext& ctx, const float* dout, int out_width, const float* inp,
                        std::initializer_list<int> ws, int IC) {
  std::vector<int> weights(ws);
  if (ctx.defer == nullptr) {
    weight_grads_now(ctx, dout, out_width, inp, weights, IC);
    return;
  }
  const size_t N = static_cast<size_t>(ctx.N());
  const float* kept_dout = ctx.defer->keep(dout, N * static_cast<size_t>(out_width));
  const float* kept_inp =
      ctx.deferred_inputs_in_slot() ? inp : ctx.defer->keep(inp, N * static_cast<size_t>(IC));
  ctx.defer->add([&ctx, kept_dout, out_width, kept_inp, weights = std::move(weights), IC] {
    weight_grads_now(ctx, kept_dout, out_width, kept_inp, weights, IC);
  });
}

void linear_backward_split(const ModelContext& ctx, float* dinp, int weight, int bias,
                           const float* dout, const float* inp, int IC, int OC) {
  const int N = ctx.N();
  auto& be = ctx.be();
  auto& w = ctx.w();
  if (ctx.defer == nullptr) {
    be.linear_backward(dinp, w.grad(weight), bias >= 0 ? w.grad(bias) : nullptr, dout, inp,
                       w.data(weight), N, IC, OC);
    return;
  }
  // The copies first: dinp may be a buffer the caller's inp or dout lived in.
  const float* kept_dout = ctx.defer->keep(dout, static_cast<size_t>(N) * OC);
  const float* kept_inp =
      ctx.deferred_inputs_in_slot() ? inp : ctx.defer->keep(inp, static_cast<size_t>(N) * IC);
  if (dinp != nullptr) {
    be.gemm(false, false, N, IC, OC, 1.0f, dout, OC, w.data(weight), IC, 0.0f, dinp, IC);
  }
  ctx.defer->add([&ctx, weight, bias, kept_dout, kept_inp, IC, OC] {
    auto& p = ctx.w();
    ctx.be().linear_backward(nullptr, p.grad(weight), bias >= 0 ? p.grad(bias) : nullptr, kept_dout,
                             kept_inp, p.data(weight), ctx.N(), IC, OC);
  });
}

void fused_input_grad(const ModelContext& ctx, float* dinp, const float* dout, int out_width,
                      std::initializer_list<int> ws, int IC) {
  const int N = ctx.N();
  int col = 0;
  for (int w : ws) {
    const int rows = rows_of(ctx, w);
    ctx.be().gemm(false, false, N, IC, rows, 1.0f, dout + col, out_width, ctx.w().data(w), IC,
                  col == 0 ? 0.0f : 1.0f, dinp, IC);
    col += rows;
  }
}

}  // namespace trainctl::model
