// lib/train's loop policies on their own: when checkpoints, evaluations and logged steps
// fall due (train/cadence.h, train/metrics.h), with a clock the test moves by hand.
#include <catch2/catch.hpp>
#include <chrono>
#include <vector>

#include "train/cadence.h"
#include "train/metrics.h"

using trainctl::train::CheckpointCadence;
using trainctl::train::CheckpointOptions;
using trainctl::train::eval_due;
using trainctl::train::MetricsReporter;
using trainctl::train::TrainingOptions;
using Clock = CheckpointCadence::Clock;
using std::chrono::seconds;

namespace {

// The steps (1-based) after which a run of `steps` steps saves a periodic checkpoint.
std::vector<int64_t> periodic_saves(CheckpointCadence& c, int64_t start, int64_t steps) {
  std::vector<int64_t> saved;
  const Clock::time_point t0{};
  c.start(start, t0);
  for (int64_t step = start + 1; step <= steps; ++step) {
    if (c.periodic_due(step, step == steps, false)) {
      saved.push_back(step);
      c.saved(step, t0);
    }
  }
  return saved;
}

}  // namespace

TEST_CASE("checkpoint cadence: every_steps saves on multiples, never on the last step", "[train]") {
  CheckpointOptions policy;
  policy.every_steps = 3;
  CheckpointCadence c(policy, true);
  CHECK(periodic_saves(c, 0, 10) == std::vector<int64_t>{3, 6, 9});
  CHECK(c.final_due(10));
  // A run whose last step is a multiple: the final save covers it, no periodic one.
  CheckpointCadence d(policy, true);
  CHECK(periodic_saves(d, 0, 9) == std::vector<int64_t>{3, 6});
  CHECK(d.final_due(9));
}

TEST_CASE("checkpoint cadence: every_steps 0 saves only at the end", "[train]") {
  CheckpointCadence c(CheckpointOptions{}, true);
  CHECK(periodic_saves(c, 0, 7).empty());
  CHECK(c.final_due(7));
  // ... unless some rank asked by time.
  CHECK(c.periodic_due(4, false, true));
  CHECK_FALSE(c.periodic_due(7, true, true));
}

TEST_CASE("checkpoint cadence: a resumed run counts steps from 0, not from the restart",
          "[train]") {
  CheckpointOptions policy;
  policy.every_steps = 4;
  CheckpointCadence c(policy, true);
  CHECK(periodic_saves(c, 6, 13) == std::vector<int64_t>{8, 12});
}

TEST_CASE("checkpoint cadence: the final save is skipped when that step is already saved",
          "[train]") {
  CheckpointCadence c(CheckpointOptions{}, true);
  const Clock::time_point t0{};
  c.start(0, t0);
  CHECK(c.final_due(0));  // steps: 0 from scratch still leaves a checkpoint of step 0
  c.start(5, t0);         // resumed from step 5 with nothing left to train
  CHECK_FALSE(c.final_due(5));
  CHECK(c.final_due(6));
  c.saved(6, t0);  // a periodic save of the step a stop signal ended on
  CHECK_FALSE(c.final_due(6));
}

TEST_CASE("checkpoint cadence: every_minutes counts from the start and from each save", "[train]") {
  CheckpointOptions policy;
  policy.every_minutes = 2;
  const Clock::time_point t0{};
  CheckpointCadence c(policy, true, t0);
  c.start(0, t0);
  CHECK_FALSE(c.time_due(t0 + seconds(119)));
  CHECK(c.time_due(t0 + seconds(120)));
  c.saved(10, t0 + seconds(130));
  CHECK_FALSE(c.time_due(t0 + seconds(200)));
  CHECK(c.time_due(t0 + seconds(250)));
  // A restore restarts the clock.
  c.start(10, t0 + seconds(1000));
  CHECK_FALSE(c.time_due(t0 + seconds(1100)));
  CHECK(c.time_due(t0 + seconds(1120)));
}

TEST_CASE("checkpoint cadence: only the rank that keeps time asks by time", "[train]") {
  CheckpointOptions policy;
  policy.every_minutes = 1;
  const Clock::time_point t0{};
  CheckpointCadence rank0(policy, true, t0), other(policy, false, t0);
  CHECK(rank0.time_due(t0 + seconds(3600)));
  CHECK_FALSE(other.time_due(t0 + seconds(3600)));
  // every_minutes 0: never.
  CheckpointCadence off(CheckpointOptions{}, true, t0);
  CHECK_FALSE(off.time_due(t0 + seconds(1000000)));
}

TEST_CASE("eval cadence: every eval_every steps and the last, never with 0", "[train]") {
  TrainingOptions t;
  t.eval_every = 5;
  std::vector<int64_t> evals;
  for (int64_t step = 1; step <= 12; ++step) {
    if (eval_due(t, step, step == 12)) evals.push_back(step);
  }
  CHECK(evals == std::vector<int64_t>{5, 10, 12});
  t.eval_every = 0;
  CHECK_FALSE(eval_due(t, 5, true));
}

TEST_CASE("metrics: the first, every Nth, the last and skipped steps are logged", "[train]") {
  MetricsReporter reporter("", -1, 10);
  std::vector<int64_t> logged;
  for (int64_t step = 1; step <= 25; ++step) {
    if (reporter.should_log(step, step == 25, step == 13)) logged.push_back(step);
  }
  CHECK(logged == std::vector<int64_t>{1, 10, 13, 20, 25});
  MetricsReporter every(std::string(), -1, 1);
  CHECK(every.should_log(7, false, false));
}
