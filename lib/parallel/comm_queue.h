#pragma once
// One communication thread that runs submitted collectives in submission order (FIFO), so
// a training thread can start the next block's parameter allgather or this block's
// gradient reduce-scatter and go on computing (ZeRO-3, parallel/zero3_params.h).
//
// Threading contract: while tasks are queued or running they own the communicator they
// use and the buffers they read or write; the submitter touches neither until wait() on
// that task's ticket (or a later one) returns.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace trainctl::parallel {

class CommQueue {
 public:
  CommQueue();
  // Runs what is queued, then stops the thread.
  ~CommQueue();
  CommQueue(const CommQueue&) = delete;
  CommQueue& operator=(const CommQueue&) = delete;

  // Queues `task`; returns its ticket (1, 2, ... in submission order).
  int64_t submit(std::function<void()> task);
  // Blocks until task `ticket` and every earlier one ran. Rethrows the first exception a
  // task threw (later tasks are skipped; every later wait rethrows it).
  void wait(int64_t ticket);
  void wait_all() { wait(submitted_); }
  // Seconds the thread spent running tasks, and the seconds wait() blocked the caller,
  // since the last reset_times().
  struct Times {
    double busy_s = 0.0;
    double waited_s = 0.0;
    int tasks = 0;
  };
  Times times() const;
  void reset_times();

 private:
  void loop();

  int64_t submitted_ = 0;  // submitter's thread only
  double waited_s_ = 0.0;
  mutable std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<std::function<void()>> queue_;
  int64_t done_ = 0;
  double busy_s_ = 0.0;
  int tasks_ = 0;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace trainctl::parallel
