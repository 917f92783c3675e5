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
  // With context parallelism each rank runs seq_len / cp tokens of a sequence, and the TP
  // group splits those rows.
  if (p.cp > 1 && s.model.seq_len % (p.cp * p.tp) != 0) {
    fail(at.where("parallel.sequence_parallel"), "parallel.sequence_parallel",
         "with cp " + std::to_string(p.cp) + " needs model.seq_len (" +
             std::to_string(s.model.seq_len) + ") divisible by cp × tp (" +
             std::to_string(p.cp * p.tp) + "): each TP group splits its seq_len / cp tokens.");
  }
  if (s.device == Device::cuda) {
    fail(at.where("parallel.sequence_parallel"), "parallel.sequence_parallel",
         "runs on the CPU backend only for now: its reduce-scatter/all-gather path has not "
         "been checked on a GPU. Remove sequence_parallel for device: cuda.");
  }
}

}  // namespace trainctl::config::detail
