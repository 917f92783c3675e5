#pragma once
// Tuning and failure-detection settings for the Gloo (CPU, TCP) backend.
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace trainctl::comm {

// Allreduce algorithms. `automatic` picks per message size (see GlooCommunicator).
enum class AllreduceAlgo {
  automatic,
  direct,            // every rank sends its buffer to every other: one round, for small sizes
  ring,              // reduce-scatter + allgather ring over unbound buffers (ring_collectives.h)
  gloo_ring,         // gloo::allreduce RING (segmented, `gloo_ring_segment_bytes`)
  ring_chunked,      // legacy gloo::AllreduceRingChunked
  halving_doubling,  // legacy gloo::AllreduceHalvingDoubling
  shm,               // through shared memory: every rank of the group on one host (comm/shm)
  // Shared memory within each host, TCP across hosts among one rank per host
  // (comm/gloo/hierarchical.h): groups spanning hosts with several ranks on a host. Where
  // a group has no such shape it behaves as `automatic`.
  hierarchical,
};

std::string_view to_string(AllreduceAlgo algo);
// Accepts the names to_string returns ("auto" for automatic); throws std::invalid_argument.
AllreduceAlgo parse_allreduce_algo(std::string_view name);

struct GlooOptions {
  // Longest wait for any single transfer or rendezvous step before the call fails with
  // CommError (a hung or dead peer). Matches the job spec's runtime.comm_timeout_s.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  AllreduceAlgo allreduce_algo = AllreduceAlgo::automatic;
  // Groups whose ranks all run on one host also connect through shared memory, and
  // then allreduce (with `automatic`), reduce_scatter and allgather go that way: on 2 cores Gloo's
  // loopback TCP cost DP=2 ~5% of its step time in CPU work, shared memory ~1% (README,
  // "Correctness and speed").
  bool shared_memory = true;
  // Bytes per chunk of the shared-memory allreduce (comm/shm/shm_group.h).
  size_t shm_slot_bytes = 1024 * 1024;
  // With `automatic`: `direct` (one round of messages) while the bytes each rank sends,
  // count * 4 * (ranks - 1), stay within this; `ring` (least data per rank) above.
  // Measured with 2 processes on loopback (2 cores): direct is ~2x faster than ring up
  // to 16 KiB, they cross between 256 KiB and 1 MiB.
  size_t small_allreduce_bytes = 256 * 1024;
  // Largest message of the `ring` allreduce's and reduce_scatter's reduce phase:
  // smaller segments let reduction overlap transfer, at a handshake per segment.
  size_t ring_segment_bytes = 256 * 1024;
  // Segments in flight at once in the `ring` allreduce's reduce phase.
  size_t ring_window = 4;
  // Segment size for gloo_ring (Gloo's default is 1 MiB). Field notes measured 1 MiB as
  // several times slower than 4-16 MiB on a loaded loopback; on an idle one 1 MiB wins
  // at 64 MiB. Only used when gloo_ring is chosen explicitly.
  size_t gloo_ring_segment_bytes = 16 * 1024 * 1024;
};

}  // namespace trainctl::comm
