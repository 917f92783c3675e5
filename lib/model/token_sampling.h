#pragma once
// Next-token choice from logits: greedy (temperature 0) or softmax(logits / temperature)
// restricted to the top_k most likely tokens, drawn from a seeded generator so a seed
// always yields the same tokens.
#include <cstdint>
#include <random>
#include <vector>

#include "model/gpt_decode.h"

namespace trainctl::model {

struct SampleOptions {
  float temperature = 1.0f;  // 0: greedy (argmax; ties to the lowest id)
  int top_k = 0;             // 0: the whole vocabulary
  uint64_t seed = 0;
};

// The index of the largest logit (the lowest index among equals).
int32_t argmax(const std::vector<float>& logits);

// One token from `logits` (see SampleOptions); advances `rng` once unless greedy.
int32_t sample_token(const std::vector<float>& logits, const SampleOptions& options,
                     std::mt19937_64& rng);

// Feeds `prompt` (non-empty) through the decoder from an empty cache, then draws
// `max_new_tokens` tokens, each fed back. When the cache is full (max_seq_len), the context
// is cut to its last max_seq_len / 2 tokens and re-fed (nanoGPT crops likewise). Returns the
// new tokens; `on_token` (if set) sees each as it is drawn.
std::vector<int32_t> generate(GptDecoder& decoder, const std::vector<int32_t>& prompt,
                              int max_new_tokens, const SampleOptions& options,
                              const std::function<void(int32_t)>& on_token = {});

}  // namespace trainctl::model
