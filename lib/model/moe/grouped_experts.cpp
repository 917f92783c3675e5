#include "model/moe/grouped_experts.h"

namespace trainctl::model::moe {

GroupedExperts::GroupedExperts(const ModelContext& ctx, ParamList& params,
                               const std::string& prefix, int count, int first, bool routed)
    : ctx_(ctx), H_local_(ctx.config.moe.expert_ffn_hidden / ctx.tp_size()) {
  const int64_t C = ctx.config.d_model, H = ctx.config.moe.expert_ffn_hidden;
  const float out_std = residual_init_std(ctx.config);
  // dim -1: replicated over the TP group.
  auto add = [&](const std::string& name, Shape shape, Init init, float sd, bool decay, int dim) {
    ParamSpec spec = tp_split_spec(name, std::move(shape), init, sd, decay, params.shard(), dim);
    spec.expert = routed;
    return params.add(std::move(spec));
  };
  for (int i = 0; i < count; ++i) {
    const std::string p = prefix + "." + std::to_string(first + i) + ".";
    Expert e;
    if (ctx.config.llama()) {
      e.w_in = add(p + "w1.weight", {H, C}, Init::normal, kInitStd, true, 0);
      e.w_in2 = add(p + "w3.weight", {H, C}, Init::normal, kInitStd, true, 0);
      e.w_out = add(p + "w2.weight", {C, H}, Init::normal, out_std, true, 1);
    } else {
      e.w_in = add(p + "c_fc.weight", {H, C}, Init::normal, kInitStd, true, 0);
      e.b_in = add(p + "c_fc.bias", {H}, Init::zeros, 0, false, 0);
      e.w_out = add(p + "c_proj.weight", {C, H}, Init::normal, out_std, true, 1);
      e.b_out = add(p + "c_proj.bias", {C}, Init::zeros, 0, false, -1);
    }
    experts_.push_back(e);
  }
}

bool GroupedExperts::stacked(const Expert& e) const {
  // w1 [H/tp, C] directly followed by w3 in the flat buffer (and so in the gradient buffer,
  // which has the same offsets): together they are one [2 H/tp, C] matrix, whose products
  // with the rows write fc's gate | up halves in one call (half the calls, twice as wide).
  return e.w_in2 >= 0 &&
         ctx_.w().data(e.w_in2) == ctx_.w().data(e.w_in) + int64_t{H_local_} * ctx_.config.d_model;
}

void GroupedExperts::fc_forward(const int* offsets, const float* x, float* fc) const {
  const int C = ctx_.config.d_model, W = fc_width(), H = H_local_;
  auto& w = ctx_.w();
  for_each_group(offsets, [&](const Expert& e, size_t r0, int n) {
    const float* xi = x + r0 * C;
    float* fci = fc + r0 * W;
    if (stacked(e)) {
      ctx_.be().gemm(false, true, n, 2 * H, C, 1.0f, xi, C, w.data(e.w_in), C, 0.0f, fci, W);
    } else if (e.w_in2 >= 0) {
      ctx_.be().gemm(false, true, n, H, C, 1.0f, xi, C, w.data(e.w_in), C, 0.0f, fci, W);
      ctx_.be().gemm(false, true, n, H, C, 1.0f, xi, C, w.data(e.w_in2), C, 0.0f, fci + H, W);
    } else {
      ctx_.be().linear_forward(fci, xi, w.data(e.w_in), w.data(e.b_in), n, C, H);
    }
  });
}

void GroupedExperts::activate(int rows, const float* fc, float* act) const {
  if (rows == 0) return;
  if (ctx_.config.llama()) {
    ctx_.be().swiglu_forward(act, fc, rows, H_local_);
  } else {
    ctx_.be().gelu_forward(act, fc, static_cast<size_t>(rows) * H_local_);
  }
}

void GroupedExperts::project(const int* offsets, const float* act, float* out) const {
  const int C = ctx_.config.d_model, H = H_local_;
  auto& w = ctx_.w();
  for_each_group(offsets, [&](const Expert& e, size_t r0, int n) {
    const float* bias = e.b_out >= 0 && ctx_.bias_here() ? w.data(e.b_out) : nullptr;
    ctx_.be().linear_forward(out + r0 * C, act + r0 * H, w.data(e.w_out), bias, n, H, C);
  });
}

void GroupedExperts::backward_out(const int* offsets, const float* d_out, const float* act,
                                  float* d_act) const {
  const int C = ctx_.config.d_model, H = H_local_;
  auto& w = ctx_.w();
  for_each_group(offsets, [&](const Expert& e, size_t r0, int n) {
    // Row-parallel: c_proj's bias gradient is the full one on every TP rank.
    ctx_.be().linear_backward(d_act + r0 * H, w.grad(e.w_out),
                              e.b_out >= 0 ? w.grad(e.b_out) : nullptr, d_out + r0 * C,
                              act + r0 * H, w.data(e.w_out), n, H, C);
  });
}

void GroupedExperts::activate_backward(int rows, const float* fc, const float* d_act,
                                       float* d_fc) const {
  if (rows == 0) return;
  if (ctx_.config.llama()) {
    ctx_.be().swiglu_backward(d_fc, d_act, fc, rows, H_local_);
  } else {
    ctx_.be().gelu_backward(d_fc, fc, d_act, static_cast<size_t>(rows) * H_local_);
  }
}

void GroupedExperts::weight_grads_in(const int* offsets, const float* d_fc, const float* x) const {
  const int C = ctx_.config.d_model, W = fc_width(), H = H_local_;
  auto& w = ctx_.w();
  for_each_group(offsets, [&](const Expert& e, size_t r0, int n) {
    const float* xi = x + r0 * C;
    const float* di = d_fc + r0 * W;
    if (stacked(e)) {
      ctx_.be().gemm(true, false, 2 * H, C, n, 1.0f, di, W, xi, C, 1.0f, w.grad(e.w_in), C);
    } else if (e.w_in2 >= 0) {
      ctx_.be().gemm(true, false, H, C, n, 1.0f, di, W, xi, C, 1.0f, w.grad(e.w_in), C);
      ctx_.be().gemm(true, false, H, C, n, 1.0f, di + H, W, xi, C, 1.0f, w.grad(e.w_in2), C);
    } else {
      ctx_.be().linear_backward(nullptr, w.grad(e.w_in), w.grad(e.b_in), di, xi, w.data(e.w_in), n,
                                C, H);
    }
  });
}

void GroupedExperts::input_grad(const int* offsets, const float* d_fc, float* dx) const {
  const int C = ctx_.config.d_model, W = fc_width(), H = H_local_;
  auto& w = ctx_.w();
  for_each_group(offsets, [&](const Expert& e, size_t r0, int n) {
    const float* di = d_fc + r0 * W;
    float* dxi = dx + r0 * C;
    if (stacked(e)) {
      ctx_.be().gemm(false, false, n, C, 2 * H, 1.0f, di, W, w.data(e.w_in), C, 0.0f, dxi, C);
      return;
    }
    ctx_.be().gemm(false, false, n, C, H, 1.0f, di, W, w.data(e.w_in), C, 0.0f, dxi, C);
    if (e.w_in2 >= 0) {
      ctx_.be().gemm(false, false, n, C, H, 1.0f, di + H, W, w.data(e.w_in2), C, 1.0f, dxi, C);
    }
  });
}

}  // namespace trainctl::model::moe
