#include "model/param_list.h"

#include <cmath>

namespace trainctl::model {

ParamSpec tp_split_spec(std::string name, Shape global, Init init, float std_dev, bool decay,
                        const GptShardSpec& shard, int dim, int blocks) {
  ParamSpec p;
  p.name = std::move(name);
  p.shard.global_shape = std::move(global);
  p.init = init;
  p.init_std = std_dev;
  p.weight_decay = decay;
  p.shard.dim = dim;
  p.shard.blocks = blocks;
  p.shard.index = shard.tp_rank;
  p.shard.count = shard.tp_size;
  return p;
}

int ParamList::split(std::string name, Shape global, Init init, float std_dev, bool decay, int dim,
                     int blocks) {
  return add(
      tp_split_spec(std::move(name), std::move(global), init, std_dev, decay, shard_, dim, blocks));
}

int ParamList::replicated(std::string name, Shape global, Init init, float std_dev, bool decay) {
  return add(tp_split_spec(std::move(name), std::move(global), init, std_dev, decay, shard_, -1));
}

int ParamList::add(ParamSpec spec) {
  specs_.push_back(std::move(spec));
  return size() - 1;
}

float residual_init_std(const ModelConfig& config) {
  return 0.02f / std::sqrt(2.0f * static_cast<float>(config.n_layer));
}

}  // namespace trainctl::model
