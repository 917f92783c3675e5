// parallel.stage_balance and parallel.layers_per_stage: the rules a pipeline split must
// follow, checked before anything is spawned (the partition itself: model/shard.h).
#include <numeric>
#include <string>
#include <vector>

#include "config/suggest.h"
#include "config/validate.h"

namespace trainctl::config::detail {

// parallel.stage_balance and parallel.layers_per_stage: counts that cover the model once,
// one per (virtual) stage, none empty.
void check_stage_split(const JobSpec& s, const Locations& at) {
  const auto refuse = [&](const std::string& key, const std::string& why) {
    fail(at.where(key), key, why);
  };
  const ParallelSpec& p = s.parallel;
  const int n_layer = s.model.n_layer;
  const bool chunked = p.schedule == "interleaved" || p.schedule == "zbv";
  const int parts = p.pp * (chunked ? p.virtual_stages : 1);
  std::string what = "pp = " + std::to_string(parts) + " stages";
  if (p.schedule == "interleaved") {
    what = "pp × virtual_stages = " + std::to_string(parts) +
           " virtual stages (entry c*pp + s: chunk c of stage s)";
  } else if (p.schedule == "zbv") {
    what = "2 × pp = " + std::to_string(parts) +
           " virtual stages in V order (entry i < pp: stage i; entry i >= pp: stage 2pp-1-i)";
  }
  // A near-equal split with the remainder on the middle stages (the first and last also
  // hold the embedding and the LM head).
  std::vector<std::string> example(static_cast<size_t>(parts), std::to_string(n_layer / parts));
  for (int i = 0; i < n_layer % parts; ++i)
    example[static_cast<size_t>((parts - n_layer % parts) / 2 + i)] =
        std::to_string(n_layer / parts + 1);
  const std::string use = "e.g. layers_per_stage: [" + join(example) + "]";
  const std::vector<int>& l = p.layers_per_stage;
  if (!l.empty()) {
    if (p.stage_balance == "equal") {
      refuse("parallel.layers_per_stage",
             "gives the split itself; stage_balance: equal asks for another. Remove one.");
    }
    if (static_cast<int>(l.size()) != parts) {
      refuse("parallel.layers_per_stage", "has " + std::to_string(l.size()) +
                                              " entries; it needs one per pipeline stage, " + what +
                                              " (" + use + ").");
    }
    for (size_t i = 0; i < l.size(); ++i) {
      if (l[i] < 1) {
        refuse("parallel.layers_per_stage",
               "entry " + std::to_string(i) + " is " + std::to_string(l[i]) +
                   ": every stage needs at least one layer (" + use + ").");
      }
    }
    const long long sum = std::accumulate(l.begin(), l.end(), 0LL);
    if (sum != n_layer) {
      refuse("parallel.layers_per_stage", "sums to " + std::to_string(sum) +
                                              "; it must sum to model.n_layer (" +
                                              std::to_string(n_layer) + ") (" + use + ").");
    }
  } else if (p.stage_balance == "equal" && n_layer % parts != 0) {
    refuse("parallel.stage_balance",
           "equal needs model.n_layer " + std::to_string(n_layer) + " divisible by " + what +
               ". Use stage_balance: auto (split by cost), or layers_per_stage (" + use + ").");
  }
}

}  // namespace trainctl::config::detail
