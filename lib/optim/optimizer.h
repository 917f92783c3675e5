#pragma once
// Optimizers over a ParameterSet's flat buffers. Weight decay applies only to parameters
// marked for it (2-D weights), never to biases or LayerNorm parameters.
#include <cstdint>
#include <memory>
#include <string>

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

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update with learning rate `lr` from the gradients currently in the set.
  virtual void step(double lr) = 0;
  // Bytes of optimizer state held by this rank (reported in metrics).
  virtual size_t state_bytes() const = 0;
};

std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options,
                                          model::ParameterSet& params, ops::Backend& backend);

// Global L2 norm of the set's gradients (pass the norm of other shards in via the caller's
// reduction when sharded). Accumulated in double.
double grad_norm(const model::ParameterSet& params, ops::Backend& backend);

// Scales gradients so that their global norm is at most max_norm; returns the factor.
double clip_grad_norm(model::ParameterSet& params, ops::Backend& backend, double norm,
                      double max_norm);

}  // namespace trainctl::optim
