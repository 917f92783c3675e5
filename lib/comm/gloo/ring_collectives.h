#pragma once
// Collectives built from Gloo's point-to-point unbound buffers. Gloo has no general
// reduce-scatter, and its own ring allreduce pays a handshake per 1 MiB segment with only
// two in flight; these rings post several segments at once (or whole blocks), work for
// any element count (blocks may be empty) and any group size, and give bitwise the same
// result on every rank. Every rank of the context must call the same function with the
// same block layout and slot; Gloo exceptions (dead peer, timeout) propagate to the
// caller, prefixed with the peer's rank.
#include <gloo/context.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace trainctl::comm::ring {

// How `count` elements are split into one block per rank: block b is
// [offset[b], offset[b] + count[b]). The first `total % ranks` blocks get one extra element.
struct Blocks {
  std::vector<size_t> offset;
  std::vector<size_t> count;
};
Blocks split_evenly(size_t total, int ranks);

// Element-wise reduction into `acc`: acc[i] = op(acc[i], x[i]).
using ReduceFn = void (*)(float* acc, const float* x, size_t n);

// Every rank contributes `in` (ranks * block_count floats); `out` (block_count floats)
// receives block `rank` reduced over ranks. Blocks travel in messages of at most
// `segment` floats so reduction overlaps transfer. Uses slots [slot, slot + ranks).
void reduce_scatter(gloo::Context& ctx, const float* in, float* out, size_t block_count,
                    ReduceFn reduce, size_t segment, uint64_t slot,
                    std::chrono::milliseconds timeout);

// In place over `data` laid out as `blocks`: afterwards every rank holds op over ranks of
// every element. Reduce-scatter then allgather, 2(ranks-1) steps. The reduce phase moves
// segments of `segment` floats, at most `window` in flight, staged in `staging` (grown
// as needed; pass the same vector every call). Uses slots [slot, slot + 2 * ranks).
void allreduce(gloo::Context& ctx, float* data, const Blocks& blocks, ReduceFn reduce,
               size_t segment, size_t window, std::vector<float>& staging, uint64_t slot,
               std::chrono::milliseconds timeout);

// In place over `count` floats: every rank sends its whole buffer to every other rank
// and reduces all contributions in rank order, so results are bitwise equal everywhere.
// One round of messages (latency-optimal) but (ranks-1) * count floats sent per rank:
// for small messages. Uses slot `slot`.
void direct_allreduce(gloo::Context& ctx, float* data, size_t count, ReduceFn reduce, uint64_t slot,
                      std::chrono::milliseconds timeout);

// `in` (bytes_per_rank bytes) lands in block `rank` of `out` on every rank.
// Uses slots [slot, slot + ranks).
void allgather(gloo::Context& ctx, const void* in, void* out, size_t bytes_per_rank, uint64_t slot,
               std::chrono::milliseconds timeout);

}  // namespace trainctl::comm::ring
