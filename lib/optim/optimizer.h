#pragma once
// Optimizers over a ParameterSet's flat buffers. Weight decay applies only to parameters
// marked for it (2-D weights), never to biases or LayerNorm parameters.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/parameters.h"
#include "ops/backend.h"

namespace trainctl::optim {

struct OptimizerOptions {
  std::string type = "adamw";  // adamw | sgd (sgd: momentum = beta1)
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

// An optimizer's state for checkpoints: the update count and named per-element buffers
// laid out like the ParameterSet's flat buffer (params.total() floats each), so each
// parameter's state can be stored next to it, sliced and resharded like it.
struct OptimizerState {
  int64_t step = 0;
  std::vector<std::string> names;  // AdamW: exp_avg, exp_avg_sq; SGD: momentum_buffer
  std::vector<std::vector<float>> buffers;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // The whole state of this rank's parameters (collective over the DP group when the
  // state is sharded: every DP rank must call it).
  virtual OptimizerState save_state() = 0;
  // Restores a state saved by the same kind of optimizer for the same parameter layout
  // (each rank keeps the part it owns). Throws std::invalid_argument on a mismatch.
  virtual void load_state(const OptimizerState& state) = 0;
  // Names of the state buffers (for checkpoint tensors), in save_state() order.
  virtual std::vector<std::string> state_names() const = 0;
  // One update with learning rate `lr` from the gradients currently in the set.
  virtual void step(double lr) = 0;
  // Bytes of optimizer state held by this rank (reported in metrics).
  virtual size_t state_bytes() const = 0;
};

// `weights`: the fp32 values the update writes, laid out like the flat buffer; null: the
// set's own (params.data()). The mixed-precision layout passes its fp32 master weights
// (parallel/mixed_params.h).
std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options,
                                          model::ParameterSet& params, ops::Backend& backend,
                                          float* weights = nullptr);

// Throws std::invalid_argument unless `state` has exactly `names` and buffers of
// params.total() floats.
void check_state(const OptimizerState& state, const std::vector<std::string>& names,
                 const model::ParameterSet& params);

// Global L2 norm of the set's gradients (pass the norm of other shards in via the caller's
// reduction when sharded). Accumulated in double.
double grad_norm(const model::ParameterSet& params, ops::Backend& backend);

// The factor that brings a gradient of global norm `norm` to at most max_norm (1 when
// max_norm <= 0, the norm is within it, or not finite). Every clipping path uses it, so
// sharded and unsharded runs scale by the same float.
double clip_factor(double norm, double max_norm);

// Scales gradients so that their global norm is at most max_norm; returns the factor.
double clip_grad_norm(model::ParameterSet& params, ops::Backend& backend, double norm,
                      double max_norm);

}  // namespace trainctl::optim
