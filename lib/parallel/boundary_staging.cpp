#include "parallel/boundary_staging.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

namespace trainctl::parallel {

int grad_staging_buffers(const std::vector<Instruction>& program) {
  int n = 0;
  for (size_t i = 0; i < program.size(); ++i) {
    const Instruction& ins = program[i];
    n += ins.kind == OpKind::send_grad ? 1 : 0;
    // A chunk > 0 is never the first virtual stage: a backward of it with no send_grad
    // after it hands its input gradient to this stage's other chunk (zbv's turn).
    const bool sent = i + 1 < program.size() && program[i + 1].kind == OpKind::send_grad;
    n += is_input_backward(ins.kind) && ins.chunk > 0 && !sent ? 1 : 0;
  }
  return n;
}

int activation_staging_buffers(const std::vector<Instruction>& program) {
  int chunks = 1;
  for (const Instruction& i : program) chunks = std::max(chunks, i.chunk + 1);
  int n = 0;
  for (size_t i = 0; i < program.size(); ++i) {
    const Instruction& ins = program[i];
    n += ins.kind == OpKind::send_activation ? 1 : 0;
    // The last virtual stage is always in the last chunk: a forward of an earlier chunk
    // with no send_activation after it hands its output to this stage's next chunk.
    const bool sent = i + 1 < program.size() && program[i + 1].kind == OpKind::send_activation;
    n += ins.kind == OpKind::forward && ins.chunk + 1 < chunks && !sent ? 1 : 0;
  }
  return n;
}

namespace {

// A send as its sender tracks it: complete once stage `to` has reached instruction `recv`.
struct PendingSend {
  int to;
  size_t recv;
};

// One staging pool of a stage, as the simulation tracks it.
struct Pool {
  int free = 0;                   // buffers neither sent from nor holding a hand-over
  std::deque<PendingSend> sends;  // in flight, oldest first
};

// Every stage's list run together, one instruction at a time, under the pool rule of
// boundary_staging.h.
class PoolRun {
 public:
  PoolRun(const std::vector<std::vector<Instruction>>& lists, model::ChunkOrder order, int pool)
      : lists_(lists), order_(order), stages_(static_cast<int>(lists.size())) {
    for (const auto& list : lists) {
      for (const Instruction& i : list) {
        chunks_ = std::max(chunks_, i.chunk + 1);
        micro_batches_ = std::max(micro_batches_, i.micro_batch + 1);
      }
    }
    state_.resize(lists.size());
    recv_at_.resize(lists.size());
    for (int s = 0; s < stages_; ++s) {
      state_[static_cast<size_t>(s)].activations.free = pool;
      state_[static_cast<size_t>(s)].grads.free = pool;
      const auto& list = lists[static_cast<size_t>(s)];
      for (size_t i = 0; i < list.size(); ++i) {
        const Instruction& ins = list[i];
        if (ins.kind != OpKind::recv_activation && ins.kind != OpKind::recv_grad) continue;
        const bool grad = ins.kind == OpKind::recv_grad;
        recv_at_[static_cast<size_t>(s)][key(s, grad, ins.micro_batch, vstage(s, ins.chunk))] = i;
      }
    }
  }

  bool finishes() {
    for (bool progress = true; progress;) {
      progress = false;
      for (int s = 0; s < stages_; ++s) {
        while (advance(s)) progress = true;
      }
    }
    return std::all_of(state_.begin(), state_.end(), [](const Stage& st) { return st.done; });
  }

 private:
  struct Stage {
    size_t pc = 0;
    int phase = 0;  // how far the instruction at pc got before it had to wait
    Pool activations, grads;
    bool done = false;
  };

  int vstage(int stage, int chunk) const {
    return model::virtual_stage_of(order_, chunk, stage, stages_);
  }
  bool local(int stage, int v) const {
    if (v < 0 || v >= chunks_ * stages_) return false;
    return model::place_of_virtual_stage(order_, v, stages_).rank == stage;
  }
  int64_t key(int receiver, bool grad, int micro_batch, int receiving_vstage) const {
    return ((int64_t{receiver} * 2 + (grad ? 1 : 0)) * chunks_ * stages_ + receiving_vstage) *
               micro_batches_ +
           micro_batch;
  }
  bool complete(const PendingSend& p) const {
    return state_[static_cast<size_t>(p.to)].pc >= p.recv;
  }
  bool all_complete(const Pool& pool) const {
    return std::all_of(pool.sends.begin(), pool.sends.end(),
                       [this](const PendingSend& p) { return complete(p); });
  }
  // A staging buffer: a free one, or the oldest send's once it has completed.
  bool acquire(Pool& pool) const {
    if (pool.free > 0) {
      --pool.free;
      return true;
    }
    if (pool.sends.empty() || !complete(pool.sends.front())) return false;
    pool.sends.pop_front();
    return true;
  }

  // Posts the message of `ins` (on stage s) for its receiver.
  PendingSend post(int s, const Instruction& ins, bool grad) {
    const int v = vstage(s, ins.chunk) + (grad ? -1 : 1);
    const int64_t k = key(ins.peer_stage, grad, ins.micro_batch, v);
    const auto& at = recv_at_.at(static_cast<size_t>(ins.peer_stage));
    auto it = at.find(k);
    if (it == at.end()) throw std::logic_error("pipeline: " + describe(ins) + " is never received");
    sent_.insert(k);
    return {ins.peer_stage, it->second};
  }

  // A forward or input backward: it reads the message its other chunk handed over (phase 0),
  // then stages what it hands on (phase 1): a forward its output, unless it is the last
  // virtual stage; a backward its input gradient where the other chunk takes it (a sent one
  // is staged by the send_grad after it).
  bool compute(Stage& st, int s, const Instruction& ins) {
    const bool forward = ins.kind == OpKind::forward;
    const int v = vstage(s, ins.chunk);
    Pool& pool = forward ? st.activations : st.grads;
    if (st.phase == 0) {
      if (local(s, forward ? v - 1 : v + 1)) ++pool.free;
      st.phase = 1;
    }
    const bool stages = forward ? v + 1 < chunks_ * stages_ : local(s, v - 1);
    if (stages && !acquire(pool)) return false;
    st.phase = 0;
    return true;
  }

  bool advance(int s) {
    Stage& st = state_[static_cast<size_t>(s)];
    if (st.done) return false;
    const auto& list = lists_[static_cast<size_t>(s)];
    if (st.pc == list.size()) {  // the end of the step waits for every send
      if (!all_complete(st.activations) || !all_complete(st.grads)) return false;
      st.done = true;
      return true;
    }
    const Instruction& ins = list[st.pc];
    switch (ins.kind) {
      case OpKind::recv_activation:
      case OpKind::recv_grad: {
        const bool grad = ins.kind == OpKind::recv_grad;
        if (sent_.count(key(s, grad, ins.micro_batch, vstage(s, ins.chunk))) == 0) return false;
        break;
      }
      case OpKind::send_activation:  // from the buffer its forward staged
        st.activations.sends.push_back(post(s, ins, false));
        break;
      case OpKind::send_grad:
        if (!acquire(st.grads)) return false;
        st.grads.sends.push_back(post(s, ins, true));
        break;
      case OpKind::forward:
      case OpKind::backward:
      case OpKind::backward_input:
        if (!compute(st, s, ins)) return false;
        break;
      case OpKind::backward_weight:
      case OpKind::optimizer_step:
        break;
    }
    ++st.pc;
    return true;
  }

  const std::vector<std::vector<Instruction>>& lists_;
  model::ChunkOrder order_;
  int stages_;
  int chunks_ = 1, micro_batches_ = 1;
  std::vector<Stage> state_;
  std::vector<std::unordered_map<int64_t, size_t>> recv_at_;  // per stage: key -> index
  std::unordered_set<int64_t> sent_;
};

}  // namespace

bool finishes_with_pool(const std::vector<std::vector<Instruction>>& lists, model::ChunkOrder order,
                        int pool) {
  return PoolRun(lists, order, pool).finishes();
}

int boundary_staging_pool(ScheduleKind kind, int num_stages, int num_micro_batches,
                          int virtual_stages) {
  if (num_stages <= 1) return 0;
  const auto lists = make_all_schedules(kind, num_stages, num_micro_batches, virtual_stages);
  int upper = 1;
  for (const auto& list : lists) {
    upper = std::max({upper, grad_staging_buffers(list), activation_staging_buffers(list)});
  }
  // More buffers never add a wait, so the fewest that finish are found by bisection.
  int lo = 1, hi = upper;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (finishes_with_pool(lists, chunk_order(kind), mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return std::min(lo + 1, upper);
}

}  // namespace trainctl::parallel
