#include <catch2/catch.hpp>
#include <vector>

#include "ps/update_grouping.h"

using trainctl::ps::UpdateGrouping;

namespace {
// Both workers computed one step of `step` seconds from time 0.
UpdateGrouping two_equal_workers(double step) {
  UpdateGrouping g(2, 0.5);
  g.sent(0, 0.0);
  g.sent(1, 0.0);
  g.arrived(0, step);
  g.arrived(1, step);
  g.sent(0, step);
  g.sent(1, step);
  return g;
}
}  // namespace

TEST_CASE("update grouping: an equal worker a little behind is waited for, until the deadline",
          "[ps]") {
  UpdateGrouping g = two_equal_workers(0.1);
  CHECK(g.average(0) == Approx(0.1));
  // Worker 0 is back at 0.2; worker 1, expected at 0.2 too, is still computing.
  g.arrived(0, 0.2);
  const std::vector<int> computing{1};
  const auto hold = g.hold_until(computing, 0.2, 0.2);
  REQUIRE(hold.has_value());
  CHECK(*hold == Approx(0.2 + 0.5 * 0.1));
  // Past the deadline the set is applied without it.
  CHECK_FALSE(g.hold_until(computing, 0.2, 0.26).has_value());
  // With nobody computing there is nothing to wait for.
  CHECK_FALSE(g.hold_until({}, 0.2, 0.2).has_value());
}

TEST_CASE("update grouping: a slow worker expected after the deadline is not waited for", "[ps]") {
  UpdateGrouping g(2, 0.5);
  g.sent(0, 0.0);
  g.sent(1, 0.0);
  g.arrived(0, 0.1);
  g.arrived(1, 0.3);  // three times slower
  g.sent(0, 0.1);
  g.sent(1, 0.3);
  g.arrived(0, 0.2);
  // Worker 1 is expected at 0.6, the deadline is 0.25.
  const std::vector<int> computing{1};
  CHECK_FALSE(g.hold_until(computing, 0.2, 0.2).has_value());
  // Once it is near (expected at 0.6; the fast one arrives at 0.58, deadline ~0.63), it is
  // waited for.
  g.sent(0, 0.5);
  g.arrived(0, 0.58);
  CHECK(g.hold_until(computing, 0.58, 0.58).has_value());
}

TEST_CASE("update grouping: the first step groups, a paused worker and window 0 never hold",
          "[ps]") {
  UpdateGrouping g(2, 0.5);
  g.sent(0, 0.0);
  g.sent(1, 0.0);
  g.arrived(0, 0.1);  // worker 1 has no average yet: taken to be as fast
  const std::vector<int> computing{1};
  CHECK(g.hold_until(computing, 0.1, 0.1).has_value());
  g.paused(1);  // a checkpoint pause: no start time, no forecast
  CHECK_FALSE(g.hold_until(computing, 0.1, 0.1).has_value());

  UpdateGrouping never(2, 0.0);
  never.sent(0, 0.0);
  never.sent(1, 0.0);
  never.arrived(0, 0.1);
  CHECK_FALSE(never.hold_until(computing, 0.1, 0.1).has_value());
  CHECK_THROWS_AS(UpdateGrouping(0, 0.5), std::invalid_argument);
  CHECK_THROWS_AS(UpdateGrouping(2, -1.0), std::invalid_argument);
}

TEST_CASE("update grouping: the average follows a worker that changes pace", "[ps]") {
  UpdateGrouping g(1, 0.5);
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
