#pragma once
// Synchronous data parallelism with communication overlapped with the backward pass.
//
// The flat gradient buffer is cut into buckets of whole layers (parallel/buckets.h). On
// the micro-batch that completes an optimizer step, each bucket is summed over the DP
// group as soon as the backward pass has finished its lowest layer, on a communication
// thread, while the main thread goes on with the layers below. Earlier micro-batches of
// the step only accumulate locally: nothing is sent before the last one.
//
// The reduction is a plain SUM (the trainer already weights each token's loss by 1 /
// tokens-per-global-step), so DP=N with the same global batch reproduces DP=1.
//
// Threading contract: between the first on_layer_ready() of a syncing micro-batch and
// finish(), the communication thread drives the DP communicator and writes the buckets'
// parts of the gradient buffer. The caller must not use that communicator, nor read or
// write a bucket's gradients other than through the backward pass that is running, until
// finish() returns.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "parallel/buckets.h"
#include "parallel/comm_stats.h"
#include "parallel/grad_comm.h"
#include "parallel/powersgd.h"

namespace trainctl::model {
class Gpt;
}

namespace trainctl::parallel {

struct GradSyncOptions {
  BucketOptions buckets;
  GradCommDType dtype = GradCommDType::fp32;
  // parallel.grad_compression: powersgd: the 2-D gradients in `matrices` travel as
  // PowerSGD's low-rank factors (parallel/powersgd.h), the rest of each bucket in fp32.
  std::optional<PowerSgdOptions> powersgd = std::nullopt;
  std::vector<GradMatrix> matrices = {};
  // Expert parallelism: the flat ranges of the routed experts' gradients (ascending,
  // disjoint) are summed over `expert_dp` (the DP ranks holding the same experts) instead of
  // the DP group; the rest of each bucket over DP as usual. attach_grad_sync fills the
  // ranges from the parameters (ParamSpec::expert) when expert_dp is set.
  comm::Communicator* expert_dp = nullptr;
  std::vector<FloatRange> expert_ranges = {};
};

class GradSync {
 public:
  // `grads` is the flat gradient buffer; `layers` gives each layer's range of it in the
  // order the backward pass finishes them (see plan_buckets). With a DP group of one
  // rank nothing is communicated and no thread is started.
  GradSync(comm::Communicator& dp, float* grads, std::vector<FloatRange> layers,
           GradSyncOptions options = {});
  // Stops the communication thread after the collective it is running, if any (a
  // collective whose peers have gone away ends with the communicator's timeout).
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // The optimizer step (0-based) the following micro-batches belong to; call it before
  // the step's first begin_micro_batch(). Only PowerSGD looks at it: its warm-up steps
  // (PowerSgd::compresses_at) reduce the buckets exactly as without compression. Throws
  // std::logic_error while a syncing micro-batch is not finish()ed.
  void begin_step(int64_t step);

  // Call before each micro-batch's backward pass. `last` = this micro-batch completes the
  // step's gradients: its buckets are reduced as they become final. Throws
  // std::logic_error if the previous syncing micro-batch was not finish()ed.
  void begin_micro_batch(bool last);

  // From the model's grad-ready hook: layer `index` (position in `layers`) has its final
  // gradients for this micro-batch. Throws std::out_of_range / std::logic_error for an
  // unknown index or one reported twice.
  void on_layer_ready(int index);

  // Waits until every bucket of a syncing micro-batch is summed over the DP group (no-op
  // when the step had none). Afterwards the gradient buffer holds the sum and the DP
  // communicator is free. Rethrows the comm::CommError the communication thread met (the
  // group is then unusable: every later finish() throws it again). Throws
  // std::logic_error if a layer was never reported ready (hook not connected).
  void finish();

  // Communication of the last finish()ed step.
  const StepCommStats& stats() const { return stats_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  // The PowerSGD compressor (null without compression or with one DP rank), for
  // checkpoints; use it only between finish() and the next syncing micro-batch.
  PowerSgd* powersgd() { return powersgd_.get(); }

 private:
  void comm_loop();
  void enqueue(int bucket);
  // Sums one bucket: over DP, or, with expert ranges, its dense parts over DP and its
  // expert parts over the expert-DP group.
  void reduce_bucket(const Bucket& bucket);
  // Floats of `bucket` inside the expert ranges (0 without them), for statistics.
  int64_t expert_floats_in(const Bucket& bucket) const;

  comm::Communicator& dp_;
  float* grads_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_layer_;
  const bool communicate_;

  // Main thread only.
  bool syncing_ = false;
  int64_t step_ = 0;
  std::vector<int> layers_pending_;  // per bucket, layers not yet ready this micro-batch
  std::vector<char> layer_ready_;
  StepCommStats stats_;

  // Communication thread only.
  GradReducer reducer_;
  std::unique_ptr<GradReducer> expert_reducer_;  // over expert_dp, with expert ranges
  std::vector<FloatRange> expert_ranges_;        // empty: the whole bucket goes over DP
  std::unique_ptr<PowerSgd> powersgd_;
  // Whether this step's buckets go through powersgd_ (false during its warm-up). Written
  // by the main thread when a syncing micro-batch begins, before its first bucket is
  // queued (under mutex_), read by the communication thread for the buckets it dequeues.
  bool compress_ = false;

  // Shared, under mutex_.
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::deque<int> queue_;
  int enqueued_ = 0;
  int completed_ = 0;
  double comm_s_ = 0.0;
  size_t powersgd_wire_ = 0, powersgd_sent_ = 0;  // this step's, when compressing
  std::exception_ptr error_;
  bool stop_ = false;

  std::thread thread_;  // last: started once everything above exists
};

// The "layers" GradSync works with for a GPT: the model's gradient pieces (half blocks,
// then the embeddings) in the order its backward pass finishes them (Gpt::grad_pieces).
std::vector<FloatRange> backward_layer_ranges(const model::Gpt& gpt);

// A GradSync over `gpt`'s gradients with gpt's grad-ready hook connected to it (with
// PowerSGD, over the model's 2-D parameters). The hook
// refers to the returned object: run no backward pass after destroying it (or clear the
// hook with gpt.set_grad_ready_hook({}) first).
std::unique_ptr<GradSync> attach_grad_sync(model::Gpt& gpt, comm::Communicator& dp,
                                           const GradSyncOptions& options = {});

}  // namespace trainctl::parallel
