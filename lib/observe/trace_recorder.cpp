#include "observe/trace_recorder.h"

#include <chrono>

namespace trainctl::observe {

TraceRecorder::TraceRecorder(int64_t first_step, int64_t last_step)
    : first_(first_step), last_(last_step) {
  threads_.push_back(std::this_thread::get_id());
  thread_names_.emplace_back("training");
}

void TraceRecorder::set_step(int64_t step) {
  step_.store(step, std::memory_order_relaxed);
  active_.store(step >= first_ && step <= last_, std::memory_order_relaxed);
}

int64_t TraceRecorder::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int TraceRecorder::thread_number(const char* category) {
  const std::thread::id me = std::this_thread::get_id();
  for (size_t i = 0; i < threads_.size(); ++i) {
    if (threads_[i] == me) return static_cast<int>(i);
  }
  threads_.push_back(me);
  thread_names_.emplace_back(category);
  return static_cast<int>(threads_.size() - 1);
}

void TraceRecorder::add(const char* name, const char* category, int64_t begin_ns, int64_t end_ns,
                        const TraceFields& f) {
  TraceEvent e;
  e.name = name;
  e.category = category;
  e.begin_ns = begin_ns;
  e.end_ns = end_ns;
  e.step = step_.load(std::memory_order_relaxed);
  e.layer = f.layer;
  e.micro_batch = f.micro_batch;
  e.chunk = f.chunk;
  e.peer = f.peer;
  e.bytes = f.bytes;
  e.group = f.group;
  std::lock_guard<std::mutex> lock(mutex_);
  e.thread = thread_number(category);
  events_.push_back(std::move(e));
}

std::vector<TraceEvent> TraceRecorder::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::move(events_);
}

std::vector<std::string> TraceRecorder::thread_names() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return thread_names_;
}

}  // namespace trainctl::observe
