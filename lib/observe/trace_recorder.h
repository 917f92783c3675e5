#pragma once
// A worker's timeline of the profiled steps (logging.profile_steps / train --profile A:B):
// begin/end events of forward and backward per layer, pipeline instructions, every
// communicator call, the optimizer, data waits and checkpoint writes. One recorder per
// worker, owned by the training loop and handed by pointer to what it times (no global).
//
// Off costs one branch: every TraceScope checks a null pointer or the recorder's `active`
// flag (relaxed atomic load, set once per step) and does nothing else. On, an event costs
// two clock reads and a mutex-guarded push_back; events are kept in memory until
// take(). Threads are numbered in the order they first record (the training thread is the
// one that constructed the recorder: 0).
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace trainctl::observe {

// What an event is about; -1 / empty: not applicable.
struct TraceFields {
  int layer = -1;
  int micro_batch = -1;
  int chunk = -1;
  int peer = -1;
  int64_t bytes = -1;
  std::string_view group;  // communicator name ("dp[0]"); must outlive the scope
};

struct TraceEvent {
  const char* name = "";             // a string literal: "forward", "allreduce", ...
  const char* category = "";         // compute | comm | pipeline | optimizer | data | checkpoint
  int64_t begin_ns = 0, end_ns = 0;  // steady clock of this process
  int64_t step = 0;                  // 1-based
  int thread = 0;                    // 0: the training thread
  int layer = -1, micro_batch = -1, chunk = -1, peer = -1;
  int64_t bytes = -1;
  std::string group;
};

class TraceRecorder {
 public:
  // Records steps first..last (1-based, inclusive).
  TraceRecorder(int64_t first_step, int64_t last_step);

  // Called by the training loop before each step (1-based): recording is on inside the range.
  void set_step(int64_t step);
  // Stops recording (before the merge, whose own messages are not part of the timeline).
  void stop() { active_.store(false, std::memory_order_relaxed); }
  bool active() const { return active_.load(std::memory_order_relaxed); }

  static int64_t now_ns();
  void add(const char* name, const char* category, int64_t begin_ns, int64_t end_ns,
           const TraceFields& fields);

  std::vector<TraceEvent> take();  // every event so far, in recording order
  // Each recording thread's role, by thread number: "training" for 0, else the category of
  // its first event ("comm" for the DP communication thread, "checkpoint", ...).
  std::vector<std::string> thread_names() const;
  int64_t first_step() const { return first_; }
  int64_t last_step() const { return last_; }

 private:
  int thread_number(const char* category);  // under mutex_

  const int64_t first_, last_;
  std::atomic<bool> active_{false};
  std::atomic<int64_t> step_{0};
  mutable std::mutex mutex_;
  std::vector<TraceEvent> events_;
  std::vector<std::thread::id> threads_;
  std::vector<std::string> thread_names_;
};

// Times its own lifetime as one event when `recorder` is non-null and recording.
class TraceScope {
 public:
  TraceScope(TraceRecorder* recorder, const char* name, const char* category,
             const TraceFields& fields = {})
      : recorder_(recorder != nullptr && recorder->active() ? recorder : nullptr) {
    if (recorder_ == nullptr) return;
    name_ = name;
    category_ = category;
    fields_ = fields;
    begin_ns_ = TraceRecorder::now_ns();
  }
  ~TraceScope() {
    if (recorder_ != nullptr) {
      recorder_->add(name_, category_, begin_ns_, TraceRecorder::now_ns(), fields_);
    }
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  TraceRecorder* recorder_;
  const char* name_ = "";
  const char* category_ = "";
  TraceFields fields_;
  int64_t begin_ns_ = 0;
};

}  // namespace trainctl::observe
