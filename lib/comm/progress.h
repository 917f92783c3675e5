#pragma once
// Where this worker is: the training step, and for each of its process groups the
// communicator call in flight (or the last one that finished). WatchedCommunicator
// records every call here; the hang watchdog (launch/watchdog.h) publishes snapshots to
// the rendezvous store and, when a call runs longer than runtime.comm_timeout_s, compares
// every rank's snapshot to say which ranks reached the stuck call and where the others are.
//
// Cheap enough for every collective: a begin/end pair is an uncontended mutex and a clock
// read, no allocation, no I/O.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainctl::comm {

// One communicator call as the board saw it.
struct CallRecord {
  std::string op;      // "allreduce", "send", "isend.wait", ...
  int64_t seq = 0;     // collectives: the group's collective number (1, 2, ...), the same on
                       // every rank; point-to-point: this rank's own count on the group
  size_t bytes = 0;    // payload of this rank's buffer
  int peer = -1;       // point-to-point: the peer's group rank; -1 for collectives
  double seconds = 0;  // in flight: running for this long; finished: ended this long ago
};

struct GroupProgress {
  std::string name;          // "dp[0]"
  std::vector<int> members;  // world ranks, indexed by group rank
  int64_t collectives = 0;   // collective calls this rank has entered on the group
  int64_t p2p = 0;           // point-to-point calls (send, recv, isend) entered
  std::optional<CallRecord> in_flight;
  std::optional<CallRecord> last_done;

  // Whether `r` is a collective (a call every member makes).
  static bool is_collective(const CallRecord& r) { return r.peer < 0; }
};

struct ProgressSnapshot {
  int rank = -1;            // world rank
  int64_t step = -1;        // training step; -1 before the engine sets one (self-test, setup)
  std::string phase;        // engine phase ("forward", "checkpoint", ...); may be empty
  int64_t taken_at_ms = 0;  // system clock, ms since the epoch (comparable across nodes)
  // How many changes the board had recorded when this was taken (not encoded): two
  // snapshots with the same count differ only in their times.
  uint64_t changes = 0;
  std::vector<GroupProgress> groups;

  const GroupProgress* group(std::string_view name) const;
  // The group whose in-flight call has run longest; nullptr when no call is in flight.
  const GroupProgress* longest_in_flight() const;
  // The same snapshot as seen at `now_ms`: in-flight and since-finished times grow by the
  // time that passed since it was taken (for snapshots read back from the store).
  ProgressSnapshot aged_to(int64_t now_ms) const;

  // One line for logs, e.g. "step 12: allreduce #431 on dp[0] (4096 B), waiting 31.2 s"
  // or "step 12 (forward): idle since allreduce #430 on dp[0] 31.0 s ago".
  std::string describe() const;

  // A compact text form for the rendezvous store; decode(encode()) round-trips.
  std::string encode() const;
  // Throws std::invalid_argument for text that encode() did not produce.
  static ProgressSnapshot decode(std::string_view text);
};

// "allreduce #431 on dp[0] (4096 B)" or "recv #7 from group rank 1 on pp[0] (1024 B)".
std::string describe_call(const CallRecord& call, const std::string& group);

// Thread-safe record of one worker's progress. Groups are registered once when the
// communicators are wrapped; after that, several threads (the engine, a gradient
// communication thread) record calls on different groups concurrently, and the
// watchdog thread takes snapshots.
class ProgressBoard {
 public:
  explicit ProgressBoard(int world_rank);
  ProgressBoard(const ProgressBoard&) = delete;
  ProgressBoard& operator=(const ProgressBoard&) = delete;

  int rank() const { return rank_; }

  // For the engine: the step being run (shown in timeout reports) and what it is doing.
  void set_step(int64_t step);
  void set_phase(std::string_view phase);

  // Registers a group (name, world ranks by group rank); returns its id for the calls
  // below.
  int add_group(std::string name, std::vector<int> members);

  // A call starts on group `group`. `op` must be a string literal (kept by pointer).
  // Collectives return the group's collective number; point-to-point calls this rank's
  // point-to-point number. begin_wait resumes an earlier isend (same number).
  int64_t begin_collective(int group, const char* op, size_t bytes);
  int64_t begin_p2p(int group, const char* op, size_t bytes, int peer);
  void begin_wait(int group, const char* op, size_t bytes, int peer, int64_t seq);
  // The call in flight on `group` returned (or threw).
  void end(int group);

  ProgressSnapshot snapshot() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Call {
    const char* op = nullptr;
    int64_t seq = 0;
    size_t bytes = 0;
    int peer = -1;
    Clock::time_point at;  // start when in flight, end when done
  };
  struct Group {
    std::string name;
    std::vector<int> members;
    int64_t collectives = 0;
    int64_t p2p = 0;
    bool busy = false;
    bool done_any = false;
    Call current;
    Call last;
  };
  Group& at(int group);
  void start(Group& g, const char* op, int64_t seq, size_t bytes, int peer);

  const int rank_;
  mutable std::mutex mu_;
  uint64_t changes_ = 0;
  int64_t step_ = -1;
  std::string phase_;
  std::vector<Group> groups_;
};

}  // namespace trainctl::comm
