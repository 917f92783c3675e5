// Fault-tolerant DP's membership protocol (launch/ft_quorum.h) with replicas as threads
// over an in-memory store: epochs form from the registered replicas, a dead replica is
// left out, a restarted one joins and is told whom to heal from, and every member of an
// epoch learns the same outcome of each step's commit vote, whenever a peer dies.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "launch/ft_quorum.h"
#include "launch/ft_store.h"

using namespace trainctl::launch;
using namespace std::chrono_literals;

namespace {

struct MemoryData {
  std::mutex mu;
  std::map<std::string, std::string> values;
  std::map<std::string, int64_t> counters;
  std::condition_variable set_cv;
};

class MemoryStore final : public QuorumStore {
 public:
  explicit MemoryStore(std::shared_ptr<MemoryData> data) : data_(std::move(data)) {}
  void set(const std::string& key, const std::string& value) override {
    {
      std::lock_guard<std::mutex> lock(data_->mu);
      data_->values[key] = value;
    }
    data_->set_cv.notify_all();
  }
  std::optional<std::string> try_get(const std::string& key) override {
    std::lock_guard<std::mutex> lock(data_->mu);
    auto it = data_->values.find(key);
    if (it == data_->values.end()) return std::nullopt;
    return it->second;
  }
  int64_t add(const std::string& key, int64_t delta) override {
    std::lock_guard<std::mutex> lock(data_->mu);
    return data_->counters[key] += delta;
  }
  std::optional<std::string> wait_get(const std::string& key,
                                      std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(data_->mu);
    data_->set_cv.wait_for(lock, timeout, [&] { return data_->values.count(key) > 0; });
    auto it = data_->values.find(key);
    if (it == data_->values.end()) return std::nullopt;
    return it->second;
  }

 private:
  std::shared_ptr<MemoryData> data_;
};

QuorumOptions options(int replicas, int min_replicas = 1) {
  QuorumOptions o;
  o.replicas = replicas;
  o.min_replicas = min_replicas;
  o.heartbeat_timeout = 1500ms;
  o.join_timeout = 5000ms;
  return o;
}

// One replica's leader: its heartbeat and its side of the protocol.
struct Replica {
  Replica(std::shared_ptr<MemoryData> data, int replica, int generation, QuorumOptions o)
      : store(data),
        beat(std::make_unique<MemoryStore>(data), replica, generation, 0, 50ms),
        quorum(store, replica, generation, o) {}
  MemoryStore store;
  ReplicaHeartbeat beat;
  ReplicaQuorum quorum;
};

std::vector<Epoch> join_all(std::vector<std::unique_ptr<Replica>>& rs, int64_t step) {
  std::vector<std::future<Epoch>> fs;
  for (auto& r : rs)
    fs.push_back(std::async(std::launch::async, [&r, step] { return r->quorum.join(step); }));
  std::vector<Epoch> out;
  for (auto& f : fs) out.push_back(f.get());
  return out;
}

std::vector<int> ints(std::initializer_list<int> v) { return v; }

}  // namespace

TEST_CASE("ft quorum: the first epoch holds every replica, at their step, with nobody to heal",
          "[timing]") {
  auto data = std::make_shared<MemoryData>();
  std::vector<std::unique_ptr<Replica>> rs;
  for (int r = 0; r < 3; ++r) rs.push_back(std::make_unique<Replica>(data, r, 0, options(3)));
  const std::vector<Epoch> es = join_all(rs, 7);
  for (const Epoch& e : es) {
    CHECK(e.id == 1);
    CHECK(e.replicas() == ints({0, 1, 2}));
    CHECK(e.start_step == 7);
    CHECK(e.heal.empty());
    CHECK(e.source == -1);
    CHECK(e.to_json() == es[0].to_json());
  }
  CHECK(Epoch::from_json(es[0].to_json()).to_json() == es[0].to_json());
}

TEST_CASE("ft quorum: commit votes agree, one failed exchange aborts the step everywhere",
          "[timing]") {
  auto data = std::make_shared<MemoryData>();
  std::vector<std::unique_ptr<Replica>> rs;
  for (int r = 0; r < 3; ++r) rs.push_back(std::make_unique<Replica>(data, r, 0, options(3)));
  const std::vector<Epoch> es = join_all(rs, 0);
  for (int step = 0; step < 20; ++step) {
    const int failing = step % 4 == 3 ? step % 3 : -1;
    std::vector<std::future<ReplicaQuorum::Vote>> fs;
    for (int r = 0; r < 3; ++r) {
      fs.push_back(std::async(std::launch::async, [&, r] {
        return rs[static_cast<size_t>(r)]->quorum.vote(es[0], step, r != failing);
      }));
    }
    for (auto& f : fs) {
      const ReplicaQuorum::Vote v = f.get();
      CHECK(v.commit == (failing < 0));
      CHECK_FALSE(v.join_pending);
    }
  }
}

TEST_CASE("ft quorum: a dead replica is left out of the next epoch, a restarted one heals",
          "[timing]") {
  auto data = std::make_shared<MemoryData>();
  std::vector<std::unique_ptr<Replica>> rs;
  for (int r = 0; r < 3; ++r) rs.push_back(std::make_unique<Replica>(data, r, 0, options(3)));
  const Epoch first = join_all(rs, 0)[0];
  // Replica 1 dies (its launcher counts the death) before it votes on step 4.
  rs[1].reset();
  MemoryStore(data).add(dead_key(1), 1);
  auto v0 = std::async(std::launch::async, [&] { return rs[0]->quorum.vote(first, 4, true); });
  auto v2 = std::async(std::launch::async, [&] { return rs[2]->quorum.vote(first, 4, true); });
  CHECK_FALSE(v0.get().commit);
  CHECK_FALSE(v2.get().commit);
  auto j0 = std::async(std::launch::async, [&] { return rs[0]->quorum.join(4); });
  auto j2 = std::async(std::launch::async, [&] { return rs[2]->quorum.join(4); });
  const Epoch second = j0.get();
  CHECK(j2.get().to_json() == second.to_json());
  CHECK(second.id == 2);
  CHECK(second.replicas() == ints({0, 2}));
  CHECK(second.start_step == 4);
  CHECK(second.heal.empty());

  // Its restart (generation 1) asks to join: the members see it in the next vote, and the
  // epoch after holds it, healing from replica 0.
  rs[1] = std::make_unique<Replica>(data, 1, 1, options(3));
  auto joiner = std::async(std::launch::async, [&] { return rs[1]->quorum.join(-1); });
  bool pending = false;
  for (int64_t step = 4; step < 50 && !pending; ++step) {
    auto a = std::async(std::launch::async, [&] { return rs[0]->quorum.vote(second, step, true); });
    auto b = std::async(std::launch::async, [&] { return rs[2]->quorum.vote(second, step, true); });
    const ReplicaQuorum::Vote va = a.get(), vb = b.get();
    CHECK(va.commit);
    CHECK(vb.commit);
    CHECK(va.join_pending == vb.join_pending);
    pending = va.join_pending;
    if (!pending) std::this_thread::sleep_for(5ms);
  }
  REQUIRE(pending);
  auto k0 = std::async(std::launch::async, [&] { return rs[0]->quorum.join(9); });
  auto k2 = std::async(std::launch::async, [&] { return rs[2]->quorum.join(9); });
  const Epoch third = joiner.get();
  CHECK(k0.get().to_json() == third.to_json());
  CHECK(k2.get().to_json() == third.to_json());
  CHECK(third.replicas() == ints({0, 1, 2}));
  CHECK(third.start_step == 9);
  CHECK(third.source == 0);
  CHECK(third.heal == ints({1}));
  CHECK(third.members[1].generation == 1);
}

TEST_CASE("ft quorum: below min_replicas every survivor gets QuorumLost", "[timing]") {
  auto data = std::make_shared<MemoryData>();
  std::vector<std::unique_ptr<Replica>> rs;
  for (int r = 0; r < 3; ++r) rs.push_back(std::make_unique<Replica>(data, r, 0, options(3, 2)));
  join_all(rs, 0);
  rs[1].reset();
  rs[2].reset();
  MemoryStore(data).add(dead_key(1), 1);
  MemoryStore(data).add(dead_key(2), 1);
  CHECK_THROWS_AS(rs[0]->quorum.join(3), QuorumLost);
}

TEST_CASE(
    "ft quorum: a silent replica (no heartbeat, no death counted) is left out after the "
    "heartbeat timeout",
    "[timing]") {
  auto data = std::make_shared<MemoryData>();
  // Replica 2 never starts: the first epoch forms without it once its heartbeat stayed
  // silent for the timeout.
  std::vector<std::unique_ptr<Replica>> rs;
  for (int r = 0; r < 2; ++r) rs.push_back(std::make_unique<Replica>(data, r, 0, options(3)));
  const auto start = std::chrono::steady_clock::now();
  const std::vector<Epoch> es = join_all(rs, 0);
  CHECK(std::chrono::steady_clock::now() - start >= 1500ms);
  CHECK(es[0].replicas() == ints({0, 1}));
  CHECK(es[1].to_json() == es[0].to_json());
}

TEST_CASE("ft quorum: whenever a member dies during the vote, all survivors agree", "[timing]") {
  std::mt19937 rng(42);
  for (int round = 0; round < 12; ++round) {
    auto data = std::make_shared<MemoryData>();
    std::vector<std::unique_ptr<Replica>> rs;
    for (int r = 0; r < 3; ++r) rs.push_back(std::make_unique<Replica>(data, r, 0, options(3)));
    const Epoch e = join_all(rs, 0)[0];
    const auto delay = std::chrono::microseconds(rng() % 3000);
    // Replica 2 votes ok after a random delay, then dies, or dies without voting.
    const bool votes = rng() % 2 == 0;
    auto victim = std::async(std::launch::async, [&] {
      std::this_thread::sleep_for(delay);
      if (votes) MemoryStore(data).add("ft/e1/vote/0", 1);
      MemoryStore(data).add(dead_key(2), 1);
    });
    auto a = std::async(std::launch::async, [&] { return rs[0]->quorum.vote(e, 0, true); });
    auto b = std::async(std::launch::async, [&] { return rs[1]->quorum.vote(e, 0, true); });
    victim.get();
    const bool ca = a.get().commit, cb = b.get().commit;
    CHECK(ca == cb);
    if (!votes) CHECK_FALSE(ca);
  }
}
