#include <catch2/catch.hpp>
#include <cmath>

#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"

using trainctl::optim::LrSchedule;

TEST_CASE("learning rate: linear warmup then cosine/linear/constant decay", "[optim]") {
  LrSchedule s{1.0, 0.1, 10, 110, "cosine"};
  CHECK(s.at(0) == Approx(0.1));
  CHECK(s.at(4) == Approx(0.5));
  CHECK(s.at(9) == Approx(1.0));
  CHECK(s.at(10) == Approx(1.0));
  CHECK(s.at(60) == Approx(0.55));  // halfway through the cosine
  CHECK(s.at(110) == Approx(0.1));
  CHECK(s.at(500) == Approx(0.1));
  s.decay = "linear";
  CHECK(s.at(60) == Approx(0.55));
  CHECK(s.at(35) == Approx(0.1 + 0.9 * 0.75));
  s.decay = "constant";
  CHECK(s.at(100) == Approx(1.0));
  LrSchedule no_warmup{2.0, 0.0, 0, 100, "cosine"};
  CHECK(no_warmup.at(0) == Approx(2.0));
  CHECK(no_warmup.at(50) == Approx(1.0));
}

TEST_CASE("dynamic loss scale: halve and skip on overflow, double after N finite steps",
          "[optim]") {
  using trainctl::optim::DynamicLossScaler;
  DynamicLossScaler s(
      {.initial_scale = 1024, .growth_interval = 3, .min_scale = 256, .max_scale = 4096});
  CHECK(s.scale() == 1024);
  CHECK(s.update(true));
  CHECK(s.update(true));
  CHECK(s.scale() == 1024);
  CHECK(s.update(true));  // third finite step in a row: grows
  CHECK(s.scale() == 2048);
  CHECK(s.update(true));
  CHECK_FALSE(s.update(false));  // overflow: skip, halve, and the run of good steps restarts
  CHECK(s.scale() == 1024);
  CHECK(s.state().good_steps == 0);
  CHECK_FALSE(s.update(false));
  CHECK_FALSE(s.update(false));
  CHECK(s.scale() == 256);
  CHECK_FALSE(s.update(false));  // never below min_scale
  CHECK(s.scale() == 256);
  for (int i = 0; i < 3 * 6; ++i) s.update(true);
  CHECK(s.scale() == 4096);  // never above max_scale
  // State round trip, and a bad state is refused.
  DynamicLossScaler t({});
  CHECK(t.scale() == 65536);
  t.load(s.state());
  CHECK(t.scale() == 4096);
  CHECK_THROWS_AS(t.load({0.0, 0}), std::invalid_argument);
  CHECK_THROWS_AS(t.load({std::nan(""), 0}), std::invalid_argument);
}
