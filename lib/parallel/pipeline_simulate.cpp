#include "parallel/pipeline_simulate.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <tuple>

namespace trainctl::parallel {
namespace {

struct Message {
  int micro_batch;
  double sent_at;
};

// (from stage, to stage, carries gradients): messages in flight, oldest first. Receives take
// them in order, as point-to-point messages between two ranks are delivered.
using Channel = std::tuple<int, int, bool>;

bool is_send(OpKind k) { return k == OpKind::send_activation || k == OpKind::send_grad; }
bool carries_grad(OpKind k) { return k == OpKind::send_grad || k == OpKind::recv_grad; }

class Simulator {
 public:
  Simulator(const std::vector<std::vector<Instruction>>& lists, double forward_cost,
            double backward_cost)
      : lists_(lists),
        forward_cost_(forward_cost),
        backward_cost_(backward_cost),
        next_(lists.size(), 0),
        clock_(lists.size(), 0.0),
        in_flight_(lists.size()) {
    result_.stages.resize(lists.size());
  }

  Simulation run() {
    for (;;) {
      bool progressed = false;
      for (size_t s = 0; s < lists_.size(); ++s) {
        while (next_[s] < lists_[s].size() && try_execute(static_cast<int>(s))) {
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
    for (size_t s = 0; s < lists_.size(); ++s) {
      if (next_[s] < lists_[s].size()) return false;
    }
    return true;
  }

  std::string where(int stage) const {
    return "stage " + std::to_string(stage) + " instruction " + std::to_string(next_[stage]) +
           " (" + describe(lists_[stage][next_[stage]]) + ")";
  }

  // Executes the stage's next instruction; false when it must wait for a message.
  bool try_execute(int s) {
    const Instruction& in = lists_[s][next_[s]];
    if (in.kind == OpKind::optimizer_step) return true;
    if (in.micro_batch < 0) throw ScheduleError(where(s) + ": negative micro-batch");
    if (is_compute(in.kind)) {
      compute(s, in);
      return true;
    }
    const int peer = in.peer_stage;
    if (peer < 0 || peer >= static_cast<int>(lists_.size()) || peer == s) {
      throw ScheduleError(where(s) + ": peer stage out of range or the stage itself");
    }
    const bool grad = carries_grad(in.kind);
    if (is_send(in.kind)) {
      channels_[{s, peer, grad}].push_back({in.micro_batch, clock_[s]});
      return true;
    }
    std::deque<Message>& queue = channels_[{peer, s, grad}];
    if (queue.empty()) return false;
    const Message msg = queue.front();
    if (msg.micro_batch != in.micro_batch) {
      throw ScheduleError(where(s) + ": the next message stage " + std::to_string(peer) +
                          " sent on this channel is of mb " + std::to_string(msg.micro_batch) +
                          " (sends and receives must come in the same order)");
    }
    queue.pop_front();
    clock_[s] = std::max(clock_[s], msg.sent_at);
    return true;
  }

  void compute(int s, const Instruction& in) {
    std::set<int>& live = in_flight_[s];
    StageTimeline& timeline = result_.stages[s];
    const bool forward = in.kind == OpKind::forward;
    if (forward && !live.insert(in.micro_batch).second) {
      throw ScheduleError(where(s) + ": forward of a micro-batch already in flight");
    }
    if (!forward && live.erase(in.micro_batch) == 0) {
      throw ScheduleError(where(s) + ": backward without a preceding forward of that mb");
    }
    timeline.peak_activations = std::max(timeline.peak_activations, static_cast<int>(live.size()));
    const double cost = forward ? forward_cost_ : backward_cost_;
    timeline.spans.push_back({in.kind, in.micro_batch, clock_[s], clock_[s] + cost});
    timeline.busy_time += cost;
    clock_[s] += cost;
  }

  std::string deadlock_message() const {
    std::string text = "pipeline schedule deadlocks: no stage can progress.";
    for (size_t s = 0; s < lists_.size(); ++s) {
      if (next_[s] < lists_[s].size()) {
        text += " " + where(static_cast<int>(s)) + " waits for a message that is never sent;";
      }
    }
    text.back() = '.';
    return text;
  }

  void check_all_received() const {
    for (const auto& [channel, queue] : channels_) {
      if (queue.empty()) continue;
      const auto& [from, to, grad] = channel;
      throw ScheduleError("stage " + std::to_string(from) + " sends " +
                          (grad ? "send_grad" : "send_activation") + " mb " +
                          std::to_string(queue.front().micro_batch) + " to stage " +
                          std::to_string(to) + ", which never receives it");
    }
  }

  void finish_stats() {
    double busy = 0;
    for (const StageTimeline& t : result_.stages) {
      if (!t.spans.empty()) result_.makespan = std::max(result_.makespan, t.spans.back().end);
      busy += t.busy_time;
      result_.stats.peak_activations = std::max(result_.stats.peak_activations, t.peak_activations);
    }
    const double total = result_.makespan * static_cast<double>(lists_.size());
    result_.stats.bubble_fraction = total > 0 ? 1.0 - busy / total : 0.0;
  }

  const std::vector<std::vector<Instruction>>& lists_;
  double forward_cost_;
  double backward_cost_;
  std::vector<size_t> next_;              // per stage: index of the next instruction
  std::vector<double> clock_;             // per stage: when it is free again
  std::vector<std::set<int>> in_flight_;  // per stage: forwarded, not yet backwarded
  std::map<Channel, std::deque<Message>> channels_;
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
                    double backward_cost) {
  return simulate(make_all_schedules(kind, num_stages, num_micro_batches), forward_cost,
                  backward_cost);
}

}  // namespace trainctl::parallel
