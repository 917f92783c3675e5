#include "model/kv_cache.h"

namespace trainctl::model {

size_t KvCache::floats(const ModelConfig& c) {
  return static_cast<size_t>(c.max_seq_len) * c.kv_heads() * static_cast<size_t>(c.head_dim());
}

void KvCache::attend(ops::Backend& be, const ModelConfig& c, float* qkv, int pos, float* y) const {
  const int NH = c.n_head, NKV = c.kv_heads(), hd = c.head_dim();
  const int q_width = NH * hd, kv_width = NKV * hd, W = q_width + 2 * kv_width;
  const size_t t = static_cast<size_t>(pos);
  if (c.llama()) be.rope_forward(qkv, 1, 1, W, NH + NKV, hd, c.rope_theta, pos);
  be.copy(k + t * kv_width, qkv + q_width, static_cast<size_t>(kv_width));
  be.copy(v + t * kv_width, qkv + q_width + kv_width, static_cast<size_t>(kv_width));
  be.attention_decode(y, qkv, k, v, pos + 1, NH, NKV, hd);
}

}  // namespace trainctl::model
