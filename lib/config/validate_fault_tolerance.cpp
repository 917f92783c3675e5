// runtime.fault_tolerance (docs/job-spec.md, "runtime.fault_tolerance"; docs/fault-tolerance.md):
// what keeping the DP replicas training through a replica's death needs of the rest of the
// spec, and what it does not compose with yet (refused here, before anything is spawned,
// with the key to change).
#include <initializer_list>
#include <string>

#include "config/validate.h"

namespace trainctl::config::detail {

namespace {

constexpr const char* kEnabled = "runtime.fault_tolerance.enabled";
constexpr const char* kOff = "turn runtime.fault_tolerance off (enabled: false)";

// Blames the first of `keys` the spec gives (its file:line); one left at its default is no
// line to edit, so the refusal then points at runtime.fault_tolerance.enabled, which made
// the default matter.
[[noreturn]] void refuse(const Locations& at, std::initializer_list<const char*> keys,
                         const std::string& why) {
  for (const char* key : keys) {
    if (at.given(key)) fail(at.where(key), key, why);
  }
  fail(at.where(kEnabled), kEnabled, why);
}

// The DP layout: replicas that can leave and come back.
void check_replicas(const JobSpec& s, const Locations& at) {
  const ParallelSpec& p = s.parallel;
  const FaultToleranceSpec& ft = s.runtime.fault_tolerance;
  if (p.dp < 2) {
    refuse(at, {"parallel.dp"},
           "fault tolerance needs dp >= 2 replicas (the job keeps training on the replicas "
           "left when one dies); got parallel.dp " +
               std::to_string(p.dp) + ". Set parallel.dp: 2 or more, or " + kOff + ".");
  }
  if (ft.min_replicas > p.dp) {
    refuse(at, {"runtime.fault_tolerance.min_replicas"},
           "must be at most parallel.dp (" + std::to_string(p.dp) +
               "), the replicas there are; got " + std::to_string(ft.min_replicas) +
               ". Use min_replicas in 1.." + std::to_string(p.dp) + ", or raise parallel.dp.");
  }
  if (p.mode == "parameter_server") {
    refuse(at, {"parallel.mode"},
           "parameter_server does not combine with runtime.fault_tolerance (the servers hold "
           "the optimizer, not the replicas); use mode: data_parallel, or " +
               std::string(kOff) + ".");
  }
  if (p.zero != 0) {
    refuse(at, {"parallel.zero"},
           "ZeRO-" + std::to_string(p.zero) +
               " does not combine with runtime.fault_tolerance: ZeRO-1/2 shard the optimizer "
               "state over the DP replicas, so a dead replica's shard cannot be rebuilt from "
               "live peers (ZeRO-3 shards the parameters too). Set parallel.zero: 0, or " +
               kOff + ".");
  }
  if (p.ep > 1) {
    refuse(at, {"parallel.ep"},
           "expert parallelism spans the DP replicas (each holds only ep's share of the "
           "experts), so a dead replica's experts are lost; use parallel.ep: 1, or " +
               std::string(kOff) + ".");
  }
}

// How the replicas combine their gradients: allreduce every step, or local SGD / DiLoCo
// (a replica may miss a sync round); a replay is built for the per-step allreduce.
void check_gradient_sync(const JobSpec& s, const Locations& at) {
  const ParallelSpec& p = s.parallel;
  if (p.dp_sync != "allreduce" && !s.runtime.fault_tolerance.replay.empty()) {
    refuse(at, {"runtime.fault_tolerance.replay", "parallel.dp_sync"},
           "replay with dp_sync " + p.dp_sync +
               " is not built (the replicas' models differ between syncs, so an absent "
               "replica cannot be replayed by adding zeros); replay a dp_sync: allreduce run.");
  }
  if (p.grad_compression == "powersgd") {
    refuse(at, {"parallel.grad_compression"},
           "powersgd keeps its error feedback per replica, which a replica that rejoins does "
           "not have; use grad_compression: none or bf16, or " +
               std::string(kOff) + ".");
  }
}

// What the model and the device must be for a replica to be rebuilt from a live peer.
void check_model_and_device(const JobSpec& s, const Locations& at) {
  if (s.precision.compute != DType::fp32) {
    refuse(at, {"precision.compute"},
           std::string(dtype_name(s.precision.compute)) +
               " with runtime.fault_tolerance is not built yet (healing a replica from a peer "
               "is not built for the 16-bit layout with fp32 master weights); use "
               "precision.compute: fp32, or " +
               kOff + ".");
  }
  if (s.model.moe.enabled()) {
    refuse(at, {"model.moe.num_experts", "model.moe", "model.init_from"},
           "a mixture-of-experts model does not combine with runtime.fault_tolerance yet; "
           "remove model.moe (a dense model), or " +
               std::string(kOff) + ".");
  }
  if (s.device == Device::cuda) {
    refuse(at, {"device"},
           "cuda with runtime.fault_tolerance is not built yet (NCCL groups that shrink and "
           "grow with the replicas are not built); use device: cpu, or " +
               std::string(kOff) + ".");
  }
}

}  // namespace

void check_fault_tolerance(const JobSpec& s, const Locations& at) {
  const FaultToleranceSpec& ft = s.runtime.fault_tolerance;
  if (!ft.enabled) {
    // The other keys are ignored when off; a replay is a fault-tolerant run's record.
    if (!ft.replay.empty()) {
      fail(at.where("runtime.fault_tolerance.replay"), "runtime.fault_tolerance.replay",
           "replay needs runtime.fault_tolerance.enabled (it replays a fault-tolerant run's "
           "membership record); set enabled: true, or remove replay.");
    }
    return;
  }
  check_replicas(s, at);
  check_gradient_sync(s, at);
  check_model_and_device(s, at);
}

}  // namespace trainctl::config::detail
