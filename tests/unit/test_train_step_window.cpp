// The logging window (train/step_window.h, StepTimer::window()): a logged line's per-step
// figures are means over the steps since the previous logged line, so a line every 10 steps
// of local SGD with sync_every 4 shows the exchange spread over its steps rather than 0 or
// the whole exchange depending on where the line falls.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "train/metrics.h"
#include "train/step_window.h"

using trainctl::train::per_step_mean;
using trainctl::train::StepSample;
using trainctl::train::StepTimer;
using trainctl::train::StepWindow;

TEST_CASE("step window: means per step and totals over the steps added", "[train][metrics]") {
  StepWindow w;
  CHECK(w.steps() == 0);
  CHECK(w.mean().step_ms == 0.0);
  CHECK(w.mean().sent_bytes == 0);
  w.add({.step_ms = 10, .comm_s = 0.0, .exposed_s = 0.0, .pipeline_idle_s = 0.5, .sent_bytes = 0});
  w.add({.step_ms = 30, .comm_s = 0.2, .exposed_s = 0.1, .pipeline_idle_s = 1.5, .sent_bytes = 8});
  CHECK(w.steps() == 2);
  CHECK(w.total().sent_bytes == 8);
  CHECK(w.total().step_ms == 40.0);
  const StepSample mean = w.mean();
  CHECK(mean.step_ms == 20.0);
  CHECK(mean.comm_s == Approx(0.1));
  CHECK(mean.exposed_s == Approx(0.05));
  CHECK(mean.pipeline_idle_s == 1.0);
  CHECK(mean.sent_bytes == 4);
  w.restart();
  CHECK(w.steps() == 0);
  CHECK(w.total().sent_bytes == 0);
}

TEST_CASE("step window: bytes per step round to the nearest whole byte, exactly",
          "[train][metrics]") {
  CHECK(per_step_mean(0, 4) == 0);
  CHECK(per_step_mean(10, 4) == 3);  // 2.5 rounds up
  CHECK(per_step_mean(9, 4) == 2);   // 2.25
  CHECK(per_step_mean(11, 4) == 3);  // 2.75
  CHECK(per_step_mean(7, 0) == 0);   // no step: nothing per step
  // Beyond a double's 53 bits the integer arithmetic stays exact.
  const int64_t big = (int64_t{1} << 60) + 3;
  CHECK(per_step_mean(big, 1) == big);
  CHECK(per_step_mean(big, 2) == (int64_t{1} << 59) + 2);
}

TEST_CASE("step window: local SGD with sync_every 4, logged every 10 steps", "[train][metrics]") {
  // The exchange happens on steps 4, 8, 12, ...; lines on steps 1, 10, 20, 30, 40 (what
  // MetricsReporter::should_log picks), the window restarted after each line as
  // run_reporting's report_step does.
  const int64_t exchange = 4000;
  StepTimer timer;
  std::vector<int64_t> per_step, window_total;
  int64_t sent = 0, logged_steps = 0;
  for (int64_t step = 1; step <= 40; ++step) {
    timer.begin_step();
    const int64_t bytes = step % 4 == 0 ? exchange : 0;
    sent += bytes;
    timer.window().add({.sent_bytes = bytes});
    if (step == 1 || step % 10 == 0) {
      per_step.push_back(timer.window().mean().sent_bytes);
      window_total.push_back(timer.window().total().sent_bytes);
      logged_steps += timer.window().steps();
      timer.restart_window();
    }
  }
  CHECK(logged_steps == 40);
  // Steps 2..10 hold 2 exchanges in 9 steps, 11..20 three in 10, 21..30 two, 31..40 three.
  CHECK(per_step == std::vector<int64_t>{0, 889, 1200, 800, 1200});
  CHECK(window_total == std::vector<int64_t>{0, 8000, 12000, 8000, 12000});
  int64_t sum = 0;
  for (int64_t t : window_total) sum += t;
  CHECK(sum == sent);
}
