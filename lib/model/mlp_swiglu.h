#pragma once
// Llama's feed-forward: gate_proj and up_proj to ffn_hidden, SwiGLU (silu(gate) * up),
// down_proj back to d_model; no biases. Tensor parallelism splits gate and up by rows and
// down_proj by columns (one TP allreduce each way).
#include <string>
#include <vector>

#include "model/block.h"
#include "model/param_list.h"

namespace trainctl::model {

class SwiGluMlp final : public Branch {
 public:
  // Declares `prefix`.{gate,up,down}_proj.weight.
  SwiGluMlp(const ModelContext& ctx, ParamList& params, const std::string& prefix);

  void allocate(ActivationArena& arena, int slots) override;
  void forward(int slot, const float* h, float* y) override;
  void refill(int slot, float* y) override;
  void backward(int slot, const float* h, const float* dy, float* dh,
                const PieceReport& report) override;
  double macs_per_token(int seq_len) const override;

 private:
  struct Acts {
    float* fc;   // [N, 2H/tp] gate | up: kept unless recomputation is full
    float* act;  // [N, H/tp] SwiGLU output: kept only without recomputation
  };
  // The activation of the kept pre-activation (forward and selective refill), rounded.
  void activate(const Acts& a);
  void project_out(const Acts& a, float* y);

  const ModelContext& ctx_;
  int H_local_;  // ffn_hidden / tp
  int gate_, up_, down_;
  std::vector<Acts> acts_;  // per slot
  // Backward scratch: d(SwiGLU output) [N, H/tp], d(gate | up) [N, 2H/tp].
  float *d_act_ = nullptr, *d_fc_ = nullptr;
};

}  // namespace trainctl::model
