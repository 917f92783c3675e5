#include "data/synthetic.h"

#include <cmath>
#include <numeric>
#include <sstream>

#include "util/random.h"

namespace trainctl::data {

namespace {
// Choice thresholds over 3 random bits: 4/8, 2/8, 1/8, 1/8.
int choice_of(uint64_t bits) {
  const int r = static_cast<int>(bits & 7);
  return r < 4 ? 0 : r < 6 ? 1 : r < 7 ? 2 : 3;
}
}  // namespace

SyntheticDataset::SyntheticDataset(const DatasetOptions& options) : opt_(options) {
  const int V = opt_.vocab_size;
  successors_.resize(static_cast<size_t>(V) * kSuccessors);
  for (int s = 0; s < V; ++s) {
    int32_t* row = &successors_[static_cast<size_t>(s) * kSuccessors];
    uint64_t draw = 0;
    for (int j = 0; j < kSuccessors; ++j) {
      // Distinct successors keep the entropy exactly 1.75 ln 2 (needs vocab >= 4).
      for (;;) {
        const auto cand = static_cast<int32_t>(
            rng::hash(opt_.seed, static_cast<uint64_t>(s), draw++) % static_cast<uint64_t>(V));
        bool seen = false;
        for (int k = 0; k < j; ++k) seen = seen || row[k] == cand;
        if (!seen || V < kSuccessors) {
          row[j] = cand;
          break;
        }
      }
    }
  }
}

int SyntheticDataset::next_state(int state, uint64_t bits) const {
  return successors_[static_cast<size_t>(state) * kSuccessors + choice_of(bits)];
}

void SyntheticDataset::sample(Split split, uint64_t index, int32_t* tokens,
                              int32_t* targets) const {
  // Train and validation walks come from different streams of the same chain.
  const uint64_t stream = rng::hash(opt_.seed, split == Split::train ? 0x7a11 : 0x5a1d, index);
  int state = static_cast<int>(rng::mix64(stream) % static_cast<uint64_t>(opt_.vocab_size));
  for (int t = 0; t < opt_.seq_len; ++t) {
    tokens[t] = state;
    state = next_state(state, rng::hash(stream, static_cast<uint64_t>(t)));
    targets[t] = state;
  }
}

std::string SyntheticDataset::describe() const {
  std::ostringstream os;
  os << "synthetic Markov chain: vocab " << opt_.vocab_size << ", " << kSuccessors
     << " successors per token, best achievable loss " << best_loss() << " nats/token";
  return os.str();
}

double SyntheticDataset::best_loss() const { return 1.75 * std::log(2.0); }

double SyntheticDataset::unigram_entropy() const {
  // Estimate the stationary distribution by running the chain (power iteration).
  const int V = opt_.vocab_size;
  std::vector<double> p(static_cast<size_t>(V), 1.0 / V), q(static_cast<size_t>(V));
  const double w[kSuccessors] = {0.5, 0.25, 0.125, 0.125};
  for (int it = 0; it < 200; ++it) {
    std::fill(q.begin(), q.end(), 0.0);
    for (int s = 0; s < V; ++s) {
      for (int j = 0; j < kSuccessors; ++j) {
        q[static_cast<size_t>(successors_[static_cast<size_t>(s) * kSuccessors + j])] +=
            p[static_cast<size_t>(s)] * w[j];
      }
    }
    // Lazy step (average with the previous iterate) so periodic chains converge too.
    for (size_t s = 0; s < p.size(); ++s) p[s] = 0.5 * (p[s] + q[s]);
  }
  double h = 0.0;
  for (double x : p) {
    if (x > 0) h -= x * std::log(x);
  }
  return h;
}

}  // namespace trainctl::data
