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

// The llama experts have no biases: every product is a plain gemm, and the experts' products
// of one step go to the backend together (Backend::gemm_grouped: on the CPU each thread
// takes whole experts instead of every expert being split over the threads).
void GroupedExperts::fc_forward(const int* offsets, const float* x, float* fc) const {
  const int C = ctx_.config.d_model, W = fc_width(), H = H_local_;
  auto& w = ctx_.w();
  if (!ctx_.config.llama()) {
    for_each_group(offsets, [&](const Expert& e, size_t r0, int n) {
      ctx_.be().linear_forward(fc + r0 * W, x + r0 * C, w.data(e.w_in), w.data(e.b_in), n, C, H);
    });
    return;
  }
  std::vector<ops::Backend::GemmGroup> g;
  for_each_group(offsets, [&](const Expert& e, size_t r0, int n) {
    const float* xi = x + r0 * C;
    float* fci = fc + r0 * W;
    if (stacked(e)) {
      g.push_back({n, 2 * H, C, xi, C, w.data(e.w_in), C, fci, W});
    } else {
      g.push_back({n, H, C, xi, C, w.data(e.w_in), C, fci, W});
      g.push_back({n, H, C, xi, C, w.data(e.w_in2), C, fci + H, W});
    }
  });
  ctx_.be().gemm_grouped(false, true, 1.0f, 0.0f, g);
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
  if (ctx_.config.llama()) {
    std::vector<ops::Backend::GemmGroup> g;
    for_each_group(offsets, [&](const Expert& e, size_t r0, int n) {
      g.push_back({n, C, H, act + r0 * H, H, w.data(e.w_out), H, out + r0 * C, C});
    });
    ctx_.be().gemm_grouped(false, true, 1.0f, 0.0f, g);
    return;
  }
  for_each_group(offsets, [&](const Expert& e, size_t r0, int n) {
    const float* bias = ctx_.bias_here() ? w.data(e.b_out) : nullptr;
    ctx_.be().linear_forward(out + r0 * C, act + r0 * H, w.data(e.w_out), bias, n, H, C);
  });
}

void GroupedExperts::backward_out(const int* offsets, const float* d_out, const float* act,
                                  float* d_act) const {
  const int C = ctx_.config.d_model, H = H_local_;
  auto& w = ctx_.w();
  if (ctx_.config.llama()) {
    // d_act = d_out W2; dW2 += d_out^T act.
    std::vector<ops::Backend::GemmGroup> da, dw;
    for_each_group(offsets, [&](const Expert& e, size_t r0, int n) {
      da.push_back({n, H, C, d_out + r0 * C, C, w.data(e.w_out), H, d_act + r0 * H, H});
      dw.push_back({C, H, n, d_out + r0 * C, C, act + r0 * H, H, w.grad(e.w_out), H});
    });
    ctx_.be().gemm_grouped(false, false, 1.0f, 0.0f, da);
    ctx_.be().gemm_grouped(true, false, 1.0f, 1.0f, dw);
    return;
  }
  for_each_group(offsets, [&](const Expert& e, size_t r0, int n) {
    // Row-parallel: c_proj's bias gradient is the full one on every TP rank.
    ctx_.be().linear_backward(d_act + r0 * H, w.grad(e.w_out), w.grad(e.b_out), d_out + r0 * C,
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
  if (!ctx_.config.llama()) {
    for_each_group(offsets, [&](const Expert& e, size_t r0, int n) {
      ctx_.be().linear_backward(nullptr, w.grad(e.w_in), w.grad(e.b_in), d_fc + r0 * W, x + r0 * C,
                                w.data(e.w_in), n, C, H);
    });
    return;
  }
  std::vector<ops::Backend::GemmGroup> g;
  for_each_group(offsets, [&](const Expert& e, size_t r0, int n) {
    const float* xi = x + r0 * C;
    const float* di = d_fc + r0 * W;
    if (stacked(e)) {
      g.push_back({2 * H, C, n, di, W, xi, C, w.grad(e.w_in), C});
    } else {
      g.push_back({H, C, n, di, W, xi, C, w.grad(e.w_in), C});
      g.push_back({H, C, n, di + H, W, xi, C, w.grad(e.w_in2), C});
    }
  });
  ctx_.be().gemm_grouped(true, false, 1.0f, 1.0f, g);
}

void GroupedExperts::input_grad(const int* offsets, const float* d_fc, float* dx) const {
  const int C = ctx_.config.d_model, W = fc_width(), H = H_local_;
  auto& w = ctx_.w();
  // dx = d_fc W_in: llama's gate and up halves both feed x; unstacked, the up half adds on.
  std::vector<ops::Backend::GemmGroup> first, up;
  for_each_group(offsets, [&](const Expert& e, size_t r0, int n) {
    const float* di = d_fc + r0 * W;
    float* dxi = dx + r0 * C;
    if (stacked(e)) {
      first.push_back({n, C, 2 * H, di, W, w.data(e.w_in), C, dxi, C});
      return;
    }
    first.push_back({n, C, H, di, W, w.data(e.w_in), C, dxi, C});
    if (e.w_in2 >= 0) up.push_back({n, C, H, di + H, W, w.data(e.w_in2), C, dxi, C});
  });
  ctx_.be().gemm_grouped(false, false, 1.0f, 0.0f, first);
  ctx_.be().gemm_grouped(false, false, 1.0f, 1.0f, up);
}

}  // namespace trainctl::model::moe
