#include "parallel/pipeline_executor.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>
#include <string>

namespace trainctl::parallel {

namespace {

using Clock = std::chrono::steady_clock;

template <class Fn>
void timed(double* total_s, Fn&& fn) {
  const auto t0 = Clock::now();
  fn();
  *total_s += std::chrono::duration<double>(Clock::now() - t0).count();
}

observe::TraceFields instruction_fields(const Instruction& ins) {
  observe::TraceFields f;
  f.micro_batch = ins.micro_batch;
  f.chunk = ins.chunk;
  f.peer = ins.peer_stage;
  return f;
}

int max_chunk(const std::vector<Instruction>& program) {
  int n = 0;
  for (const Instruction& i : program) n = std::max(n, i.chunk);
  return n;
}

// The model's activation slots during one step: a free list per chunk, and the slot each
// (chunk, micro-batch) holds from its forward (or the receive before it) to its backward.
class ActivationSlots {
 public:
  ActivationSlots(const std::vector<int>& slots, int micro_batches)
      : free_(slots.size()), micro_batches_(micro_batches) {
    for (size_t c = 0; c < slots.size(); ++c) {
      for (int s = slots[c] - 1; s >= 0; --s) free_[c].push_back(s);
    }
  }
  // Gives `i`'s (chunk, micro-batch) a free slot of its chunk.
  int take(const Instruction& i) {
    auto& f = free_[static_cast<size_t>(i.chunk)];
    if (f.empty()) throw std::logic_error("pipeline: out of activation slots");
    const int s = f.back();
    f.pop_back();
    slot_of_[key(i)] = s;
    return s;
  }
  bool holds(const Instruction& i) const { return slot_of_.count(key(i)) != 0; }
  // The slot `i`'s (chunk, micro-batch) holds; logic_error when it never ran forward.
  int of(const Instruction& i) const {
    auto it = slot_of_.find(key(i));
    if (it == slot_of_.end()) {
      throw std::logic_error("pipeline: " + describe(i) + " has no forward");
    }
    return it->second;
  }
  // Gives slot `s` of `i`'s chunk back.
  void release(const Instruction& i, int s) {
    free_[static_cast<size_t>(i.chunk)].push_back(s);
    slot_of_.erase(key(i));
  }
  bool empty() const { return slot_of_.empty(); }
  int key(const Instruction& i) const { return i.chunk * micro_batches_ + i.micro_batch; }

 private:
  std::vector<std::vector<int>> free_;
  std::map<int, int> slot_of_;  // key()
  int micro_batches_;
};

}  // namespace

// One run_step in progress: what its instructions hand on to each other.
struct PipelineExecutor::Step {
  Step(PipelineExecutor& executor, const std::function<MicroBatchData(int mb)>& batch, float scale,
       const std::function<void()>& on_final_backward)
      : x(executor),
        data(batch),
        grad_scale(scale),
        before_final_backward(on_final_backward),
        act_bytes(static_cast<size_t>(x.gpt_.boundary_bytes())),
        grad_bytes(static_cast<size_t>(x.gpt_.boundary_floats()) * sizeof(float)),
        slots(activation_slots_per_chunk(x.program_, x.gpt_.num_chunks()), x.micro_batches_),
        backwards_done(static_cast<size_t>(x.gpt_.num_chunks()), 0),
        activations(x.activation_staging_),
        grads(x.grad_staging_) {}

  PipelineExecutor& x;  // the executor running the step
  const std::function<MicroBatchData(int mb)>& data;
  float grad_scale;
  const std::function<void()>& before_final_backward;
  size_t act_bytes;   // one boundary activation, as the model keeps it
  size_t grad_bytes;  // one boundary gradient (fp32)
  ActivationSlots slots;
  PipelineStepResult result;
  model::Gpt::ChunkLoss loss;
  // Each forward's output staged for its send or hand-over (ActivationSlots::key).
  std::map<int, void*> output_of;
  std::vector<int> backwards_done;  // per chunk
  bool final_started = false;
  // B done, W not yet: each (chunk, micro-batch)'s kept weight-gradient work
  // (ActivationSlots::key).
  std::map<int, std::unique_ptr<model::DeferredWeightGrads>> weights_pending;
  const float* input_grad = nullptr;  // of the last backward
  // Outgoing activations and gradients (parallel/boundary_staging.h).
  StagingPool activations, grads;
  // Input gradients handed to another chunk of this stage, by the receiver's
  // ActivationSlots::key (staging buffers, as for sends).
  std::map<int, void*> local_grads;

  void execute(const Instruction& ins);
  void recv_activation(const Instruction& ins);
  void forward(const Instruction& ins);
  void send_activation(const Instruction& ins);
  void recv_grad(const Instruction& ins);
  void backward(const Instruction& ins);
  void backward_weight(const Instruction& ins);
  void send_grad(const Instruction& ins);
  // A gradient staging buffer holding a copy of `grad`.
  void* stage_grad(const float* grad);
};

std::vector<int> activation_slots_per_chunk(const std::vector<Instruction>& program, int chunks) {
  std::vector<int> live(static_cast<size_t>(std::max(chunks, max_chunk(program) + 1)), 0);
  std::vector<int> peak(live.size(), 1);
  for (const Instruction& i : program) {
    // A slot is held from F to the backward, or to W where B and W are split.
    const auto c = static_cast<size_t>(i.chunk);
    if (i.kind == OpKind::forward) {
      peak[c] = std::max(peak[c], ++live[c]);
    } else if (i.kind == OpKind::backward || i.kind == OpKind::backward_weight) {
      --live[c];
    }
  }
  return peak;
}

int activation_slots_needed(const std::vector<Instruction>& program) {
  const std::vector<int> per_chunk = activation_slots_per_chunk(program, 1);
  return *std::max_element(per_chunk.begin(), per_chunk.end());
}

PipelineExecutor::PipelineExecutor(model::Gpt& gpt, comm::Communicator& pp,
                                   std::vector<Instruction> program, int num_micro_batches,
                                   model::ChunkOrder order, int staging)
    : gpt_(gpt),
      pp_(pp),
      program_(std::move(program)),
      stage_(pp.rank()),
      stages_(pp.size()),
      micro_batches_(num_micro_batches),
      order_(order) {
  if (max_chunk(program_) >= gpt_.num_chunks()) {
    throw std::invalid_argument("pipeline program uses more chunks than the model shard holds");
  }
  if (micro_batches_ >= (1 << 16) || gpt_.num_chunks() * stages_ >= (1 << 14)) {
    throw std::invalid_argument("pipeline: at most 65535 micro-batches and 16383 virtual stages");
  }
  if (staging < 1 && !program_.empty()) {
    throw std::invalid_argument("pipeline: at least one staging buffer of each kind");
  }
  const auto grad_bytes = static_cast<size_t>(gpt_.boundary_floats()) * sizeof(float);
  for (int i = staging; i > 0; --i) {
    grad_staging_.push_back(gpt_.backend().alloc(grad_bytes));
    activation_staging_.push_back(gpt_.backend().alloc(static_cast<size_t>(gpt_.boundary_bytes())));
  }
}

PipelineExecutor::~PipelineExecutor() {
  for (void* p : grad_staging_) gpt_.backend().free(p);
  for (void* p : activation_staging_) gpt_.backend().free(p);
}

int weight_grads_held(const std::vector<Instruction>& program) {
  int held = 0, peak = 0;
  for (const Instruction& i : program) {
    if (i.kind == OpKind::backward_input) peak = std::max(peak, ++held);
    if (i.kind == OpKind::backward_weight) --held;
  }
  return peak;
}

int PipelineExecutor::local_chunk(int v) const {
  if (v < 0 || v >= gpt_.num_chunks() * stages_) return -1;
  const model::ChunkPlace place = model::place_of_virtual_stage(order_, v, stages_);
  return place.rank == stage_ ? place.chunk : -1;
}

uint32_t PipelineExecutor::tag(bool gradient, int micro_batch, int vstage) const {
  return (gradient ? 1u << 30 : 0u) | static_cast<uint32_t>(vstage) << 16 |
         static_cast<uint32_t>(micro_batch);
}

void PipelineExecutor::Step::execute(const Instruction& ins) {
  switch (ins.kind) {
    case OpKind::recv_activation:
      recv_activation(ins);
      break;
    case OpKind::forward:
      forward(ins);
      break;
    case OpKind::send_activation:
      send_activation(ins);
      break;
    case OpKind::recv_grad:
      recv_grad(ins);
      break;
    case OpKind::backward:
    case OpKind::backward_input:
      backward(ins);
      break;
    case OpKind::backward_weight:
      backward_weight(ins);
      break;
    case OpKind::send_grad:
      send_grad(ins);
      break;
    case OpKind::optimizer_step:
      break;
  }
}

void PipelineExecutor::Step::recv_activation(const Instruction& ins) {
  const int s = slots.take(ins);
  timed(&result.idle_s, [&] {
    x.pp_.recv(x.gpt_.input_buffer(ins.chunk, s), act_bytes, ins.peer_stage,
               x.tag(false, ins.micro_batch, x.virtual_stage(ins.chunk)));
  });
}

void PipelineExecutor::Step::forward(const Instruction& ins) {
  const int s = slots.holds(ins) ? slots.of(ins) : slots.take(ins);
  const int from = x.local_chunk(x.virtual_stage(ins.chunk) - 1);
  if (from >= 0) {  // the turn of the V: the previous virtual stage ran here
    Instruction producer = ins;
    producer.chunk = from;
    auto out = output_of.find(slots.key(producer));
    if (out == output_of.end()) {
      throw std::logic_error("pipeline: " + describe(ins) + " before its chunk " +
                             std::to_string(from) + " forward");
    }
    x.gpt_.copy_boundary(x.gpt_.input_buffer(ins.chunk, s), out->second);
    activations.give_back(out->second);
    output_of.erase(out);
  }
  const MicroBatchData d = data(ins.micro_batch);
  const float* out =
      x.gpt_.forward_chunk(ins.chunk, s, d.tokens, d.targets, true, grad_scale, &loss);
  if (out != nullptr) {  // not the last virtual stage: staged for its send or hand-over
    void* staged = activations.take(&result.idle_s);
    x.gpt_.store_boundary(staged, out);
    output_of[slots.key(ins)] = staged;
  }
}

void PipelineExecutor::Step::send_activation(const Instruction& ins) {
  auto out = output_of.find(slots.key(ins));
  if (out == output_of.end())
    throw std::logic_error("pipeline: " + describe(ins) + " before its forward");
  activations.sent(out->second,
                   x.pp_.isend(out->second, act_bytes, ins.peer_stage,
                               x.tag(false, ins.micro_batch, x.virtual_stage(ins.chunk) + 1)));
  output_of.erase(out);
}

void PipelineExecutor::Step::recv_grad(const Instruction& ins) {
  timed(&result.idle_s, [&] {
    x.pp_.recv(x.gpt_.output_grad_buffer(), grad_bytes, ins.peer_stage,
               x.tag(true, ins.micro_batch, x.virtual_stage(ins.chunk)));
  });
}

void PipelineExecutor::Step::backward(const Instruction& ins) {
  const int s = slots.of(ins);
  const bool final = ++backwards_done[static_cast<size_t>(ins.chunk)] == x.micro_batches_;
  if (final && !final_started) {
    final_started = true;
    if (before_final_backward) before_final_backward();
  }
  const int k = slots.key(ins);
  const int v = x.virtual_stage(ins.chunk);
  if (x.local_chunk(v + 1) >= 0) {  // the gradient comes from this stage's other chunk
    auto given = local_grads.find(k);
    if (given == local_grads.end()) {
      throw std::logic_error("pipeline: " + describe(ins) + " before the backward of chunk " +
                             std::to_string(x.local_chunk(v + 1)));
    }
    x.gpt_.backend().copy(x.gpt_.output_grad_buffer(), static_cast<const float*>(given->second),
                          static_cast<size_t>(x.gpt_.boundary_floats()));
    grads.give_back(given->second);
    local_grads.erase(given);
  }
  model::DeferredWeightGrads* later = nullptr;
  if (ins.kind == OpKind::backward_input) {
    auto& kept = weights_pending[k];
    kept = x.take_weight_grads();
    later = kept.get();
  }
  input_grad = x.gpt_.backward_chunk(ins.chunk, s, data(ins.micro_batch).tokens, final, later);
  const int to = x.local_chunk(v - 1);
  if (to >= 0) {  // keep the input gradient for this stage's chunk `to`
    Instruction receiver = ins;
    receiver.chunk = to;
    local_grads[slots.key(receiver)] = stage_grad(input_grad);
  }
  // The slot is free now or, after a B, once its W has run: W may read the linear layers'
  // inputs where the forward left them in the slot (model/deferred_weight_grads.h).
  if (ins.kind != OpKind::backward_input) slots.release(ins, s);
}

void PipelineExecutor::Step::backward_weight(const Instruction& ins) {
  auto it = weights_pending.find(slots.key(ins));
  if (it == weights_pending.end()) {
    throw std::logic_error("pipeline: " + describe(ins) + " has no backward_input before it");
  }
  it->second->run();
  x.weight_grads_free_.push_back(std::move(it->second));
  weights_pending.erase(it);
  slots.release(ins, slots.of(ins));
}

std::unique_ptr<model::DeferredWeightGrads> PipelineExecutor::take_weight_grads() {
  if (weight_grads_free_.empty()) {
    return std::make_unique<model::DeferredWeightGrads>(gpt_.backend());
  }
  auto kept = std::move(weight_grads_free_.back());
  weight_grads_free_.pop_back();
  return kept;
}

void* PipelineExecutor::Step::stage_grad(const float* grad) {
  void* staged = grads.take(&result.idle_s);
  x.gpt_.backend().copy(static_cast<float*>(staged), grad,
                        static_cast<size_t>(x.gpt_.boundary_floats()));
  return staged;
}

void PipelineExecutor::Step::send_grad(const Instruction& ins) {
  if (input_grad == nullptr) throw std::logic_error("pipeline: send_grad without a backward");
  void* staged = stage_grad(input_grad);
  grads.sent(staged, x.pp_.isend(staged, grad_bytes, ins.peer_stage,
                                 x.tag(true, ins.micro_batch, x.virtual_stage(ins.chunk) - 1)));
}

PipelineStepResult PipelineExecutor::run_step(const std::function<MicroBatchData(int mb)>& data,
                                              float grad_scale,
                                              const std::function<void()>& before_final_backward) {
  Step step(*this, data, grad_scale, before_final_backward);
  for (const Instruction& ins : program_) {
    observe::TraceScope trace(trace_, to_string(ins.kind), "pipeline", instruction_fields(ins));
    step.execute(ins);
  }
  step.grads.wait_all(&step.result.idle_s);
  step.activations.wait_all(&step.result.idle_s);
  if (!step.output_of.empty())
    throw std::logic_error("pipeline: an output neither sent nor handed over");
  if (!step.slots.empty()) throw std::logic_error("pipeline: a micro-batch ran forward only");
  if (!step.local_grads.empty()) {
    throw std::logic_error("pipeline: a gradient handed to a chunk whose backward never ran");
  }
  if (!step.weights_pending.empty()) {
    throw std::logic_error("pipeline: a backward_input without its backward_weight");
  }
  step.result.loss_sum = step.loss.sum;
  step.result.loss_count = step.loss.count;
  return step.result;
}

PipelineStepResult PipelineExecutor::run_forward(const MicroBatchData& batch) {
  const auto bytes = static_cast<size_t>(gpt_.boundary_bytes());
  const int last = gpt_.num_chunks() * stages_ - 1;
  auto holder = [&](int v) { return model::place_of_virtual_stage(order_, v, stages_).rank; };
  PipelineStepResult result;
  model::Gpt::ChunkLoss loss;
  StagingPool outgoing(activation_staging_);
  const float* local_out = nullptr;  // the previous chunk's output, when it goes to the next
  for (int c = 0; c < gpt_.num_chunks(); ++c) {
    const int v = virtual_stage(c);
    if (local_chunk(v - 1) >= 0) {
      gpt_.store_boundary(gpt_.input_buffer(c, 0), local_out);
    } else if (!gpt_.has_embedding(c)) {
      timed(&result.idle_s,
            [&] { pp_.recv(gpt_.input_buffer(c, 0), bytes, holder(v - 1), tag(false, 0, v)); });
    }
    const float* out = gpt_.forward_chunk(c, 0, batch.tokens, batch.targets, false, 0.0f, &loss);
    local_out = out;
    if (v < last && local_chunk(v + 1) < 0) {
      void* staged = outgoing.take(&result.idle_s);
      gpt_.store_boundary(staged, out);
      outgoing.sent(staged, pp_.isend(staged, bytes, holder(v + 1), tag(false, 0, v + 1)));
    }
  }
  outgoing.wait_all(&result.idle_s);
  result.loss_sum = loss.sum;
  result.loss_count = loss.count;
  return result;
}

}  // namespace trainctl::parallel
