#include <catch2/catch.hpp>
#include <vector>

#include "ps/update_grouping.h"

using trainctl::ps::UpdateGrouping;

namespace {
// Both workers computed one step of `step` seconds from time 0 and started the next.
UpdateGrouping two_equal_workers(double step, double window) {
  UpdateGrouping g(2, window);
  g.sent(0, 0.0);
  g.sent(1, 0.0);
  g.arrived(0, step);
  g.arrived(1, step);
  g.sent(0, step);
  g.sent(1, step);
  return g;
}
}  // namespace

TEST_CASE("update grouping: an equal worker is waited for, until the deadline", "[ps]") {
  UpdateGrouping g = two_equal_workers(0.1, 1.0);
  CHECK(g.average(0) == Approx(0.1));
  // Worker 0 is back at 0.2; worker 1, as fast, is still computing.
  g.arrived(0, 0.2);
  const std::vector<int> computing{1};
  const auto hold = g.hold_until(computing, 0.2, 0.2);
  REQUIRE(hold.has_value());
  CHECK(*hold == Approx(0.2 + 1.0 * 0.1));
  // However late it is (jitter on a loaded machine), it is waited for until the deadline...
  CHECK(g.hold_until(computing, 0.2, 0.29).has_value());
  // ...and no longer.
  CHECK_FALSE(g.hold_until(computing, 0.2, 0.31).has_value());
  // With nobody computing there is nothing to wait for.
  CHECK_FALSE(g.hold_until({}, 0.2, 0.2).has_value());
}

TEST_CASE("update grouping: a worker over 1.5x slower is never waited for", "[ps]") {
  UpdateGrouping g(3, 1.0);
  for (int w = 0; w < 3; ++w) g.sent(w, 0.0);
  g.arrived(0, 0.1);
  g.arrived(1, 0.14);  // 1.4x: a peer
  g.arrived(2, 0.3);   // 3x: not
  g.sent(0, 0.1);
  g.sent(1, 0.14);
  g.sent(2, 0.3);
  g.arrived(0, 0.2);
  const std::vector<int> slow_only{2};
  CHECK_FALSE(g.hold_until(slow_only, 0.2, 0.2).has_value());
  // Not even when it is about to arrive: the fast ones run ahead within K instead.
  CHECK_FALSE(g.hold_until(slow_only, 0.58, 0.58).has_value());
  const std::vector<int> both{1, 2};
  CHECK(g.hold_until(both, 0.2, 0.2).has_value());  // the peer is
}

TEST_CASE("update grouping: the first step groups, a paused worker and window 0 never hold",
          "[ps]") {
  UpdateGrouping g(2, 1.0);
  g.sent(0, 0.0);
  g.sent(1, 0.0);
  g.arrived(0, 0.1);  // worker 1 has no average yet: a peer
  const std::vector<int> computing{1};
  CHECK(g.hold_until(computing, 0.1, 0.1).has_value());
  g.paused(1);  // a checkpoint pause: it is not computing on anything sent
  CHECK_FALSE(g.hold_until(computing, 0.1, 0.1).has_value());

  UpdateGrouping never = two_equal_workers(0.1, 0.0);
  never.arrived(0, 0.2);
  CHECK_FALSE(never.hold_until(computing, 0.2, 0.2).has_value());
  CHECK_THROWS_AS(UpdateGrouping(0, 1.0), std::invalid_argument);
  CHECK_THROWS_AS(UpdateGrouping(2, -1.0), std::invalid_argument);
}

TEST_CASE("update grouping: the average follows a worker that changes pace", "[ps]") {
  UpdateGrouping g(1, 1.0);
  double t = 0.0;
  for (int i = 0; i < 20; ++i) {
    g.sent(0, t);
    t += 0.1;
    g.arrived(0, t);
  }
  CHECK(g.average(0) == Approx(0.1));
  for (int i = 0; i < 20; ++i) {
    g.sent(0, t);
    t += 0.3;
    g.arrived(0, t);
  }
  CHECK(g.average(0) == Approx(0.3).epsilon(0.01));
  // An arrival without a start (after a pause) leaves the average alone.
  g.arrived(0, t + 5.0);
  CHECK(g.average(0) == Approx(0.3).epsilon(0.01));
}
