#pragma once
// The family's normalisation over d_model: LayerNorm with weight and bias (gpt) or RMSNorm
// with weight only (llama, norm_eps). Replicated over the TP group: its input is the same
// on every TP rank, and so are its gradients.
//
// Under sequence parallelism (ModelContext::sp) it runs on this rank's rows() rows of the
// residual stream: statistics [rows()], output all-gathered into [N,C] (the TP-split
// product after it needs every row), input gradient [rows(),C]; its parameter gradients,
// from this rank's rows only, are summed over the TP group (2C floats per application).
#include <string>

#include "model/activation_arena.h"
#include "model/model_context.h"
#include "model/param_list.h"

namespace trainctl::model {

// One application's output [N,C] and statistics [rows()] each (RMSNorm leaves `mean`
// unused).
struct NormActs {
  float *out = nullptr, *mean = nullptr, *rstd = nullptr;
};

class Norm {
 public:
  // Declares `prefix`.weight (ones) and, for LayerNorm, `prefix`.bias (zeros).
  Norm(const ModelContext& ctx, ParamList& params, const std::string& prefix);
  int first_param() const { return w_; }
  int end_param() const { return (b_ >= 0 ? b_ : w_) + 1; }

  // The scratch shared by every norm (sequence parallelism only); before forward/backward.
  void allocate(ActivationArena& arena);
  // Buffers of its own for one application.
  NormActs take(ActivationArena& arena, MemoryUse use) const;
  // One application's kept buffers for micro-batch `slot`: the output a kept activation
  // under `key` (ActivationArena::keep), the statistics fp32.
  NormActs keep(ActivationArena& arena, const std::string& key, int slot) const;
  // The output is rounded to ModelContext::kept as it is written.
  void forward(const NormActs& a, const float* x) const;
  // dx = d(x) from dout = d(a.out); the parameter gradients accumulate.
  void backward(float* dx, const float* dout, const float* x, const NormActs& a) const;

 private:
  const ModelContext& ctx_;
  int w_ = -1, b_ = -1;
  float* sp_grads_ = nullptr;  // [2C] this rank's share of the parameter gradients
};

}  // namespace trainctl::model
