#include "model/fused_linear.h"

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

void fused_weight_grads(const ModelContext& ctx, const float* dout, int out_width, const float* inp,
                        std::initializer_list<int> ws, int IC) {
  const int N = ctx.N();
  int col = 0;
  for (int w : ws) {
    const int rows = rows_of(ctx, w);
    ctx.be().gemm(true, false, rows, IC, N, 1.0f, dout + col, out_width, inp, IC, 1.0f,
                  ctx.w().grad(w), IC);
    col += rows;
  }
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
