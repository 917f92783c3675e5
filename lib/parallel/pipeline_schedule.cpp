#include "parallel/pipeline_schedule.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "parallel/zero_bubble_schedule.h"
#include "util/error.h"

namespace trainctl::parallel {
namespace {

// Appends one stage's instructions with the send/recv that surround each compute op.
class ScheduleBuilder {
 public:
  ScheduleBuilder(int stage, int num_stages, int virtual_stages)
      : stage_(stage),
        stages_(num_stages),
        last_virtual_(num_stages * virtual_stages - 1),
        previous_((stage + num_stages - 1) % num_stages),
        next_((stage + 1) % num_stages) {}

  void forward(int mb, int chunk = 0) {
    const int v = virtual_stage(chunk);
    if (v > 0) list_.push_back({OpKind::recv_activation, mb, previous_, chunk});
    list_.push_back({OpKind::forward, mb, -1, chunk});
    if (v < last_virtual_) list_.push_back({OpKind::send_activation, mb, next_, chunk});
  }

  // A full backward, or B of the zero-bubble schedules (kind backward_input).
  void backward(int mb, int chunk = 0, OpKind kind = OpKind::backward) {
    const int v = virtual_stage(chunk);
    if (v < last_virtual_) list_.push_back({OpKind::recv_grad, mb, next_, chunk});
    list_.push_back({kind, mb, -1, chunk});
    if (v > 0) list_.push_back({OpKind::send_grad, mb, previous_, chunk});
  }

  // W of the zero-bubble schedules: no message.
  void weight_grads(int mb, int chunk = 0) {
    list_.push_back({OpKind::backward_weight, mb, -1, chunk});
  }

  std::vector<Instruction> finish() {
    list_.push_back({OpKind::optimizer_step, -1, -1});
    return std::move(list_);
  }

 private:
  int virtual_stage(int chunk) const { return chunk * stages_ + stage_; }

  int stage_;
  int stages_;
  int last_virtual_;
  int previous_;  // the physical stage holding virtual stage v - 1 (wraps for chunk > 0)
  int next_;      // the physical stage holding virtual stage v + 1
  std::vector<Instruction> list_;
};

// The k-th forward (or backward) of a stage in the interleaved schedule: micro-batches go
// in groups of num_stages through chunk 0, then the same group through chunk 1, ...
struct ChunkStep {
  int micro_batch;
  int chunk;
};

ChunkStep interleaved_step(int k, int num_stages, int virtual_stages, bool forward) {
  const int group = k / (num_stages * virtual_stages);
  const int chunk = (k / num_stages) % virtual_stages;
  return {group * num_stages + k % num_stages, forward ? chunk : virtual_stages - 1 - chunk};
}

std::string shape_text(int stage, int num_stages, int num_micro_batches, int virtual_stages) {
  return "stage " + std::to_string(stage) + " of " + std::to_string(num_stages) + ", " +
         std::to_string(num_micro_batches) + " micro-batches, " + std::to_string(virtual_stages) +
         " virtual stages";
}

void check_shape(ScheduleKind kind, int stage, int num_stages, int m, int v) {
  if (num_stages < 1 || stage < 0 || stage >= num_stages || m < 1) {
    throw std::invalid_argument(
        "make_schedule: need num_stages >= 1, 0 <= stage < num_stages and "
        "num_micro_batches >= 1; got " +
        shape_text(stage, num_stages, m, v));
  }
  if (kind != ScheduleKind::interleaved) {
    if (v != 1) {
      throw std::invalid_argument(std::string("make_schedule: the ") + to_string(kind) +
                                  " schedule runs one chunk per stage (virtual_stages 1); got " +
                                  shape_text(stage, num_stages, m, v));
    }
    return;
  }
  if (v < 2) {
    throw std::invalid_argument(
        "make_schedule: the interleaved schedule needs virtual_stages >= 2 (use 1f1b for one "
        "chunk per stage); got " +
        shape_text(stage, num_stages, m, v));
  }
  if (num_stages < 2) {
    throw std::invalid_argument(
        "make_schedule: the interleaved schedule needs at least 2 pipeline stages (one stage "
        "would send activations to itself); got " +
        shape_text(stage, num_stages, m, v));
  }
  if (m % num_stages != 0) {
    throw std::invalid_argument(
        "make_schedule: the interleaved schedule runs micro-batches in groups of num_stages: "
        "num_micro_batches must be a multiple of it; got " +
        shape_text(stage, num_stages, m, v));
  }
}

}  // namespace

const char* to_string(OpKind kind) {
  switch (kind) {
    case OpKind::forward:
      return "forward";
    case OpKind::backward:
      return "backward";
    case OpKind::send_activation:
      return "send_activation";
    case OpKind::recv_activation:
      return "recv_activation";
    case OpKind::send_grad:
      return "send_grad";
    case OpKind::recv_grad:
      return "recv_grad";
    case OpKind::optimizer_step:
      return "optimizer_step";
    case OpKind::backward_input:
      return "backward_input";
    case OpKind::backward_weight:
      return "backward_weight";
  }
  return "?";
}

bool is_compute(OpKind kind) {
  return kind == OpKind::forward || kind == OpKind::backward || kind == OpKind::backward_input ||
         kind == OpKind::backward_weight;
}

bool is_input_backward(OpKind kind) {
  return kind == OpKind::backward || kind == OpKind::backward_input;
}

bool ends_micro_batch(OpKind kind) {
  return kind == OpKind::backward || kind == OpKind::backward_weight;
}

std::string describe(const Instruction& in) {
  std::string text = to_string(in.kind);
  if (in.kind == OpKind::optimizer_step) return text;
  text += " mb " + std::to_string(in.micro_batch);
  if (in.chunk != 0) text += " chunk " + std::to_string(in.chunk);
  if (in.kind == OpKind::send_activation || in.kind == OpKind::send_grad) {
    text += " to stage " + std::to_string(in.peer_stage);
  } else if (in.kind == OpKind::recv_activation || in.kind == OpKind::recv_grad) {
    text += " from stage " + std::to_string(in.peer_stage);
  }
  return text;
}

const char* to_string(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::gpipe:
      return "gpipe";
    case ScheduleKind::one_f_one_b:
      return "1f1b";
    case ScheduleKind::interleaved:
      return "interleaved";
    case ScheduleKind::zb1p:
      return "zb1p";
  }
  return "?";
}

ScheduleKind parse_schedule_kind(std::string_view name) {
  if (name == "gpipe") return ScheduleKind::gpipe;
  if (name == "1f1b") return ScheduleKind::one_f_one_b;
  if (name == "interleaved") return ScheduleKind::interleaved;
  if (name == "zb1p") return ScheduleKind::zb1p;
  throw InputError("unknown pipeline schedule '" + std::string(name) +
                   "'; use gpipe, 1f1b, interleaved or zb1p");
}

int warmup_forwards(ScheduleKind kind, int stage, int num_stages, int num_micro_batches,
                    int virtual_stages) {
  check_shape(kind, stage, num_stages, num_micro_batches, virtual_stages);
  switch (kind) {
    case ScheduleKind::gpipe:
      return num_micro_batches;
    case ScheduleKind::one_f_one_b:
    case ScheduleKind::zb1p:
      // Later stages need fewer forwards in flight before the first gradient comes back.
      return std::min(num_stages - stage - 1, num_micro_batches);
    case ScheduleKind::interleaved:
      // Megatron's count: the last virtual stage is reached after (V-1) * p chunk forwards
      // of stage 0, and each earlier stage waits two more steps for the gradient's way back.
      return std::min((num_stages - stage - 1) * 2 + (virtual_stages - 1) * num_stages,
                      num_micro_batches * virtual_stages);
  }
  return 0;
}

double theoretical_bubble(ScheduleKind kind, int num_stages, int num_micro_batches,
                          int virtual_stages) {
  check_shape(kind, 0, num_stages, num_micro_batches, virtual_stages);
  const double fill = num_stages - 1;
  // ZB-H1: F, B and W each a third of a micro-batch's work; B's quicker way back leaves
  // (p-1) (F + B - W) of the fill and drain idle, one unit per stage boundary.
  if (kind == ScheduleKind::zb1p) return fill / (3.0 * num_micro_batches + fill);
  return fill / (static_cast<double>(virtual_stages) * num_micro_batches + fill);
}

std::vector<Instruction> make_schedule(ScheduleKind kind, int stage, int num_stages,
                                       int num_micro_batches, int virtual_stages) {
  const int warmup =
      warmup_forwards(kind, stage, num_stages, num_micro_batches, virtual_stages);  // checks
  ScheduleBuilder b(stage, num_stages, virtual_stages);
  const int m = num_micro_batches;
  switch (kind) {
    case ScheduleKind::gpipe:
      for (int mb = 0; mb < m; ++mb) b.forward(mb);
      for (int mb = 0; mb < m; ++mb) b.backward(mb);
      break;
    case ScheduleKind::one_f_one_b:
      for (int mb = 0; mb < warmup; ++mb) b.forward(mb);
      for (int i = 0; i < m - warmup; ++i) {
        b.forward(warmup + i);
        b.backward(i);
      }
      for (int mb = m - warmup; mb < m; ++mb) b.backward(mb);
      break;
    case ScheduleKind::interleaved: {
      const int total = m * virtual_stages;
      auto forward = [&](int k) {
        const ChunkStep step = interleaved_step(k, num_stages, virtual_stages, true);
        b.forward(step.micro_batch, step.chunk);
      };
      auto backward = [&](int k) {
        const ChunkStep step = interleaved_step(k, num_stages, virtual_stages, false);
        b.backward(step.micro_batch, step.chunk);
      };
      for (int k = 0; k < warmup; ++k) forward(k);
      for (int i = 0; i < total - warmup; ++i) {
        forward(warmup + i);
        backward(i);
      }
      for (int k = total - warmup; k < total; ++k) backward(k);
      break;
    }
    case ScheduleKind::zb1p: {
      const auto order = zero_bubble_h1_order(num_stages, m);
      for (const ComputeStep& op : order[static_cast<size_t>(stage)]) {
        if (op.kind == OpKind::forward) b.forward(op.micro_batch);
        if (op.kind == OpKind::backward_input) b.backward(op.micro_batch, 0, op.kind);
        if (op.kind == OpKind::backward_weight) b.weight_grads(op.micro_batch);
      }
      break;
    }
  }
  return b.finish();
}

std::vector<std::vector<Instruction>> make_all_schedules(ScheduleKind kind, int num_stages,
                                                         int num_micro_batches,
                                                         int virtual_stages) {
  check_shape(kind, 0, num_stages, num_micro_batches, virtual_stages);
  std::vector<std::vector<Instruction>> all;
  for (int s = 0; s < num_stages; ++s) {
    all.push_back(make_schedule(kind, s, num_stages, num_micro_batches, virtual_stages));
  }
  return all;
}

}  // namespace trainctl::parallel
