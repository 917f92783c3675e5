#include "train/model_setup.h"

namespace trainctl::train {

model::GptConfig gpt_config(const config::JobSpec& spec) {
  model::GptConfig c;
  c.vocab_size = spec.model.vocab_size;
  c.max_seq_len = spec.model.seq_len;
  c.n_layer = spec.model.n_layer;
  c.n_head = spec.model.n_head;
  c.d_model = spec.model.d_model;
  return c;
}

data::DatasetOptions dataset_options(const config::JobSpec& spec) {
  data::DatasetOptions d;
  d.type = spec.data.type;
  d.path = spec.data.path;
  d.val_fraction = spec.data.val_fraction;
  d.seed = spec.seed;
  d.vocab_size = spec.model.vocab_size;
  d.seq_len = spec.model.seq_len;
  return d;
}

optim::OptimizerOptions optimizer_options(const config::JobSpec& spec) {
  optim::OptimizerOptions o;
  o.type = spec.optimizer.type;
  o.beta1 = spec.optimizer.beta1;
  o.beta2 = spec.optimizer.beta2;
  o.eps = spec.optimizer.eps;
  o.weight_decay = spec.optimizer.weight_decay;
  return o;
}

ops::BackendOptions backend_options(const config::JobSpec& spec) {
  ops::BackendOptions o;
  o.threads = spec.training.threads;
  switch (spec.precision.compute) {
    case config::DType::fp32:
      o.matmul = DType::fp32;
      break;
    case config::DType::bf16:
      o.matmul = DType::bf16;
      break;
    case config::DType::fp16:
      o.matmul = DType::fp16;
      break;
  }
  return o;
}

optim::LossScalerOptions loss_scaler_options(const config::JobSpec& spec) {
  optim::LossScalerOptions o;
  o.initial_scale = spec.precision.loss_scale;
  o.growth_interval = spec.precision.loss_scale_growth_steps;
  return o;
}

}  // namespace trainctl::train
