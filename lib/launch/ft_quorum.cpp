#include "launch/ft_quorum.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <thread>

namespace trainctl::launch {
namespace {

using Clock = std::chrono::steady_clock;

// The commit vote's counter: each member adds kOk (plus kJoinFlag when it saw a replica
// waiting to join); a member whose exchange failed, or that gave up waiting, adds kAbort.
// Up to 1023 members and flags fit below the next field.
constexpr int64_t kOk = 1;
constexpr int64_t kJoinFlag = int64_t{1} << 10;
constexpr int64_t kAbort = int64_t{1} << 20;

std::string epoch_prefix(int id) { return "ft/e" + std::to_string(id) + "/"; }
std::string record_key(int id) { return epoch_prefix(id) + "record"; }
std::string tickets_key(int id) { return epoch_prefix(id) + "tickets"; }
std::string candidate_key(int id, int replica) {
  return epoch_prefix(id) + "cand/" + std::to_string(replica);
}
constexpr const char* kLatestKey = "ft/latest";

nlohmann::json member_json(const Member& m) {
  return {{"replica", m.replica}, {"generation", m.generation}, {"step", m.step}};
}
Member member_of(const nlohmann::json& j) {
  return {j.at("replica").get<int>(), j.at("generation").get<int>(), j.at("step").get<int64_t>()};
}

int64_t oks_in(int64_t sum) { return sum % kJoinFlag; }
bool flags_in(int64_t sum) { return (sum % kAbort) / kJoinFlag > 0; }

}  // namespace

std::string heartbeat_key(int replica, int generation, int rank) {
  return "ft/hb/" + std::to_string(replica) + "/" + std::to_string(generation) + "/" +
         std::to_string(rank);
}
std::string dead_key(int replica) { return "ft/dead/" + std::to_string(replica); }

int Epoch::index_of(int replica) const {
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].replica == replica) return static_cast<int>(i);
  }
  return -1;
}

int Epoch::primary() const {
  for (const Member& m : members) {
    if (std::find(heal.begin(), heal.end(), m.replica) == heal.end()) return m.replica;
  }
  return -1;
}

std::optional<Epoch> read_epoch(QuorumStore& store, int id) {
  const auto text = store.try_get(record_key(id));
  if (!text) return std::nullopt;
  return Epoch::from_json(*text);
}

std::vector<int> Epoch::replicas() const {
  std::vector<int> out;
  for (const Member& m : members) out.push_back(m.replica);
  return out;
}

std::string Epoch::to_json() const {
  nlohmann::json j;
  j["epoch"] = id;
  j["start_step"] = start_step;
  j["members"] = nlohmann::json::array();
  for (const Member& m : members) j["members"].push_back(member_json(m));
  j["source"] = source;
  j["heal"] = heal;
  return j.dump();
}

Epoch Epoch::from_json(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  Epoch e;
  e.id = j.at("epoch").get<int>();
  e.start_step = j.at("start_step").get<int64_t>();
  for (const auto& m : j.at("members")) e.members.push_back(member_of(m));
  e.source = j.at("source").get<int>();
  e.heal = j.at("heal").get<std::vector<int>>();
  return e;
}

LivenessWatch::LivenessWatch(QuorumStore& store, std::chrono::milliseconds heartbeat_timeout,
                             int ranks)
    : store_(store), timeout_(heartbeat_timeout), ranks_(ranks) {}

int LivenessWatch::current_generation(int replica) {
  return static_cast<int>(store_.add(dead_key(replica), 0));
}

bool LivenessWatch::gone(int replica, int generation) {
  if (current_generation(replica) > generation) return true;
  for (int rank = 0; rank < ranks_; ++rank) {
    if (silent(replica, generation, rank)) return true;
  }
  return false;
}

bool LivenessWatch::silent(int replica, int generation, int rank) {
  const int64_t value = store_.add(heartbeat_key(replica, generation, rank), 0);
  const auto now = Clock::now();
  const auto [it, first] = seen_.try_emplace({replica, generation, rank}, Seen{value, now});
  if (first || it->second.value != value) {
    it->second = Seen{value, now};
    return false;
  }
  return now - it->second.since >= timeout_;
}

ReplicaQuorum::ReplicaQuorum(QuorumStore& store, int replica, int generation, QuorumOptions options)
    : store_(store),
      replica_(replica),
      generation_(generation),
      options_(options),
      liveness_(store, options.heartbeat_timeout, options.ranks_per_replica) {}

int ReplicaQuorum::latest_epoch() { return static_cast<int>(store_.add(kLatestKey, 0)); }

std::optional<Epoch> ReplicaQuorum::previous_epoch(int id) {
  if (id <= 1) return std::nullopt;
  return read_epoch(store_, id - 1);
}

// The first replica to register for epoch `id` decides it: it waits until every member of
// the previous epoch (every replica, for the first epoch) has registered or is gone, or
// the join timeout, then publishes the replicas registered by then.
Epoch ReplicaQuorum::decide(int id, const Epoch* previous) {
  std::vector<Member> expected;
  if (previous) {
    expected = previous->members;
  } else {
    for (int r = 0; r < options_.replicas; ++r) {
      expected.push_back({r, liveness_.current_generation(r), -1});
    }
  }
  const auto deadline = Clock::now() + options_.join_timeout;
  std::vector<Member> registered;
  for (;;) {
    registered.clear();
    for (int r = 0; r < options_.replicas; ++r) {
      if (auto text = store_.try_get(candidate_key(id, r))) {
        registered.push_back(member_of(nlohmann::json::parse(*text)));
      }
    }
    bool waiting = false;
    for (const Member& m : expected) {
      const bool in = std::any_of(registered.begin(), registered.end(),
                                  [&](const Member& x) { return x.replica == m.replica; });
      if (!in && !liveness_.gone(m.replica, m.generation)) waiting = true;
    }
    if (!waiting || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(options_.poll);
  }
  Epoch e;
  e.id = id;
  e.members = registered;  // in replica order: the keys were read in that order
  e.start_step = -1;
  for (const Member& m : registered) e.start_step = std::max(e.start_step, m.step);
  for (const Member& m : registered) {
    if (m.step == e.start_step && e.source < 0) e.source = m.replica;
  }
  for (const Member& m : registered) {
    if (m.step != e.start_step) e.heal.push_back(m.replica);
  }
  if (e.heal.empty()) e.source = -1;
  store_.set(record_key(id), e.to_json());
  store_.add(kLatestKey, 1);
  return e;
}

Epoch ReplicaQuorum::join(int64_t step) {
  const Member me{replica_, generation_, step};
  const auto limit = options_.join_timeout + options_.heartbeat_timeout * 2;
  int id = latest_epoch() + 1;
  for (;;) {
    store_.set(candidate_key(id, replica_), member_json(me).dump());
    Epoch e;
    if (store_.add(tickets_key(id), 1) == 1) {
      const std::optional<Epoch> previous = previous_epoch(id);
      e = decide(id, previous ? &*previous : nullptr);
    } else {
      const std::optional<std::string> text = store_.wait_get(record_key(id), limit);
      if (!text) {
        throw QuorumLost("no membership formed for epoch " + std::to_string(id) + " within " +
                         std::to_string(limit.count() / 1000) +
                         " s (the replica deciding it is gone?)");
      }
      e = Epoch::from_json(*text);
    }
    if (!e.has(replica_)) {
      id = std::max(id + 1, latest_epoch() + 1);  // registered too late: the next one
      continue;
    }
    if (static_cast<int>(e.members.size()) < options_.min_replicas) {
      throw QuorumLost("only " + std::to_string(e.members.size()) + " replica(s) live in epoch " +
                       std::to_string(e.id) + ", below runtime.fault_tolerance.min_replicas " +
                       std::to_string(options_.min_replicas));
    }
    if (e.start_step < 0) {
      throw QuorumLost("no live replica of epoch " + std::to_string(e.id) +
                       " holds the training state");
    }
    return e;
  }
}

ReplicaQuorum::Vote ReplicaQuorum::vote(const Epoch& epoch, int64_t step, bool ok,
                                        const char* kind) {
  const std::string key = epoch_prefix(epoch.id) + kind + "/" + std::to_string(step);
  // The outcome, written by whoever learns it first: the member whose ok completed the
  // count, or the first to abort. The others wait for it (the store answers at once).
  const std::string end_key = key + "/end";
  const auto n = static_cast<int64_t>(epoch.members.size());
  auto publish = [&](Vote v) {
    store_.set(end_key, std::string(v.commit ? "1" : "0") + (v.join_pending ? "1" : "0"));
    return v;
  };
  auto learn = [&]() -> Vote {
    const std::optional<std::string> text = store_.wait_get(end_key, options_.join_timeout);
    if (!text) {
      throw QuorumLost("the commit vote of step " + std::to_string(step + 1) +
                       " has no outcome (the member that aborted it is gone)");
    }
    return {text->size() > 0 && (*text)[0] == '1', text->size() > 1 && (*text)[1] == '1'};
  };
  // The first member to abort decides from what the counter held before its abort: the
  // vote committed if every member had voted ok by then.
  auto after_abort = [&](int64_t sum, bool mine) -> Vote {
    if (mine && sum < 2 * kAbort) {
      const int64_t before = sum - kAbort;
      return publish({oks_in(before) == n, flags_in(before)});
    }
    return learn();
  };
  if (!ok) return after_abort(store_.add(key, kAbort), true);
  const bool pending = store_.add(tickets_key(epoch.id + 1), 0) > 0;
  const int64_t sum = store_.add(key, kOk + (pending ? kJoinFlag : 0));
  if (sum >= kAbort) return after_abort(sum, false);
  if (oks_in(sum) == n) return publish({true, flags_in(sum)});
  // Wait for the outcome in slices; between them, a member that is gone aborts the vote.
  const auto deadline = Clock::now() + options_.join_timeout;
  constexpr std::chrono::milliseconds kSlice{50};
  for (;;) {
    if (const std::optional<std::string> text = store_.wait_get(end_key, kSlice)) {
      return {(*text)[0] == '1', text->size() > 1 && (*text)[1] == '1'};
    }
    bool peer_gone = Clock::now() >= deadline;
    for (const Member& m : epoch.members) {
      if (m.replica != replica_ && liveness_.gone(m.replica, m.generation)) peer_gone = true;
    }
    if (peer_gone) return after_abort(store_.add(key, kAbort), true);
  }
}

}  // namespace trainctl::launch
