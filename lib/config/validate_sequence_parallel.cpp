// parallel.sequence_parallel: what sequence parallelism needs of the rest of the spec, and
// what it is not combined with yet (refused before anything is spawned, naming the key).
#include <string>

#include "config/validate.h"

namespace trainctl::config::detail {

// Sequence parallelism splits the token rows of the TP group's residual stream.
void check_sequence_parallel(const JobSpec& s, const Locations& at) {
  const ParallelSpec& p = s.parallel;
  if (!p.sequence_parallel) return;
  if (p.tp < 2) {
    fail(at.where("parallel.sequence_parallel"), "parallel.sequence_parallel",
         "splits the sequence over the tensor-parallel group, which needs tp > 1; got tp " +
             std::to_string(p.tp) + ". Set parallel.tp >= 2, or remove sequence_parallel.");
  }
  if (s.model.seq_len % p.tp != 0) {
    fail(at.where("parallel.sequence_parallel"), "parallel.sequence_parallel",
         "needs model.seq_len (" + std::to_string(s.model.seq_len) + ") divisible by tp (" +
             std::to_string(p.tp) + "). Use tp in " + divisors_of(s.model.seq_len) +
             ", or a seq_len that is a multiple of " + std::to_string(p.tp) + ".");
  }
  // Both split the token rows; their combination is not proven by the layout tests yet.
  if (p.cp > 1) {
    fail(at.where("parallel.sequence_parallel"), "parallel.sequence_parallel",
         "is not combined with context parallelism yet (cp " + std::to_string(p.cp) +
             "): use one of them (cp already divides every activation by cp).");
  }
  if (s.device == Device::cuda) {
    fail(at.where("parallel.sequence_parallel"), "parallel.sequence_parallel",
         "runs on the CPU backend only for now: its reduce-scatter/all-gather path has not "
         "been checked on a GPU. Remove sequence_parallel for device: cuda.");
  }
}

}  // namespace trainctl::config::detail
