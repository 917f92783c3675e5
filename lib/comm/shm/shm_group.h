#pragma once
// Collectives through shared memory, for a group whose ranks all run on one host.
//
// Every rank owns one segment (/dev/shm) with two data slots and maps its peers'. Data
// moves in chunks of one slot: each rank copies its chunk into its slot and announces
// it; the others read it straight from there. An allreduce then has each rank reduce its
// own share of the chunk over every rank's slot (in rank order) and the others copy that
// share back: per float a rank moves ~16 bytes through memory and makes two handshakes
// per chunk, where Gloo on loopback sends and receives every element through the
// kernel's TCP stack. On 2 cores that difference is what kept the gradient allreduce
// from hiding behind the backward pass (README, "Correctness and speed").
//
// Results are bitwise the same on every rank (each element is reduced once). Slots
// alternate between chunks, and a rank announces a chunk only after it has finished
// reading the previous one, so nobody overwrites a slot a peer may still read. Like the
// communicator that owns it, one thread drives it at a time; every rank makes the same
// calls with the same sizes.
#include <gloo/rendezvous/store.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/shm/shared_segment.h"

namespace trainctl::comm::shm {

struct ShmOptions {
  // Floats per chunk = slot_bytes / 4. Two slots per rank. 1 MiB keeps a chunk of every
  // rank in the caches between its copy-in and its reduction.
  size_t slot_bytes = 1024 * 1024;
  // Longest wait for a peer before the call fails (a hung peer). A peer that exits or
  // closes its side is noticed within `poll`.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  std::chrono::milliseconds poll{50};
};

// What identifies "the same host" for shared memory: hostname, boot id and the IPC, mount
// and pid namespaces (containers on one machine may not share /dev/shm, and liveness
// checks need each other's pids).
std::string host_identity();

class ShmGroup {
 public:
  // Collective over the `size` ranks that rendezvous under `store` (a prefix of its own).
  // Returns null, on every rank alike, when the ranks are not all on one host or any of
  // them cannot create or map the segments; `why_not` then says why. Throws only what
  // the store throws (a peer that never arrives).
  static std::unique_ptr<ShmGroup> connect(gloo::rendezvous::Store& store, int rank, int size,
                                           const ShmOptions& options, std::string* why_not);

  // Tells the peers this rank is gone (their waits fail at once instead of timing out).
  ~ShmGroup();
  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  // The Communicator contract (comm/communicator.h). Each throws std::runtime_error when
  // a peer exits, closes, or does not arrive within options.timeout; the group is
  // unusable then.
  void allreduce(float* data, size_t count, ReduceOp op);
  void reduce_scatter(const float* in, float* out, size_t count);
  void allgather(const float* in, float* out, size_t count);
  // Blocks of every size: a slot carries a stretch of the block to each peer per round, for
  // as many rounds as the group's longest block needs (agreed by a one-float allreduce).
  void alltoallv(const float* in, const size_t* send_counts, float* out, const size_t* recv_counts);

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(peers_.size()); }

 private:
  struct Header;
  ShmGroup(int rank, const ShmOptions& options, SharedSegment own,
           std::vector<SharedSegment> peers);
  Header& header(int r) const;
  float* slot(int r, uint32_t chunk) const;
  void wait_for(int r, bool reduced, uint32_t target) const;
  // `count` floats from `src` go to float `at` of this rank's slot.
  struct Piece {
    const float* src;
    size_t at;
    size_t count;
  };
  // Copies the pieces into this rank's slot for a new chunk, announces it and waits
  // until every peer has announced theirs; returns the chunk number.
  uint32_t post_and_wait(const std::vector<Piece>& pieces);

  int rank_;
  ShmOptions options_;
  size_t slot_floats_;
  SharedSegment own_;
  std::vector<SharedSegment> peers_;  // by rank; peers_[rank_] is empty (own_ is used)
  uint32_t chunk_ = 0;                // chunks exchanged so far, the same on every rank
};

}  // namespace trainctl::comm::shm
