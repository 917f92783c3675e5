#include "model/token_sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace trainctl::model {

int32_t argmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

int32_t sample_token(const std::vector<float>& logits, const SampleOptions& options,
                     std::mt19937_64& rng) {
  if (options.temperature <= 0.0f) return argmax(logits);
  const size_t V = logits.size();
  std::vector<int32_t> ids(V);
  std::iota(ids.begin(), ids.end(), 0);
  size_t keep = V;
  if (options.top_k > 0 && static_cast<size_t>(options.top_k) < V) {
    keep = static_cast<size_t>(options.top_k);
    // Largest first, ties to the lower id: the same k tokens on every platform.
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep), ids.end(),
                      [&](int32_t a, int32_t b) {
                        return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
                      });
    std::sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep));
  }
  double max_logit = -INFINITY;
  for (size_t i = 0; i < keep; ++i) max_logit = std::max(max_logit, double{logits[ids[i]]});
  std::vector<double> weights(keep);
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    weights[i] = std::exp((double{logits[ids[i]]} - max_logit) / options.temperature);
    total += weights[i];
  }
  // 53 random bits to a double in [0, 1): the same on every standard library.
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * total;
  double acc = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    acc += weights[i];
    if (u < acc) return ids[i];
  }
  return ids[keep - 1];
}

std::vector<int32_t> generate(GptDecoder& decoder, const std::vector<int32_t>& prompt,
                              int max_new_tokens, const SampleOptions& options,
                              const std::function<void(int32_t)>& on_token) {
  if (prompt.empty()) throw std::invalid_argument("generate: empty prompt");
  const size_t window = static_cast<size_t>(decoder.config().max_seq_len);
  std::vector<int32_t> context = prompt;
  if (context.size() > window) context.erase(context.begin(), context.end() - window);
  std::mt19937_64 rng(options.seed);
  decoder.reset();
  const std::vector<float>* logits = nullptr;
  for (int32_t token : context) logits = &decoder.step(token);
  std::vector<int32_t> out;
  for (int i = 0; i < max_new_tokens; ++i) {
    const int32_t next = sample_token(*logits, options, rng);
    out.push_back(next);
    if (on_token) on_token(next);
    if (i + 1 == max_new_tokens) break;
    context.push_back(next);
    if (static_cast<size_t>(decoder.position()) == window) {
      const size_t kept = std::max<size_t>(1, window / 2);
      context.erase(context.begin(), context.end() - static_cast<std::ptrdiff_t>(kept));
      decoder.reset();
      for (size_t j = 0; j + 1 < context.size(); ++j) decoder.step(context[j]);
    }
    logits = &decoder.step(next);
  }
  return out;
}

}  // namespace trainctl::model
