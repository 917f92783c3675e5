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

int max_chunk(const std::vector<Instruction>& program) {
  int n = 0;
  for (const Instruction& i : program) n = std::max(n, i.chunk);
  return n;
}

}  // namespace

int activation_slots_needed(const std::vector<Instruction>& program) {
  std::vector<int> live(static_cast<size_t>(max_chunk(program)) + 1, 0);
  int peak = 0;
  for (const Instruction& i : program) {
    if (i.kind == OpKind::forward) {
      peak = std::max(peak, ++live[static_cast<size_t>(i.chunk)]);
    } else if (i.kind == OpKind::backward) {
      --live[static_cast<size_t>(i.chunk)];
    }
  }
  return std::max(peak, 1);
}

PipelineExecutor::PipelineExecutor(model::Gpt& gpt, comm::Communicator& pp,
                                   std::vector<Instruction> program, int num_micro_batches)
    : gpt_(gpt),
      pp_(pp),
      program_(std::move(program)),
      stage_(pp.rank()),
      stages_(pp.size()),
      micro_batches_(num_micro_batches) {
  if (max_chunk(program_) >= gpt_.num_chunks()) {
    throw std::invalid_argument("pipeline program uses more chunks than the model shard holds");
  }
  if (micro_batches_ >= (1 << 16) || gpt_.num_chunks() * stages_ >= (1 << 14)) {
    throw std::invalid_argument("pipeline: at most 65535 micro-batches and 16383 virtual stages");
  }
  const auto floats = static_cast<size_t>(gpt_.boundary_floats());
  for (int i = grad_staging_buffers(program_); i > 0; --i) {
    grad_staging_.push_back(static_cast<float*>(gpt_.backend().alloc(floats * sizeof(float))));
  }
}

PipelineExecutor::~PipelineExecutor() {
  for (float* p : grad_staging_) gpt_.backend().free(p);
}

int grad_staging_buffers(const std::vector<Instruction>& program) {
  int n = 0;
  for (const Instruction& ins : program) n += ins.kind == OpKind::send_grad ? 1 : 0;
  return n;
}

uint32_t PipelineExecutor::tag(bool gradient, int micro_batch, int vstage) const {
  return (gradient ? 1u << 30 : 0u) | static_cast<uint32_t>(vstage) << 16 |
         static_cast<uint32_t>(micro_batch);
}

void PipelineExecutor::wait_all_sends(double* idle_s) {
  timed(idle_s, [&] {
    for (auto& s : sends_) s->wait();
  });
  sends_.clear();
}

PipelineStepResult PipelineExecutor::run_step(const std::function<MicroBatchData(int mb)>& data,
                                              float grad_scale,
                                              const std::function<void()>& before_final_backward) {
  const int chunks = gpt_.num_chunks();
  const auto bytes = static_cast<size_t>(gpt_.boundary_floats()) * sizeof(float);
  PipelineStepResult result;
  model::Gpt::ChunkLoss loss;
  // Activation slots: free lists per chunk, and the slot of each (chunk, mb) in flight.
  const int slots = activation_slots_needed(program_);
  std::vector<std::vector<int>> free_slots(static_cast<size_t>(chunks));
  for (auto& f : free_slots) {
    for (int s = slots - 1; s >= 0; --s) f.push_back(s);
  }
  std::map<int, int> slot_of;  // key: chunk * micro_batches + mb
  std::map<int, const float*> output_of;
  std::map<int, std::unique_ptr<comm::PendingSend>> activation_sends;
  std::vector<int> backwards_done(static_cast<size_t>(chunks), 0);
  bool final_started = false;
  const float* input_grad = nullptr;
  size_t grad_sends = 0;

  auto key = [&](const Instruction& i) { return i.chunk * micro_batches_ + i.micro_batch; };
  auto take_slot = [&](const Instruction& i) {
    auto& f = free_slots[static_cast<size_t>(i.chunk)];
    if (f.empty()) throw std::logic_error("pipeline: out of activation slots");
    const int s = f.back();
    f.pop_back();
    slot_of[key(i)] = s;
    return s;
  };
  auto slot = [&](const Instruction& i) {
    auto it = slot_of.find(key(i));
    if (it == slot_of.end()) throw std::logic_error("pipeline: " + describe(i) + " has no forward");
    return it->second;
  };

  for (const Instruction& ins : program_) {
    switch (ins.kind) {
      case OpKind::recv_activation: {
        const int s = take_slot(ins);
        timed(&result.idle_s, [&] {
          pp_.recv(gpt_.input_buffer(ins.chunk, s), bytes, ins.peer_stage,
                   tag(false, ins.micro_batch, virtual_stage(ins.chunk)));
        });
        break;
      }
      case OpKind::forward: {
        const int s = slot_of.count(key(ins)) != 0 ? slot(ins) : take_slot(ins);
        const MicroBatchData d = data(ins.micro_batch);
        output_of[key(ins)] =
            gpt_.forward_chunk(ins.chunk, s, d.tokens, d.targets, true, grad_scale, &loss);
        break;
      }
      case OpKind::send_activation:
        activation_sends[key(ins)] =
            pp_.isend(output_of.at(key(ins)), bytes, ins.peer_stage,
                      tag(false, ins.micro_batch, virtual_stage(ins.chunk) + 1));
        break;
      case OpKind::recv_grad:
        timed(&result.idle_s, [&] {
          pp_.recv(gpt_.output_grad_buffer(), bytes, ins.peer_stage,
                   tag(true, ins.micro_batch, virtual_stage(ins.chunk)));
        });
        break;
      case OpKind::backward: {
        const int s = slot(ins);
        const bool final = ++backwards_done[static_cast<size_t>(ins.chunk)] == micro_batches_;
        if (final && !final_started) {
          final_started = true;
          if (before_final_backward) before_final_backward();
        }
        input_grad = gpt_.backward_chunk(ins.chunk, s, data(ins.micro_batch).tokens, final);
        // The slot is free once the activation it sent has left.
        auto sent = activation_sends.find(key(ins));
        if (sent != activation_sends.end()) {
          timed(&result.idle_s, [&] { sent->second->wait(); });
          activation_sends.erase(sent);
        }
        free_slots[static_cast<size_t>(ins.chunk)].push_back(s);
        slot_of.erase(key(ins));
        output_of.erase(key(ins));
        break;
      }
      case OpKind::send_grad: {
        if (input_grad == nullptr) throw std::logic_error("pipeline: send_grad without a backward");
        if (grad_sends >= grad_staging_.size()) {
          throw std::logic_error("pipeline: more gradient sends than staging buffers");
        }
        float* staged = grad_staging_[grad_sends++];
        gpt_.backend().copy(staged, input_grad, static_cast<size_t>(gpt_.boundary_floats()));
        sends_.push_back(pp_.isend(staged, bytes, ins.peer_stage,
                                   tag(true, ins.micro_batch, virtual_stage(ins.chunk) - 1)));
        break;
      }
      case OpKind::optimizer_step:
        break;
    }
  }
  for (auto& [k, s] : activation_sends) sends_.push_back(std::move(s));
  wait_all_sends(&result.idle_s);
  if (!slot_of.empty()) throw std::logic_error("pipeline: a micro-batch ran forward only");
  result.loss_sum = loss.sum;
  result.loss_count = loss.count;
  return result;
}

PipelineStepResult PipelineExecutor::run_forward(const MicroBatchData& batch) {
  const auto bytes = static_cast<size_t>(gpt_.boundary_floats()) * sizeof(float);
  const int prev = (stage_ + stages_ - 1) % stages_, next = (stage_ + 1) % stages_;
  PipelineStepResult result;
  model::Gpt::ChunkLoss loss;
  for (int c = 0; c < gpt_.num_chunks(); ++c) {
    if (!gpt_.has_embedding(c)) {
      timed(&result.idle_s, [&] {
        pp_.recv(gpt_.input_buffer(c, 0), bytes, prev, tag(false, 0, virtual_stage(c)));
      });
    }
    const float* out = gpt_.forward_chunk(c, 0, batch.tokens, batch.targets, false, 0.0f, &loss);
    if (!gpt_.has_head(c)) {
      sends_.push_back(pp_.isend(out, bytes, next, tag(false, 0, virtual_stage(c) + 1)));
    }
  }
  wait_all_sends(&result.idle_s);
  result.loss_sum = loss.sum;
  result.loss_count = loss.count;
  return result;
}

}  // namespace trainctl::parallel
