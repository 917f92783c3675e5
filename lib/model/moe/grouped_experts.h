#pragma once
// The experts of one MoE layer (model/moe/moe_ffn.h), computed grouped: the rows of every
// buffer are the layer's tokens sorted by expert (model/moe/router.h's dispatch), and each
// expert runs one product per weight over its own rows, never a loop over tokens.
//
// Each expert is the family's own feed-forward of width expert_ffn_hidden:
//   llama (Mixtral's names): w1 (gate) and w3 (up) [H, C], SwiGLU, w2 (down) [C, H];
//   gpt: c_fc [H, C] + bias, tanh-GELU, c_proj [C, H] + bias.
// Tensor parallelism splits every expert like the dense MLP: w1/w3/c_fc by rows, w2/c_proj
// by columns, so each TP rank holds every expert's slice of the hidden width and the
// outputs are partial sums that the MoE layer allreduces once. With expert parallelism each
// rank holds E / ep of the routed experts (still TP-split), and the rows are the tokens its
// ep group sent them (model/moe/expert_dispatch.h).
#include <string>
#include <vector>

#include "model/model_context.h"
#include "model/param_list.h"

namespace trainctl::model::moe {

class GroupedExperts {
 public:
  // Declares `count` experts: `prefix`.<first + i>.{w1,w3,w2}.weight (llama) or
  // `prefix`.<first + i>.{c_fc,c_proj}.{weight,bias} (gpt): their global index, so a
  // checkpoint names each expert the same whatever the expert parallelism. `routed`: the
  // tensors are ParamSpec::expert (held by one ep rank), not shared experts.
  GroupedExperts(const ModelContext& ctx, ParamList& params, const std::string& prefix, int count,
                 int first = 0, bool routed = false);

  int hidden_local() const { return H_local_; }
  // Floats per row of fc (llama gate | up: 2 H/tp; gpt: H/tp).
  int fc_width() const { return ctx_.config.llama() ? 2 * H_local_ : H_local_; }
  int count() const { return static_cast<int>(experts_.size()); }

  // Expert i's rows are [offsets[i], offsets[i + 1]) of x [rows, C], fc, act, out [rows, C].
  void fc_forward(const int* offsets, const float* x, float* fc) const;
  void activate(int rows, const float* fc, float* act) const;
  // out = act W_out^T (+ c_proj's bias on TP rank 0): partial sums over the TP group.
  void project(const int* offsets, const float* act, float* out) const;
  // From d_out [rows, C]: the output weights' gradients and d_act; then d_fc.
  void backward_out(const int* offsets, const float* d_out, const float* act, float* d_act) const;
  void activate_backward(int rows, const float* fc, const float* d_act, float* d_fc) const;
  // The input weights' gradients from d_fc and x.
  void weight_grads_in(const int* offsets, const float* d_fc, const float* x) const;
  // dx [rows, C] = d_fc W_in.
  void input_grad(const int* offsets, const float* d_fc, float* dx) const;

 private:
  // Calls f(expert, first row, rows) for each expert that received rows: `offsets[i]` is
  // expert i's first row in the grouped (sorted) buffers, offsets[count()] their end.
  template <class F>
  void for_each_group(const int* offsets, F&& f) const {
    for (int i = 0; i < count(); ++i) {
      const int n = offsets[i + 1] - offsets[i];
      if (n > 0) f(experts_[static_cast<size_t>(i)], static_cast<size_t>(offsets[i]), n);
    }
  }
  struct Expert {
    int w_in = -1, w_in2 = -1, b_in = -1;  // llama: w1, w3; gpt: c_fc weight, bias
    int w_out = -1, b_out = -1;            // llama: w2; gpt: c_proj weight, bias
  };
  bool stacked(const Expert& e) const;  // llama: w3 right after w1 in the flat buffer
  const ModelContext& ctx_;
  int H_local_;
  std::vector<Expert> experts_;
};

}  // namespace trainctl::model::moe
