// parallel.cp: what context parallelism needs of the rest of the spec, and what it does not
// compose with yet (refused here, before anything is spawned, with the key to change).
#include <string>

#include "config/validate.h"

namespace trainctl::config::detail {

namespace {

void refuse(const Locations& at, const std::string& key, const std::string& why) {
  fail(at.where(key), key, why);
}

}  // namespace

void check_context_parallel(const JobSpec& s, const Locations& at) {
  const ParallelSpec& p = s.parallel;
  if (p.cp == 1) return;
  const std::string cp = std::to_string(p.cp);
  const std::string with = " with parallel.cp: " + cp;
  if (s.model.seq_len % (2 * p.cp) != 0) {
    // Each sequence is cut into 2 cp equal chunks; rank r holds chunks r and 2 cp - 1 - r.
    refuse(at, "model.seq_len",
           "must be divisible by 2 * parallel.cp = " + std::to_string(2 * p.cp) + "; got " +
               std::to_string(s.model.seq_len) + ". Use a seq_len that is a multiple of " +
               std::to_string(2 * p.cp) + ", or another cp.");
  }
  if (s.device == Device::cuda) {
    refuse(at, "parallel.cp",
           "context parallelism runs on device: cpu only (the CUDA backend has no ring "
           "attention yet); use device: cpu, or parallel.cp: 1.");
  }
  // ZeRO shards over dp x cp (the gradient group): zero: 3 takes fp32 traffic only, as with
  // dp > 1 (config/validate.cpp).
  if (p.zero == 3 && p.grad_comm != "fp32") {
    refuse(at, "parallel.grad_comm",
           "must be fp32 with zero: 3" + with +
               " (ZeRO-3 shards over dp x cp); use grad_comm: "
               "fp32.");
  }
  if (p.mode != "data_parallel" || p.dp_sync != "allreduce" || p.grad_compression == "powersgd") {
    refuse(at, "parallel.cp",
           "needs plain data parallelism (mode: data_parallel, dp_sync: allreduce, no powersgd); "
           "use those" +
               with + ", or cp: 1.");
  }
  // Mixture of experts: the router's per-sequence counts (aux loss) are summed over the cp
  // ring (model/moe/router.h); what needs the whole micro-batch's token order is refused.
  // Expert parallelism composes: each cp rank exchanges its own tokens with the ep ranks of
  // its cp coordinate, and expert gradients are summed over every cp rank (comm/rank_coords.h).
  if (s.model.moe.enabled() && s.model.moe.capacity_factor > 0) {
    refuse(at, "model.moe.capacity_factor",
           "must be 0 (dropless)" + with +
               ": the capacity keeps each expert's first tokens of a micro-batch in token "
               "order, and context parallelism spreads those tokens over the cp ranks. Use "
               "capacity_factor: 0, or cp: 1.");
  }
}

}  // namespace trainctl::config::detail
