#include "plan/pipeline_simulate.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

namespace trainctl::parallel {
namespace {

// A message as the engine tags it: (from stage, to stage, carries gradients, micro-batch,
// receiving virtual stage).
using MessageId = std::tuple<int, int, bool, int, int>;

bool is_send(OpKind k) { return k == OpKind::send_activation || k == OpKind::send_grad; }
bool carries_grad(OpKind k) { return k == OpKind::send_grad || k == OpKind::recv_grad; }

int chunks_of(const std::vector<std::vector<Instruction>>& lists) {
  int most = 0;
  for (const auto& list : lists) {
    for (const Instruction& in : list) most = std::max(most, in.chunk);
  }
  return most + 1;
}

class Simulator {
 public:
  Simulator(const std::vector<std::vector<Instruction>>& lists, double forward_cost,
            double backward_cost)
      : lists_(lists),
        stages_(static_cast<int>(lists.size())),
        chunks_(chunks_of(lists)),
        forward_cost_(forward_cost / chunks_),
        backward_cost_(backward_cost / chunks_),
        next_(lists.size(), 0),
        clock_(lists.size(), 0.0),
        in_flight_(lists.size()),
        split_done_(lists.size()) {
    result_.stages.resize(lists.size());
    result_.virtual_stages = chunks_;
  }

  Simulation run() {
    for (;;) {
      bool progressed = false;
      for (int s = 0; s < stages_; ++s) {
        while (next_[s] < lists_[s].size() && try_execute(s)) {
          ++next_[s];
          progressed = true;
        }
      }
      if (finished()) break;
      if (!progressed) throw DeadlockError(deadlock_message());
    }
    check_all_received();
    finish_stats();
    return std::move(result_);
  }

 private:
  bool finished() const {
    for (int s = 0; s < stages_; ++s) {
      if (next_[s] < lists_[s].size()) return false;
    }
    return true;
  }

  std::string where(int stage) const {
    return "stage " + std::to_string(stage) + " instruction " + std::to_string(next_[stage]) +
           " (" + describe(lists_[stage][next_[stage]]) + ")";
  }

  // The virtual stage at the other end of `in`'s message, checked to exist and to live on
  // the named peer.
  int peer_virtual_stage(int s, const Instruction& in) const {
    const int own = in.chunk * stages_ + s;
    // Activations go up the virtual stages, gradients down.
    const bool upwards = in.kind == OpKind::send_activation || in.kind == OpKind::recv_grad;
    const int other = upwards ? own + 1 : own - 1;
    if (other < 0 || other >= stages_ * chunks_) {
      throw ScheduleError(where(s) + ": virtual stage " + std::to_string(own) +
                          " has no neighbour " + std::to_string(other) + " (virtual stages 0.." +
                          std::to_string(stages_ * chunks_ - 1) + ")");
    }
    if (other % stages_ != in.peer_stage) {
      throw ScheduleError(where(s) + ": virtual stage " + std::to_string(other) + " is on stage " +
                          std::to_string(other % stages_) + ", not on stage " +
                          std::to_string(in.peer_stage));
    }
    return other;
  }

  // Executes the stage's next instruction; false when it must wait for a message.
  bool try_execute(int s) {
    const Instruction& in = lists_[s][next_[s]];
    if (in.kind == OpKind::optimizer_step) return true;
    if (in.micro_batch < 0) throw ScheduleError(where(s) + ": negative micro-batch");
    if (in.chunk < 0) throw ScheduleError(where(s) + ": negative chunk");
    if (is_compute(in.kind)) {
      compute(s, in);
      return true;
    }
    const int peer = in.peer_stage;
    if (peer < 0 || peer >= stages_ || peer == s) {
      throw ScheduleError(where(s) + ": peer stage out of range or the stage itself");
    }
    const int other = peer_virtual_stage(s, in);
    const bool grad = carries_grad(in.kind);
    if (is_send(in.kind)) {
      const MessageId id{s, peer, grad, in.micro_batch, other};
      if (!messages_.emplace(id, clock_[s]).second) {
        throw ScheduleError(where(s) + ": sends the same message twice");
      }
      return true;
    }
    const auto it = messages_.find({peer, s, grad, in.micro_batch, in.chunk * stages_ + s});
    if (it == messages_.end()) return false;
    clock_[s] = std::max(clock_[s], it->second);
    messages_.erase(it);
    return true;
  }

  void compute(int s, const Instruction& in) {
    std::set<std::pair<int, int>>& live = in_flight_[s];
    StageTimeline& timeline = result_.stages[s];
    const bool forward = in.kind == OpKind::forward;
    const std::pair<int, int> key{in.chunk, in.micro_batch};
    if (forward && !live.insert(key).second) {
      throw ScheduleError(where(s) + ": forward of a micro-batch already in flight");
    }
    if (!forward && live.count(key) == 0) {
      throw ScheduleError(where(s) + ": backward without a preceding forward of that mb and chunk");
    }
    // B must come once, before W; a full backward needs no B.
    const bool input_done = split_done_[s].count(key) != 0;
    if ((in.kind == OpKind::backward_input || in.kind == OpKind::backward) && input_done) {
      throw ScheduleError(where(s) + ": a second backward of that mb and chunk");
    }
    if (in.kind == OpKind::backward_weight && !input_done) {
      throw ScheduleError(where(s) +
                          ": backward_weight before the backward_input of that mb "
                          "and chunk");
    }
    if (in.kind == OpKind::backward_input) split_done_[s].insert(key);
    timeline.peak_activations = std::max(timeline.peak_activations, static_cast<int>(live.size()));
    if (ends_micro_batch(in.kind)) {
      live.erase(key);
      split_done_[s].erase(key);
    }
    // B and W of the zero-bubble schedules each cost half a full backward.
    const double cost = forward                       ? forward_cost_
                        : in.kind == OpKind::backward ? backward_cost_
                                                      : backward_cost_ / 2;
    timeline.spans.push_back({in.kind, in.micro_batch, clock_[s], clock_[s] + cost, in.chunk});
    timeline.busy_time += cost;
    clock_[s] += cost;
  }

  std::string deadlock_message() const {
    std::string text = "pipeline schedule deadlocks: no stage can progress.";
    for (int s = 0; s < stages_; ++s) {
      if (next_[s] < lists_[s].size()) {
        text += " " + where(s) + " waits for a message that is never sent;";
      }
    }
    text.back() = '.';
    return text;
  }

  void check_all_received() const {
    if (messages_.empty()) return;
    const auto& [from, to, grad, mb, vstage] = messages_.begin()->first;
    throw ScheduleError("stage " + std::to_string(from) + " sends " +
                        (grad ? "send_grad" : "send_activation") + " mb " + std::to_string(mb) +
                        " for virtual stage " + std::to_string(vstage) + " to stage " +
                        std::to_string(to) + ", which never receives it");
  }

  void finish_stats() {
    double busy = 0;
    for (const StageTimeline& t : result_.stages) {
      if (!t.spans.empty()) result_.makespan = std::max(result_.makespan, t.spans.back().end);
      busy += t.busy_time;
      result_.stats.peak_activations = std::max(result_.stats.peak_activations, t.peak_activations);
    }
    const double total = result_.makespan * static_cast<double>(stages_);
    result_.stats.bubble_fraction = total > 0 ? 1.0 - busy / total : 0.0;
  }

  const std::vector<std::vector<Instruction>>& lists_;
  int stages_;
  int chunks_;
  double forward_cost_;        // per chunk
  double backward_cost_;       // per chunk
  std::vector<size_t> next_;   // per stage: index of the next instruction
  std::vector<double> clock_;  // per stage: when it is free again
  // Per stage: (chunk, micro-batch) forwarded, not yet backwarded.
  std::vector<std::set<std::pair<int, int>>> in_flight_;
  // Per stage: (chunk, micro-batch) whose backward_input ran, backward_weight not yet.
  std::vector<std::set<std::pair<int, int>>> split_done_;
  std::map<MessageId, double> messages_;  // sent, not yet received: when they were sent
  Simulation result_;
};

}  // namespace

Simulation simulate(const std::vector<std::vector<Instruction>>& lists, double forward_cost,
                    double backward_cost) {
  if (!(forward_cost > 0) || !(backward_cost > 0)) {
    throw std::invalid_argument("simulate: forward and backward costs must be positive");
  }
  return Simulator(lists, forward_cost, backward_cost).run();
}

Simulation simulate(ScheduleKind kind, int num_stages, int num_micro_batches, double forward_cost,
                    double backward_cost, int virtual_stages) {
  return simulate(make_all_schedules(kind, num_stages, num_micro_batches, virtual_stages),
                  forward_cost, backward_cost);
}

}  // namespace trainctl::parallel
