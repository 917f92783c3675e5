#pragma once
// The parameters of a model shard as its parts declare them (model/block.h), in flat-buffer
// order. A part declares each of its tensors once, with its checkpoint name, global shape,
// initialisation and tensor-parallel layout, and keeps the index add() returns: the
// parameter's index in the model's ParameterSet, which declares the list in this order.
#include <string>
#include <vector>

#include "model/shard.h"

namespace trainctl::model {

class ParamList {
 public:
  explicit ParamList(const GptShardSpec& shard) : shard_(shard) {}

  // Split along `dim` over the TP group, in `blocks` equal blocks (TensorShard).
  int split(std::string name, Shape global, Init init, float std_dev, bool decay, int dim,
            int blocks = 1);
  // A full copy on every TP rank.
  int replicated(std::string name, Shape global, Init init, float std_dev, bool decay);
  int add(ParamSpec spec);

  int size() const { return static_cast<int>(specs_.size()); }
  const std::vector<ParamSpec>& specs() const { return specs_; }
  const GptShardSpec& shard() const { return shard_; }

 private:
  GptShardSpec shard_;
  std::vector<ParamSpec> specs_;
};

// A parameter split over `shard`'s TP group along `dim` (no declaration).
ParamSpec tp_split_spec(std::string name, Shape global, Init init, float std_dev, bool decay,
                        const GptShardSpec& shard, int dim, int blocks = 1);

// GPT-2's initialisation scales: N(0, 0.02), and for the projections that write into the
// residual stream 0.02 / sqrt(2 n_layer), so its variance does not grow with depth.
constexpr float kInitStd = 0.02f;
float residual_init_std(const ModelConfig& config);

}  // namespace trainctl::model
