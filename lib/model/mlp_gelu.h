#pragma once
// GPT-2's feed-forward (nanoGPT's MLP): c_fc to 4 d_model with bias, tanh-GELU, c_proj back
// with bias. Megatron tensor parallelism: c_fc column-parallel, c_proj row-parallel.
#include <string>
#include <vector>

#include "model/block.h"
#include "model/param_list.h"

namespace trainctl::model {

class GeluMlp final : public Branch {
 public:
  // Declares `prefix`.c_fc.{weight,bias} and `prefix`.c_proj.{weight,bias}.
  GeluMlp(const ModelContext& ctx, ParamList& params, const std::string& prefix);

  void allocate(ActivationArena& arena, int slots) override;
  void forward(int slot, const float* h, float* y) override;
  void refill(int slot, float* y) override;
  void backward(int slot, const float* h, const float* dy, float* dh,
                const PieceReport& report) override;
  double macs_per_token(int seq_len) const override;

 private:
  struct Acts {
    float* fc;    // [N, 4C/tp] before GELU: kept unless recomputation is full
    float* gelu;  // [N, 4C/tp] after: kept only without recomputation
  };
  // The activation of the kept pre-activation (forward and selective refill), rounded.
  void activate(const Acts& a);
  void project_out(const Acts& a, float* y);

  const ModelContext& ctx_;
  int H_local_;  // 4 d_model / tp
  int fc_w_, fc_b_, proj_w_, proj_b_;
  std::vector<Acts> acts_;  // per slot
  // Backward scratch: d(GELU output), d(c_fc output) [N, 4C/tp] each.
  float *d_act_ = nullptr, *d_fc_ = nullptr;
};

}  // namespace trainctl::model
