#pragma once
// Fault-tolerant data parallelism's membership (runtime.fault_tolerance; docs/fault-tolerance.md):
// the DP dimension is made of replica groups (each one replica's tp x pp x cp ranks), and
// the live replicas agree through the rendezvous store on who trains which steps.
//
// Only each replica's leader (its first rank) talks to the store; it hands the answers to
// its replica's other ranks. Three things go through the store:
//   - heartbeats: each replica's leader bumps ft/hb/<replica>/<generation> while it runs,
//     and its launcher bumps ft/dead/<replica> the moment one of its processes dies (the
//     restarted processes are generation ft/dead/<replica>);
//   - memberships (epochs): after a failure, or when a restarted replica asks to join, the
//     replicas register for the next epoch; the first to register decides it once every
//     member of the previous epoch has registered or is dead (or silent for the heartbeat
//     timeout), and publishes the members, the step the epoch starts at and who must take
//     the state of which peer (heal);
//   - each step's commit vote: a step's update is applied only if every member's gradient
//     exchange completed. One atomic counter per (epoch, step) decides it, so every member
//     commits exactly the same steps, whatever moment a peer died at.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace trainctl::launch {

// The operations the protocol needs from a key-value store, all non-blocking: the
// rendezvous store's client (ft_store.h) or an in-memory one in tests.
class QuorumStore {
 public:
  virtual ~QuorumStore() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  virtual std::optional<std::string> try_get(const std::string& key) = 0;
  // Atomically adds delta to the integer at key (absent = 0) and returns the sum.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // The value at key once it exists, waiting up to `timeout` (nullopt: still absent).
  virtual std::optional<std::string> wait_get(const std::string& key,
                                              std::chrono::milliseconds timeout) = 0;
};

// The membership fell below runtime.fault_tolerance.min_replicas, or could not be agreed
// in time: the job stops and restarts from its checkpoint as without fault tolerance.
class QuorumLost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Member {
  int replica = 0;
  int generation = 0;  // how many times this replica's processes were restarted
  int64_t step = -1;   // the next step its state would train (-1: it holds none)

  bool operator==(const Member&) const = default;
};

// One membership: the replicas that train steps start_step, start_step + 1, ... until the
// next epoch. Members are sorted by replica; a replica's rank in the epoch's gradient
// groups is its index here.
struct Epoch {
  int id = 0;
  std::vector<Member> members;
  int64_t start_step = 0;
  // The member whose state the others take before the first step (the lowest replica at
  // start_step), and the members that need it (their step differs); empty: none.
  int source = -1;
  std::vector<int> heal;

  int index_of(int replica) const;  // -1 when not a member
  // The member that writes the run's files this epoch: the lowest one that holds the
  // state already (not healing), so it remembers the steps before the epoch.
  int primary() const;
  bool has(int replica) const { return index_of(replica) >= 0; }
  std::vector<int> replicas() const;
  std::string to_json() const;
  static Epoch from_json(const std::string& text);
};

struct QuorumOptions {
  int replicas = 1;           // parallel.dp
  int min_replicas = 1;       // runtime.fault_tolerance.min_replicas
  int ranks_per_replica = 1;  // tp x pp x cp: each beats its own heartbeat
  std::chrono::milliseconds heartbeat_timeout{10000};
  std::chrono::milliseconds join_timeout{60000};
  std::chrono::milliseconds poll{2};  // how often a waiting leader reads the store
};

// Epoch `id`'s record as its decider published it (nullopt: not decided yet).
std::optional<Epoch> read_epoch(QuorumStore& store, int id);

// Keys, under the attempt's prefix.
// Each rank of a replica beats its own key (`rank`: its place in the replica), so a
// replica with one hung rank (stopped, swapped out) is silent even while the others run.
std::string heartbeat_key(int replica, int generation, int rank = 0);
std::string dead_key(int replica);

// A replica's liveness as its peers judge it: dead when its launcher counted more deaths
// than its generation, silent when the heartbeat of any of its `ranks` has not moved for
// the heartbeat timeout between two of this watcher's samples (a stall of the watcher
// itself never makes a peer silent).
class LivenessWatch {
 public:
  LivenessWatch(QuorumStore& store, std::chrono::milliseconds heartbeat_timeout, int ranks = 1);
  // True when `replica`'s incarnation `generation` is dead or silent now.
  bool gone(int replica, int generation);
  // The generation the replica's launcher runs now (its death count).
  int current_generation(int replica);

 private:
  struct Seen {
    int64_t value = -1;
    std::chrono::steady_clock::time_point since;
  };
  bool silent(int replica, int generation, int rank);

  QuorumStore& store_;
  std::chrono::milliseconds timeout_;
  int ranks_;
  std::map<std::tuple<int, int, int>, Seen> seen_;  // (replica, generation, rank)
};

class ReplicaQuorum {
 public:
  ReplicaQuorum(QuorumStore& store, int replica, int generation, QuorumOptions options);

  // Joins the next epoch holding the state of step `step` (-1: none, a restarted replica)
  // and returns the first epoch that includes this replica. Throws QuorumLost when that
  // epoch has fewer than min_replicas members, nobody in it holds state, or no epoch forms
  // in time.
  Epoch join(int64_t step);

  struct Vote {
    bool commit = false;        // every member's exchange completed: apply the update
    bool join_pending = false;  // a replica waits to join: form the next epoch after it
  };
  // The commit vote of `step` in `epoch`: `ok` is whether this replica's gradient exchange
  // (all its ranks') completed. Every member gets the same answer. Throws QuorumLost when
  // the answer cannot be learned in time.
  // `kind` names the vote, so one step can have several (a step, then a meeting).
  Vote vote(const Epoch& epoch, int64_t step, bool ok, const char* kind = "vote");

  // The newest epoch decided so far (0: none).
  int latest_epoch();

  int replica() const { return replica_; }
  int generation() const { return generation_; }

 private:
  Epoch decide(int id, const Epoch* previous);
  std::optional<Epoch> previous_epoch(int id);

  QuorumStore& store_;
  int replica_;
  int generation_;
  QuorumOptions options_;
  LivenessWatch liveness_;
};

}  // namespace trainctl::launch
