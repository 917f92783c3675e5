#include "parallel/comm_queue.h"

#include <chrono>

namespace trainctl::parallel {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

CommQueue::CommQueue() : thread_([this] { loop(); }) {}

CommQueue::~CommQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

int64_t CommQueue::submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(task));
  }
  work_cv_.notify_one();
  return ++submitted_;
}

void CommQueue::wait(int64_t ticket) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return done_ >= ticket || error_ != nullptr; });
  waited_s_ += seconds_since(t0);
  if (error_) std::rethrow_exception(error_);
}

CommQueue::Times CommQueue::times() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {busy_s_, waited_s_, tasks_};
}

void CommQueue::reset_times() {
  std::lock_guard<std::mutex> lock(mutex_);
  busy_s_ = 0.0;
  waited_s_ = 0.0;
  tasks_ = 0;
}

void CommQueue::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ with nothing left
    std::function<void()> task = std::move(queue_.front());
    queue_.pop_front();
    const bool skip = error_ != nullptr;
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    std::exception_ptr error;
    if (!skip) {
      try {
        task();
      } catch (...) {
        error = std::current_exception();
      }
    }
    const double s = seconds_since(t0);
    lock.lock();
    busy_s_ += s;
    ++tasks_;
    ++done_;
    if (error && !error_) error_ = error;
    done_cv_.notify_all();
  }
}

}  // namespace trainctl::parallel
