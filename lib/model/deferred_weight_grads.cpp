#include "model/deferred_weight_grads.h"

#include <algorithm>

namespace trainctl::model {

DeferredWeightGrads::~DeferredWeightGrads() {
  for (Buffer& b : buffers_) backend_.free(b.data);
}

const float* DeferredWeightGrads::keep(const float* src, size_t n) {
  // Every B of a chunk keeps the same sizes in the same order: after the first step the
  // k-th copy finds its buffer already there.
  if (used_ == buffers_.size()) buffers_.push_back({});
  Buffer& b = buffers_[used_++];
  if (b.capacity < n) {
    if (b.data != nullptr) backend_.free(b.data);
    b.data = static_cast<float*>(backend_.alloc(n * sizeof(float)));
    b.capacity = n;
  }
  backend_.copy(b.data, src, n);
  return b.data;
}

void DeferredWeightGrads::run() {
  for (auto& work : work_) work();
  work_.clear();
  used_ = 0;
}

size_t DeferredWeightGrads::kept_floats() const {
  size_t n = 0;
  for (const Buffer& b : buffers_) n += b.capacity;
  return n;
}

int64_t deferred_weight_floats(const ModelConfig& config, const GptShardSpec& shard, int64_t tokens,
                               bool inputs_in_slot) {
  const int64_t C = config.d_model, t = shard.tp_size, H = config.mlp_hidden();
  const int64_t in = inputs_in_slot ? 0 : 1;
  // (input, output gradient) of: the q|k|v (c_attn) product, the attention's output
  // projection, then the dense feed-forward's up (c_fc, or gate|up) and down products.
  // Mixture-of-experts feed-forwards compute their weight gradients in B.
  const int64_t attention = (in * C + config.qkv_rows() / t) + (in * C / t + C);
  const int64_t up_width = config.llama() ? 2 * H : H;
  const int64_t feed_forward = (in * C + up_width / t) + (in * H / t + C);
  int64_t per_token = 0;
  for (const LayerRange& chunk : shard.chunks) {
    int64_t of_chunk = 0;
    for (int l = chunk.begin; l < chunk.end; ++l) {
      of_chunk += attention + (config.moe.layer(l) ? 0 : feed_forward);
    }
    per_token = std::max(per_token, of_chunk);
  }
  return per_token * tokens;
}

}  // namespace trainctl::model
