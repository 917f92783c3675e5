#include <catch2/catch.hpp>
#include <random>
#include <vector>

#include "ps/staleness_rule.h"

using trainctl::ps::StalenessRule;

TEST_CASE("staleness rule K=0: one update per step, once every worker's gradient is in", "[ps]") {
  StalenessRule rule(3, 0);
  CHECK_FALSE(rule.ready());
  for (int step = 0; step < 3; ++step) {
    rule.arrive(2, rule.version());
    CHECK_FALSE(rule.ready());
    rule.arrive(0, rule.version());
    CHECK_FALSE(rule.ready());
    rule.arrive(1, rule.version());
    REQUIRE(rule.ready());
    const auto a = rule.apply();
    CHECK(a.workers == std::vector<int>{0, 1, 2});  // worker order, not arrival order
    CHECK(a.staleness == std::vector<int64_t>{0, 0, 0});
    CHECK(a.version == step + 1);
    CHECK_FALSE(rule.ready());
    CHECK_FALSE(rule.pending(1));
  }
  CHECK_THROWS_AS(rule.apply(), std::logic_error);
}

TEST_CASE("staleness rule K=2: a fast worker runs ahead until the slow one is 2 behind", "[ps]") {
  StalenessRule rule(2, 2);
  const int fast = 0, slow = 1;
  // The fast worker's first two gradients are applied alone.
  rule.arrive(fast, 0);
  REQUIRE(rule.ready());
  auto a = rule.apply();
  CHECK(a.workers == std::vector<int>{fast});
  CHECK(a.staleness == std::vector<int64_t>{0});
  rule.arrive(fast, 1);
  REQUIRE(rule.ready());
  a = rule.apply();
  CHECK(a.workers == std::vector<int>{fast});
  CHECK(a.version == 2);
  // The third would leave the slow worker (on version 0) 3 behind: held.
  rule.arrive(fast, 2);
  CHECK_FALSE(rule.ready());
  rule.arrive(slow, 0);
  REQUIRE(rule.ready());
  a = rule.apply();
  CHECK(a.workers == std::vector<int>{fast, slow});
  CHECK(a.staleness == std::vector<int64_t>{0, 2});
  CHECK(a.version == 3);
  // Both now hold version 3: the fast one may run ahead again.
  rule.arrive(fast, 3);
  CHECK(rule.ready());
}

TEST_CASE("staleness rule: a finished worker is no longer waited for", "[ps]") {
  StalenessRule rule(3, 0);
  rule.arrive(0, 0);
  rule.arrive(1, 0);
  CHECK_FALSE(rule.ready());
  rule.finish(2);
  REQUIRE(rule.ready());
  CHECK(rule.apply().workers == std::vector<int>{0, 1});
  CHECK_THROWS_AS(rule.arrive(2, 1), std::logic_error);
  // Twice in a row is refused too.
  rule.arrive(0, 1);
  CHECK_THROWS_AS(rule.arrive(0, 1), std::logic_error);
  // reset(): a resume from version 7, everyone holds it.
  rule.reset(7);
  CHECK(rule.version() == 7);
  CHECK_FALSE(rule.pending(0));
  rule.arrive(1, 7);
  rule.arrive(0, 7);
  CHECK_FALSE(rule.ready());
  rule.arrive(2, 7);
  CHECK(rule.apply().version == 8);
}

TEST_CASE("staleness rule: random arrival orders never deadlock, staleness stays <= K", "[ps]") {
  std::mt19937 rng(20261124);
  for (int trial = 0; trial < 300; ++trial) {
    const int workers = 1 + static_cast<int>(rng() % 5);
    const int K = static_cast<int>(rng() % 4);
    const int pushes = 1 + static_cast<int>(rng() % 12);  // per worker
    StalenessRule rule(workers, K);
    std::vector<int> left(static_cast<size_t>(workers), pushes);
    std::vector<int64_t> held(static_cast<size_t>(workers), 0);
    int64_t applied = 0;
    for (;;) {
      // A worker that is not pending and has pushes left computes and delivers one (in a
      // random order); a worker whose pushes are spent finishes.
      std::vector<int> computing;
      for (int w = 0; w < workers; ++w) {
        if (!rule.pending(w) && left[static_cast<size_t>(w)] > 0) computing.push_back(w);
      }
      if (computing.empty()) {
        INFO("trial " << trial << ": gradients left pending with no worker computing");
        REQUIRE_FALSE(rule.ready());
        for (int w = 0; w < workers; ++w) REQUIRE_FALSE(rule.pending(w));
        break;
      }
      const int w = computing[rng() % computing.size()];
      rule.arrive(w, held[static_cast<size_t>(w)]);
      if (--left[static_cast<size_t>(w)] == 0) rule.finish(w);
      while (rule.ready()) {
        const auto a = rule.apply();
        for (size_t i = 0; i < a.workers.size(); ++i) {
          CHECK(a.staleness[i] >= 0);
          CHECK(a.staleness[i] <= K);
          held[static_cast<size_t>(a.workers[i])] = a.version;
        }
        applied += static_cast<int64_t>(a.workers.size());
      }
    }
    CHECK(applied == static_cast<int64_t>(workers) * pushes);
  }
}
