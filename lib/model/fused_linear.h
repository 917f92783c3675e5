#pragma once
// Products with parameters declared side by side whose outputs share one activation row of
// `out_width` floats (llama's q | k | v and gate | up are separate parameters, model
// /attention_gqa.h and model/mlp_swiglu.h, that each split evenly over the TP group): one
// product per parameter, into or out of its columns. N = the context's tokens.
#include <initializer_list>

#include "model/model_context.h"

namespace trainctl::model {

// out = inp [N, IC] x each weight's rows^T, side by side.
void fused_forward(const ModelContext& ctx, float* out, int out_width, const float* inp,
                   std::initializer_list<int> ws, int IC);
// Each weight's gradient += its columns of dout^T x inp; kept for W (with copies of dout and
// inp) while ctx.defer is set.
void fused_weight_grads(const ModelContext& ctx, const float* dout, int out_width, const float* inp,
                        std::initializer_list<int> ws, int IC);
// dinp = the sum over the weights of their columns of dout x weight.
void fused_input_grad(const ModelContext& ctx, float* dinp, const float* dout, int out_width,
                      std::initializer_list<int> ws, int IC);

// The backward of out[N, OC] = inp[N, IC] x weight^T + bias (bias < 0: none), by parameter
// index: dinp = dout x weight now (unless dinp is null); the weight and bias gradients (+=)
// now with the same call as ops::Backend::linear_backward, or, while ctx.defer is set, in W
// with copies of dout and inp (the input gradient then comes from Backend::gemm, the same
// product on the same operands).
void linear_backward_split(const ModelContext& ctx, float* dinp, int weight, int bias,
                           const float* dout, const float* inp, int IC, int OC);

}  // namespace trainctl::model
