#include <catch2/catch.hpp>
#include <cmath>

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
