#pragma once
// Builds the next steps' batches on a background thread while the current step computes.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "data/sampler.h"

namespace trainctl::data {

class Prefetcher {
 public:
  // Prepares steps first_step .. end_step-1, at most `depth` ahead of the consumer.
  Prefetcher(const Dataset& data, const BatchLayout& layout, int64_t first_step, int64_t end_step,
             int depth = 2);
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Blocks until the next step's batch is ready; rethrows a producer exception.
  StepBatch next();

 private:
  void run();

  const Dataset& data_;
  BatchLayout layout_;
  int64_t next_to_make_;
  int64_t end_step_;
  size_t depth_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StepBatch> ready_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace trainctl::data
