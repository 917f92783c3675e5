#pragma once
// The buffers a pipeline stage's outgoing messages wait in (parallel/boundary_staging.h
// says how many): one is taken for a send or a hand-over to this stage's other chunk, and
// comes back when the send completes or the hand-over has been read. When none is free,
// take() waits for the oldest send.
#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "comm/communicator.h"

namespace trainctl::parallel {

class StagingPool {
 public:
  explicit StagingPool(std::vector<void*> buffers) : free_(std::move(buffers)) {}
  // A free buffer, or the oldest send's once it has completed (the wait added to *idle_s).
  // Throws std::logic_error when every buffer holds a hand-over (the pool is too small).
  void* take(double* idle_s);
  // `buffer` (taken here) is being sent; it comes back once `send` completes.
  void sent(void* buffer, std::unique_ptr<comm::PendingSend> send);
  // `buffer` (taken here, handed over) has been read.
  void give_back(void* buffer) { free_.push_back(buffer); }
  // Waits for every send in flight (added to *idle_s).
  void wait_all(double* idle_s);

 private:
  std::vector<void*> free_;
  std::deque<std::pair<void*, std::unique_ptr<comm::PendingSend>>> in_flight_;  // oldest first
};

}  // namespace trainctl::parallel
