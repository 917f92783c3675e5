#pragma once
// A Communicator decorator that records every call (collectives, point-to-point, barrier)
// on a ProgressBoard, so the hang watchdog can tell where each rank is when a call stalls.
// Everything else is forwarded unchanged to the wrapped communicator.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "comm/process_groups.h"
#include "comm/progress.h"
#include "observe/trace_recorder.h"

namespace trainctl::comm {

// TEST HOOK, not a user feature: makes this rank hang just before the `call`-th call of
// `op` on a group, as if its own code were stuck before reaching the call (the board
// still shows the previous call, so peers' watchdogs report this rank as "not reached").
// Workers read it from the environment variable TEST_TRAINCTL_STALL (see
// parse_stall_hook); the launcher passes it through to workers, unlike TRAINCTL_*.
struct StallHook {
  std::string group;  // group name ("dp[0]") or kind ("dp": this rank's dp group)
  std::string op;     // "allreduce", "reduce_scatter", "allgather", "broadcast", "send",
                      // "recv", "isend", "barrier"
  int64_t call = 1;   // 1-based count of `op` calls on the group
  std::chrono::milliseconds duration{0};
  // Polled every few milliseconds while stalled: true ends the stall early (a worker
  // passes its stop_requested so the launcher's SIGTERM still ends a stalled worker).
  std::function<bool()> interrupted;

  bool matches_group(const std::string& name) const;
};

// Parses "rank=1,group=dp,op=allreduce,call=5,seconds=600" (seconds may be fractional;
// call defaults to 1). Returns nullopt when the hook names another rank than
// `world_rank`. Throws std::invalid_argument naming the bad field.
std::optional<StallHook> parse_stall_hook(std::string_view spec, int world_rank);

class WatchedCommunicator final : public Communicator {
 public:
  // `world_ranks`: the world rank of each group rank (for the watchdog's report). The
  // group is registered on `board` under inner->name(). `stall` applies only when it
  // matches this group (StallHook::matches_group).
  WatchedCommunicator(std::unique_ptr<Communicator> inner, std::shared_ptr<ProgressBoard> board,
                      std::vector<int> world_ranks, std::optional<StallHook> stall = std::nullopt);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }

  void allreduce(float* data, size_t count, ReduceOp op = ReduceOp::sum) override;
  void reduce_scatter(const float* in, float* out, size_t count) override;
  void allgather(const float* in, float* out, size_t count) override;
  void broadcast(float* data, size_t count, int root) override;
  void send(const void* data, size_t bytes, int dst, uint32_t tag) override;
  void recv(void* data, size_t bytes, int src, uint32_t tag) override;
  // The call itself is recorded as an instant; the returned request's wait() (or its
  // destructor's implicit wait) is recorded as "isend.wait" with the same number.
  std::unique_ptr<PendingSend> isend(const void* data, size_t bytes, int dst,
                                     uint32_t tag) override;
  void barrier() override;
  void alltoallv(const float* in, const size_t* send_counts, float* out,
                 const size_t* recv_counts) override;

  std::string algorithm_name(std::string_view op, size_t count) const override {
    return inner_->algorithm_name(op, count);
  }

  Communicator& inner() { return *inner_; }
  // Every call also becomes a timeline event (group, op, bytes, peer) while `trace` records.
  void set_trace(observe::TraceRecorder* trace) { trace_ = trace; }

 private:
  // Applies the stall hook if this is the call it names.
  void maybe_stall(const char* op);

  std::unique_ptr<Communicator> inner_;
  std::shared_ptr<ProgressBoard> board_;
  int group_id_;
  std::optional<StallHook> stall_;
  int64_t stall_op_calls_ = 0;  // calls of stall_->op seen so far
  observe::TraceRecorder* trace_ = nullptr;
};

// Wraps each of groups' four communicators in a WatchedCommunicator sharing one board
// (created here for groups.rank, stored in groups.progress), with member lists from the
// layout. `stall` is given to every group; it fires only on the one it matches.
void watch_process_groups(ProcessGroups& groups, const std::optional<StallHook>& stall = {});

// Hands `trace` (null: none) to each of groups' communicators that watch_process_groups
// wrapped, so that every communicator call is on the profiled steps' timeline.
void trace_process_groups(ProcessGroups& groups, observe::TraceRecorder* trace);

}  // namespace trainctl::comm
