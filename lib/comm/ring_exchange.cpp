#include "comm/ring_exchange.h"

#include <chrono>

namespace trainctl::comm {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// One tag for the ring: exchanges are sequential on every rank, and a rank sends its next
// block only after its previous send was taken, so a message never meets the wrong receive.
constexpr uint32_t kRingTag = 0x43500000u;  // "CP"

}  // namespace

RingExchange::RingExchange(Communicator& ring) : ring_(ring), thread_([this] { loop(); }) {}

RingExchange::~RingExchange() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

int64_t RingExchange::start(const void* send, void* recv, size_t bytes) {
  auto task = [this, send, recv, bytes] {
    std::unique_ptr<PendingSend> sent = ring_.isend(send, bytes, next(), kRingTag);
    ring_.recv(recv, bytes, prev(), kRingTag);
    sent->wait();
  };
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back({std::move(task), true});
    times_.bytes += static_cast<int64_t>(bytes);
  }
  work_cv_.notify_one();
  return ++started_;
}

void RingExchange::wait(int64_t ticket) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return done_ >= ticket || error_ != nullptr; });
  times_.waited_s += seconds_since(t0);
  if (error_) std::rethrow_exception(error_);
}

void RingExchange::allreduce_sum(float* data, size_t count) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back({[this, data, count] { ring_.allreduce(data, count, ReduceOp::sum); }, false});
  }
  work_cv_.notify_one();
  const int64_t ticket = ++started_;
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return done_ >= ticket || error_ != nullptr; });
  if (error_) std::rethrow_exception(error_);
}

RingExchange::Times RingExchange::times() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return times_;
}

void RingExchange::reset_times() {
  std::lock_guard<std::mutex> lock(mutex_);
  times_ = {};
}

void RingExchange::loop() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::exception_ptr failed;
    if (error_ == nullptr) {  // after a failure the ring is unusable: skip, but count done
      try {
        task.run();
      } catch (...) {
        failed = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (task.ring_traffic) times_.busy_s += seconds_since(t0);
      if (failed && !error_) error_ = failed;
      ++done_;
    }
    done_cv_.notify_all();
  }
}

}  // namespace trainctl::comm
