#include "ops/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace trainctl::ops::cpu {

namespace {

// How long an idle worker spins before sleeping: longer than the gap between two ops issued
// back to back (a futex wake-up costs 5-50 us), far shorter than anything a second process
// would notice. The caller, waiting for the workers to finish, spins less: it only waits
// for stragglers. Measured in time, not iterations, because `pause` costs anywhere from 10
// to 140 cycles across x86 cores.
constexpr std::chrono::microseconds kWorkerSpin{200};
constexpr std::chrono::microseconds kCallerSpin{50};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until done() or `budget` has passed; returns done()'s last value.
template <typename Done>
bool spin_until(std::chrono::microseconds budget, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

}  // namespace

ThreadPool::ThreadPool(int threads) : threads_(threads) {
  if (threads < 1) {
    throw std::invalid_argument("CPU backend: threads must be >= 1, got " +
                                std::to_string(threads));
  }
  workers_.reserve(static_cast<size_t>(threads - 1));
  for (int i = 1; i < threads; ++i) {
    workers_.emplace_back([this, i] { worker_loop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run_task(int index) {
  try {
    (*task_)(index);
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin first: the next op usually arrives within microseconds.
    uint64_t gen = seen;
    spin_until(kWorkerSpin, [&] {
      gen = generation_.load(std::memory_order_acquire);
      return gen != seen;
    });
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    run_task(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Last one out: the caller may be asleep on done_.
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
  }
}

void ThreadPool::run_on_all(const std::function<void(int)>& fn) {
  if (threads_ == 1) {
    fn(0);
    return;
  }
  task_ = &fn;
  error_ = nullptr;
  pending_.store(threads_ - 1, std::memory_order_release);
  {
    // Publishing the generation under the mutex closes the window in which a worker has
    // checked the predicate but not yet started waiting.
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  run_task(0);
  if (!spin_until(kCallerSpin, [&] { return pending_.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  task_ = nullptr;
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = std::min<int64_t>(threads_, (n + grain - 1) / grain);
  if (chunks <= 1) {
    fn(0, n, 0);
    return;
  }
  // Even split (rounded up to whole grains) so every thread gets a similar share.
  int64_t per = (n + chunks - 1) / chunks;
  per = (per + grain - 1) / grain * grain;
  run_on_all([&](int t) {
    const int64_t begin = std::min<int64_t>(n, per * t);
    const int64_t end = std::min<int64_t>(n, begin + per);
    if (begin < end) fn(begin, end, t);
  });
}

}  // namespace trainctl::ops::cpu
