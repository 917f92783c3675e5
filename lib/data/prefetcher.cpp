#include "data/prefetcher.h"

#include <stdexcept>

namespace trainctl::data {

Prefetcher::Prefetcher(const Dataset& data, const BatchLayout& layout, int64_t first_step,
                       int64_t end_step, int depth)
    : data_(data),
      layout_(layout),
      next_to_make_(first_step),
      end_step_(end_step),
      depth_(static_cast<size_t>(depth < 1 ? 1 : depth)),
      worker_([this] { run(); }) {}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void Prefetcher::run() {
  try {
    for (;;) {
      int64_t step = 0;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || ready_.size() < depth_; });
        if (stop_ || next_to_make_ >= end_step_) return;
        step = next_to_make_++;
      }
      StepBatch batch;
      fill_step_batch(data_, layout_, step, batch);
      {
        std::lock_guard<std::mutex> lock(mu_);
        ready_.push_back(std::move(batch));
      }
      cv_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::current_exception();
    cv_.notify_all();
  }
}

StepBatch Prefetcher::next() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !ready_.empty() || error_ != nullptr; });
  if (ready_.empty()) std::rethrow_exception(error_);
  StepBatch b = std::move(ready_.front());
  ready_.pop_front();
  lock.unlock();
  cv_.notify_all();
  return b;
}

}  // namespace trainctl::data
