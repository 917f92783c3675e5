#pragma once
// A small fork-join pool for the CPU backend. The calling thread is worker 0 and always
// takes part, so `threads = 1` runs everything inline with no synchronisation at all.
// Work is split STATICALLY (thread i always gets the same range for the same call), which
// keeps per-thread partial sums in a fixed order: results are bitwise reproducible for a
// given thread count.
//
// Idle workers spin briefly (ops are issued back to back, and a condition-variable wake-up
// costs more than many small ops) and then sleep, so an idle pool does not burn a core
// that another process (or OpenBLAS, or Gloo) could use.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace trainctl::ops::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return threads_; }

  // Runs fn(thread_index) once on each of the pool's threads (including the caller) and
  // returns when all have finished. Not reentrant: call it from one thread at a time and
  // never from inside fn. An exception thrown by fn is rethrown here (the first one).
  void run_on_all(const std::function<void(int)>& fn);

  // Splits [0, n) into at most size() contiguous ranges of at least `grain` items (the
  // last may be shorter) and calls fn(begin, end, thread_index) for each, in parallel.
  // n <= grain runs inline on the caller.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  void worker_loop(int index);
  void run_task(int index);

  int threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* task_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable wake_;  // workers wait here for a new generation
  std::condition_variable done_;  // the caller waits here for pending_ == 0
  std::exception_ptr error_;
  std::mutex error_mutex_;
};

}  // namespace trainctl::ops::cpu
