#pragma once
#include "data/dataset.h"

#include <vector>

namespace trainctl::data {

// A first-order Markov chain over the vocabulary, drawn from the seed. Every state has
// four distinct successors with probabilities 1/2, 1/4, 1/8, 1/8, so the conditional
// entropy of the next token is the same in every state: 1.75 ln 2 ≈ 1.213 nats. That is
// the best loss any model can reach, and a model reaches it by learning the transition
// table - a quick, visible learning curve from ln(V) down to a known floor.
class SyntheticDataset : public Dataset {
 public:
  explicit SyntheticDataset(const DatasetOptions& options);
  void sample(Split split, uint64_t index, int32_t* tokens, int32_t* targets) const override;
  std::string describe() const override;
  double best_loss() const override;
  double unigram_entropy() const override;

  static constexpr int kSuccessors = 4;

 private:
  int next_state(int state, uint64_t bits) const;

  DatasetOptions opt_;
  std::vector<int32_t> successors_;  // [vocab, kSuccessors]
};

}  // namespace trainctl::data
