#include "parallel/pipeline_schedule.h"

#include <algorithm>
#include <stdexcept>

#include "util/error.h"

namespace trainctl::parallel {
namespace {

// Appends one stage's instructions with the send/recv that surround each compute op.
class ScheduleBuilder {
 public:
  ScheduleBuilder(int stage, int num_stages) : stage_(stage), last_(num_stages - 1) {}

  void forward(int mb) {
    if (stage_ > 0) list_.push_back({OpKind::recv_activation, mb, stage_ - 1});
    list_.push_back({OpKind::forward, mb, -1});
    if (stage_ < last_) list_.push_back({OpKind::send_activation, mb, stage_ + 1});
  }

  void backward(int mb) {
    if (stage_ < last_) list_.push_back({OpKind::recv_grad, mb, stage_ + 1});
    list_.push_back({OpKind::backward, mb, -1});
    if (stage_ > 0) list_.push_back({OpKind::send_grad, mb, stage_ - 1});
  }

  std::vector<Instruction> finish() {
    list_.push_back({OpKind::optimizer_step, -1, -1});
    return std::move(list_);
  }

 private:
  int stage_;
  int last_;
  std::vector<Instruction> list_;
};

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
  }
  return "?";
}

bool is_compute(OpKind kind) { return kind == OpKind::forward || kind == OpKind::backward; }

std::string describe(const Instruction& in) {
  std::string text = to_string(in.kind);
  if (in.kind == OpKind::optimizer_step) return text;
  text += " mb " + std::to_string(in.micro_batch);
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
  }
  return "?";
}

ScheduleKind parse_schedule_kind(std::string_view name) {
  if (name == "gpipe") return ScheduleKind::gpipe;
  if (name == "1f1b") return ScheduleKind::one_f_one_b;
  throw InputError("unknown pipeline schedule '" + std::string(name) + "'; use gpipe or 1f1b");
}

std::vector<Instruction> make_schedule(ScheduleKind kind, int stage, int num_stages,
                                       int num_micro_batches) {
  if (num_stages < 1 || stage < 0 || stage >= num_stages || num_micro_batches < 1) {
    throw std::invalid_argument(
        "make_schedule: need num_stages >= 1, 0 <= stage < num_stages and "
        "num_micro_batches >= 1; got stage " +
        std::to_string(stage) + " of " + std::to_string(num_stages) + ", " +
        std::to_string(num_micro_batches) + " micro-batches");
  }
  ScheduleBuilder b(stage, num_stages);
  const int m = num_micro_batches;
  switch (kind) {
    case ScheduleKind::gpipe:
      for (int mb = 0; mb < m; ++mb) b.forward(mb);
      for (int mb = 0; mb < m; ++mb) b.backward(mb);
      break;
    case ScheduleKind::one_f_one_b: {
      // Later stages need fewer forwards in flight before the first gradient comes back.
      const int warmup = std::min(num_stages - stage - 1, m);
      for (int mb = 0; mb < warmup; ++mb) b.forward(mb);
      for (int i = 0; i < m - warmup; ++i) {
        b.forward(warmup + i);
        b.backward(i);
      }
      for (int mb = m - warmup; mb < m; ++mb) b.backward(mb);
      break;
    }
  }
  return b.finish();
}

std::vector<std::vector<Instruction>> make_all_schedules(ScheduleKind kind, int num_stages,
                                                         int num_micro_batches) {
  if (num_stages < 1) {
    throw std::invalid_argument("make_all_schedules: need num_stages >= 1; got " +
                                std::to_string(num_stages));
  }
  std::vector<std::vector<Instruction>> all;
  for (int s = 0; s < num_stages; ++s) {
    all.push_back(make_schedule(kind, s, num_stages, num_micro_batches));
  }
  return all;
}

}  // namespace trainctl::parallel
