#pragma once
// One attention layer's key/value cache for incremental decoding (model/gpt_decode.h), for
// both attention kinds (multi-head: n_kv_head = n_head; grouped-query with RoPE): each new
// token's keys and values are appended at its position, and its query attends to every
// position cached so far, so a token costs O(position) instead of a forward over the
// whole sequence.
#include "model/model_config.h"
#include "ops/backend.h"

namespace trainctl::model {

struct KvCache {
  float* k = nullptr;  // [max_seq_len, n_kv_head * head_dim], backend memory
  float* v = nullptr;

  // Floats in each of k and v.
  static size_t floats(const ModelConfig& config);
  // qkv: the q | k | v row [(n_head + 2 n_kv_head) head_dim] of the token at `pos` (llama
  // rotates q and k here, at that position); appends its k and v at `pos` and writes
  // y [n_head * head_dim] = attention over positions 0 .. pos.
  void attend(ops::Backend& be, const ModelConfig& config, float* qkv, int pos, float* y) const;
};

}  // namespace trainctl::model
