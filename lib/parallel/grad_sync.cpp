#include "parallel/grad_sync.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "model/gpt.h"

namespace trainctl::parallel {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
}  // namespace

GradSync::GradSync(comm::Communicator& dp, float* grads, std::vector<FloatRange> layers,
                   GradSyncOptions options)
    : dp_(dp),
      grads_(grads),
      buckets_(plan_buckets(layers, options.buckets)),
      bucket_of_layer_(layers.size()),
      communicate_(dp.size() > 1),
      layers_pending_(buckets_.size()),
      layer_ready_(layers.size()),
      reducer_(dp, options.dtype),
      expert_ranges_(std::move(options.expert_ranges)) {
  if (options.expert_dp == nullptr) expert_ranges_.clear();
  if (options.expert_dp != nullptr && !expert_ranges_.empty()) {
    expert_reducer_ = std::make_unique<GradReducer>(*options.expert_dp, options.dtype);
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (int l = buckets_[b].first_layer; l <= buckets_[b].last_layer; ++l) {
      bucket_of_layer_[static_cast<size_t>(l)] = static_cast<int>(b);
    }
  }
  if (communicate_ && options.powersgd) {
    powersgd_ = std::make_unique<PowerSgd>(dp, std::move(options.matrices), *options.powersgd);
  }
  if (communicate_) thread_ = std::thread([this] { comm_loop(); });
}

GradSync::~GradSync() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GradSync::begin_step(int64_t step) {
  if (syncing_) {
    throw std::logic_error(
        "GradSync: a step began while the previous step's gradients were still being reduced; "
        "call finish() after the step's last micro-batch");
  }
  step_ = step;
}

void GradSync::begin_micro_batch(bool last) {
  if (syncing_) {
    throw std::logic_error(
        "GradSync: a micro-batch started while the previous step's gradients were still being "
        "reduced; call finish() after the step's last micro-batch");
  }
  syncing_ = last;
  if (!last) return;
  {
    // The communication thread is idle (every bucket of the last step is completed); the
    // lock orders this write before the buckets it will dequeue.
    std::lock_guard<std::mutex> lock(mutex_);
    compress_ = powersgd_ != nullptr && powersgd_->compresses_at(step_);
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    layers_pending_[b] = buckets_[b].last_layer - buckets_[b].first_layer + 1;
  }
  std::fill(layer_ready_.begin(), layer_ready_.end(), 0);
}

void GradSync::on_layer_ready(int index) {
  if (index < 0 || static_cast<size_t>(index) >= layer_ready_.size()) {
    throw std::out_of_range("GradSync: layer index " + std::to_string(index) + " outside [0, " +
                            std::to_string(layer_ready_.size()) + ")");
  }
  if (!syncing_) return;  // accumulation-only micro-batch
  if (layer_ready_[static_cast<size_t>(index)]) {
    throw std::logic_error("GradSync: layer " + std::to_string(index) +
                           " reported ready twice in one micro-batch");
  }
  layer_ready_[static_cast<size_t>(index)] = 1;
  const int b = bucket_of_layer_[static_cast<size_t>(index)];
  if (--layers_pending_[static_cast<size_t>(b)] == 0) enqueue(b);
}

void GradSync::enqueue(int bucket) {
  if (!communicate_) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(bucket);
    ++enqueued_;
  }
  work_cv_.notify_one();
}

void GradSync::finish() {
  if (!syncing_) {
    stats_ = {};
    return;
  }
  syncing_ = false;
  const auto t0 = Clock::now();
  StepCommStats s;
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [&] { return completed_ == enqueued_; });
    s.comm_s = comm_s_;
    s.collectives = completed_;
    error = error_;
    comm_s_ = 0.0;
    s.wire_bytes = powersgd_wire_;
    s.sent_bytes = powersgd_sent_;
    powersgd_wire_ = powersgd_sent_ = 0;
    enqueued_ = completed_ = 0;
  }
  s.exposed_s = seconds_between(t0, Clock::now());
  if (error) {
    stats_ = s;
    std::rethrow_exception(error);
  }
  size_t bytes = 0, sent = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (layers_pending_[b] != 0) {
      throw std::logic_error("GradSync: layer " + std::to_string(buckets_[b].last_layer) +
                             " was never reported ready; is the model's grad-ready hook "
                             "connected to on_layer_ready()?");
    }
    const auto experts = static_cast<size_t>(expert_floats_in(buckets_[b]));
    const auto dense = static_cast<size_t>(buckets_[b].size()) - experts;
    bytes += dense * reducer_.wire_bytes_per_element();
    sent += reducer_.sent_bytes(dense);
    if (expert_reducer_ && expert_reducer_->comm_size() > 1) {
      bytes += experts * expert_reducer_->wire_bytes_per_element();
      sent += expert_reducer_->sent_bytes(experts);
    }
  }
  if (communicate_ && !compress_) {
    s.wire_bytes = bytes;
    s.sent_bytes = sent;
  }
  stats_ = s;
}

void GradSync::comm_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const Bucket& bucket = buckets_[static_cast<size_t>(queue_.front())];
    queue_.pop_front();
    if (!error_) {
      // The group is unusable after a failure: later buckets are only counted off.
      lock.unlock();
      std::exception_ptr error;
      StepCommStats compressed;
      const auto t0 = Clock::now();
      try {
        if (compress_) {
          compressed = powersgd_->reduce_bucket(grads_, bucket);
        } else {
          reduce_bucket(bucket);
        }
      } catch (...) {
        error = std::current_exception();
      }
      const double seconds = seconds_between(t0, Clock::now());
      lock.lock();
      comm_s_ += seconds;
      powersgd_wire_ += compressed.wire_bytes;
      powersgd_sent_ += compressed.sent_bytes;
      if (error) error_ = error;
    }
    ++completed_;
    done_cv_.notify_all();
  }
}

void GradSync::reduce_bucket(const Bucket& bucket) {
  if (expert_ranges_.empty()) {
    reducer_.allreduce_sum(grads_ + bucket.begin, static_cast<size_t>(bucket.size()));
    return;
  }
  // Walk the bucket: dense stretches over DP, expert stretches over expert-DP.
  int64_t at = bucket.begin;
  auto dense_until = [&](int64_t end) {
    if (end > at) reducer_.allreduce_sum(grads_ + at, static_cast<size_t>(end - at));
  };
  for (const auto& [b, e] : expert_ranges_) {
    if (e <= at || b >= bucket.end) continue;
    const int64_t lo = std::max(b, at), hi = std::min(e, bucket.end);
    dense_until(lo);
    if (expert_reducer_->comm_size() > 1) {
      expert_reducer_->allreduce_sum(grads_ + lo, static_cast<size_t>(hi - lo));
    }
    at = hi;
  }
  dense_until(bucket.end);
}

int64_t GradSync::expert_floats_in(const Bucket& bucket) const {
  int64_t n = 0;
  for (const auto& [b, e] : expert_ranges_) {
    n += std::max<int64_t>(0, std::min(e, bucket.end) - std::max(b, bucket.begin));
  }
  return n;
}

std::vector<FloatRange> backward_layer_ranges(const model::Gpt& gpt) { return gpt.grad_pieces(); }

std::unique_ptr<GradSync> attach_grad_sync(model::Gpt& gpt, comm::Communicator& dp,
                                           const GradSyncOptions& options) {
  GradSyncOptions o = options;
  if (o.powersgd) o.matrices = gradient_matrices(gpt.params());
  if (o.expert_dp != nullptr) {
    // One range per run of consecutive expert tensors (the alignment gaps between them
    // included), so a layer's experts travel in one call.
    o.expert_ranges.clear();
    bool previous = false;
    for (const model::Param& p : gpt.params().list()) {
      if (p.expert && previous) o.expert_ranges.back().second = p.offset + p.numel;
      if (p.expert && !previous) o.expert_ranges.emplace_back(p.offset, p.offset + p.numel);
      previous = p.expert;
    }
  }
  auto sync = std::make_unique<GradSync>(dp, gpt.params().grads(), backward_layer_ranges(gpt), o);
  GradSync* target = sync.get();
  // The model reports pieces by their index in grad_pieces(): the same list, same order.
  gpt.set_grad_ready_hook([target](int piece) { target->on_layer_ready(piece); });
  return sync;
}

}  // namespace trainctl::parallel
