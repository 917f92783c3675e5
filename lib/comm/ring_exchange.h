#pragma once
// Neighbour exchanges around a ring (context parallelism's K/V ring, model/ring_attention.h):
// each exchange sends a buffer to the next rank of the group and receives the previous
// rank's into another, on a communication thread, so the caller computes on the block it
// holds while the next one travels. Exchanges run one at a time in the order they were
// started (every rank of the ring starts the same sequence), so they pair up without tags
// of their own and the communicator is used by one thread at a time.
//
// Threading contract: while an exchange is queued or running it owns the group and the two
// buffers; the caller touches neither until wait() on its ticket (or a later one) returns.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "comm/communicator.h"

namespace trainctl::comm {

class RingExchange {
 public:
  explicit RingExchange(Communicator& ring);
  ~RingExchange();  // finishes what was started, then stops the thread
  RingExchange(const RingExchange&) = delete;
  RingExchange& operator=(const RingExchange&) = delete;

  int next() const { return (ring_.rank() + 1) % ring_.size(); }
  int prev() const { return (ring_.rank() + ring_.size() - 1) % ring_.size(); }

  // Sends `bytes` of `send` to next() and receives prev()'s into `recv`; returns a ticket.
  int64_t start(const void* send, void* recv, size_t bytes);
  // Blocks until exchange `ticket` and every earlier one finished; rethrows a failure.
  void wait(int64_t ticket);
  // data[i] = its sum over the ring's ranks, on the ring's thread after the exchanges
  // started before it (the one thread that uses the group); blocks until done. Not counted
  // in times(): it is not ring traffic that compute could hide.
  void allreduce_sum(float* data, size_t count);

  // Seconds the thread spent exchanging and seconds wait() blocked the caller since the
  // last reset: 1 - waited/busy is the share of ring traffic hidden behind compute.
  struct Times {
    double busy_s = 0.0;
    double waited_s = 0.0;
    int64_t bytes = 0;
  };
  Times times() const;
  void reset_times();

 private:
  void loop();

  Communicator& ring_;
  int64_t started_ = 0;  // caller's thread only
  mutable std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  struct Task {
    std::function<void()> run;
    bool ring_traffic;  // counted in times()
  };
  std::deque<Task> queue_;
  int64_t done_ = 0;
  Times times_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace trainctl::comm
