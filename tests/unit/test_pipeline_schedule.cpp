// Pipeline schedules as instruction lists: their structure (forward before backward, sends
// paired with receives in order), their simulated bubble and activation memory against the
// closed forms, deadlock detection, and the text timeline of `trainctl plan`.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <tuple>

#include "parallel/pipeline_schedule.h"
#include "parallel/pipeline_simulate.h"
#include "parallel/pipeline_timeline.h"
#include "util/error.h"

using namespace trainctl::parallel;

namespace {

using Lists = std::vector<std::vector<Instruction>>;

int count(const std::vector<Instruction>& list, OpKind kind) {
  return static_cast<int>(std::count_if(list.begin(), list.end(),
                                        [&](const Instruction& i) { return i.kind == kind; }));
}

// The micro-batches of `stage`'s instructions of `kind` towards/from `peer`, in list order.
std::vector<int> traffic(const std::vector<Instruction>& list, OpKind kind, int peer) {
  std::vector<int> mbs;
  for (const Instruction& i : list) {
    if (i.kind == kind && i.peer_stage == peer) mbs.push_back(i.micro_batch);
  }
  return mbs;
}

const ScheduleKind kKinds[] = {ScheduleKind::gpipe, ScheduleKind::one_f_one_b};

}  // namespace

TEST_CASE("schedule names parse and print as in the job spec", "[pipeline]") {
  CHECK(parse_schedule_kind("gpipe") == ScheduleKind::gpipe);
  CHECK(parse_schedule_kind("1f1b") == ScheduleKind::one_f_one_b);
  CHECK(std::string(to_string(ScheduleKind::one_f_one_b)) == "1f1b");
  CHECK(std::string(to_string(ScheduleKind::gpipe)) == "gpipe");
  CHECK_THROWS_AS(parse_schedule_kind("interleaved"), trainctl::InputError);
  CHECK_THROWS_WITH(parse_schedule_kind("1F1B"), Catch::Contains("gpipe or 1f1b"));
}

TEST_CASE("make_schedule rejects impossible shapes", "[pipeline]") {
  CHECK_THROWS_AS(make_schedule(ScheduleKind::gpipe, 0, 0, 4), std::invalid_argument);
  CHECK_THROWS_AS(make_schedule(ScheduleKind::gpipe, 2, 2, 4), std::invalid_argument);
  CHECK_THROWS_AS(make_schedule(ScheduleKind::one_f_one_b, -1, 2, 4), std::invalid_argument);
  CHECK_THROWS_AS(make_schedule(ScheduleKind::one_f_one_b, 0, 2, 0), std::invalid_argument);
  CHECK_THROWS_AS(make_all_schedules(ScheduleKind::gpipe, 0, 4), std::invalid_argument);
}

TEST_CASE("1F1B on a middle stage is warm-up, steady 1F1B, cool-down", "[pipeline]") {
  // Stage 1 of 3 with 3 micro-batches: one warm-up forward.
  using K = OpKind;
  const std::vector<Instruction> expected = {
      {K::recv_activation, 0, 0}, {K::forward, 0, -1},  {K::send_activation, 0, 2},
      {K::recv_activation, 1, 0}, {K::forward, 1, -1},  {K::send_activation, 1, 2},
      {K::recv_grad, 0, 2},       {K::backward, 0, -1}, {K::send_grad, 0, 0},
      {K::recv_activation, 2, 0}, {K::forward, 2, -1},  {K::send_activation, 2, 2},
      {K::recv_grad, 1, 2},       {K::backward, 1, -1}, {K::send_grad, 1, 0},
      {K::recv_grad, 2, 2},       {K::backward, 2, -1}, {K::send_grad, 2, 0},
      {K::optimizer_step, -1, -1}};
  CHECK(make_schedule(ScheduleKind::one_f_one_b, 1, 3, 3) == expected);
  // One stage: no communication at all.
  const std::vector<Instruction> single = {{K::forward, 0, -1},
                                           {K::backward, 0, -1},
                                           {K::forward, 1, -1},
                                           {K::backward, 1, -1},
                                           {K::optimizer_step, -1, -1}};
  CHECK(make_schedule(ScheduleKind::one_f_one_b, 0, 1, 2) == single);
}

TEST_CASE("every schedule is well formed for 1..4 stages and 1..8 micro-batches", "[pipeline]") {
  for (ScheduleKind kind : kKinds) {
    for (int p = 1; p <= 4; ++p) {
      for (int m = 1; m <= 8; ++m) {
        INFO(to_string(kind) << " p=" << p << " m=" << m);
        const Lists lists = make_all_schedules(kind, p, m);
        REQUIRE(lists.size() == static_cast<size_t>(p));
        for (int s = 0; s < p; ++s) {
          INFO("stage " << s);
          const std::vector<Instruction>& list = lists[s];
          CHECK(count(list, OpKind::forward) == m);
          CHECK(count(list, OpKind::backward) == m);
          CHECK(count(list, OpKind::optimizer_step) == 1);
          CHECK(list.back().kind == OpKind::optimizer_step);

          // Each micro-batch: exactly one forward, then exactly one backward.
          std::map<int, std::pair<int, int>> position;  // mb -> (forward, backward) index
          for (int i = 0; i < static_cast<int>(list.size()); ++i) {
            if (list[i].kind == OpKind::forward) position[list[i].micro_batch].first = i;
            if (list[i].kind == OpKind::backward) position[list[i].micro_batch].second = i;
          }
          CHECK(position.size() == static_cast<size_t>(m));
          for (const auto& [mb, at] : position) {
            INFO("mb " << mb);
            CHECK(at.first < at.second);
          }

          // Sends pair with the peer's receives: same micro-batches, same order.
          if (s + 1 < p) {
            CHECK(traffic(list, OpKind::send_activation, s + 1) ==
                  traffic(lists[s + 1], OpKind::recv_activation, s));
            CHECK(traffic(list, OpKind::recv_grad, s + 1) ==
                  traffic(lists[s + 1], OpKind::send_grad, s));
            CHECK(traffic(list, OpKind::send_activation, s + 1).size() == static_cast<size_t>(m));
          } else {
            CHECK(count(list, OpKind::send_activation) == 0);
            CHECK(count(list, OpKind::recv_grad) == 0);
          }
          if (s == 0) {
            CHECK(count(list, OpKind::recv_activation) == 0);
            CHECK(count(list, OpKind::send_grad) == 0);
          }
          // Communication only with neighbours.
          for (const Instruction& i : list) {
            if (!is_compute(i.kind) && i.kind != OpKind::optimizer_step) {
              CHECK((i.peer_stage == s - 1 || i.peer_stage == s + 1));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("simulated bubble is (p-1)/(m+p-1) and activation peaks match the closed form",
          "[pipeline]") {
  for (ScheduleKind kind : kKinds) {
    for (int p = 1; p <= 4; ++p) {
      for (int m = 1; m <= 8; ++m) {
        INFO(to_string(kind) << " p=" << p << " m=" << m);
        const double formula = static_cast<double>(p - 1) / (m + p - 1);
        // Equal costs and the default forward 1, backward 2 give the same bubble.
        for (auto [fwd, bwd] : {std::pair{1.0, 1.0}, std::pair{1.0, 2.0}}) {
          INFO("forward " << fwd << " backward " << bwd);
          Simulation sim;
          REQUIRE_NOTHROW(sim = simulate(kind, p, m, fwd, bwd));
          CHECK(sim.stats.bubble_fraction == Approx(formula).margin(1e-12));
          CHECK(sim.makespan == Approx((m + p - 1) * (fwd + bwd)));
        }
        const Simulation sim = simulate(kind, p, m);
        REQUIRE(sim.stages.size() == static_cast<size_t>(p));
        for (int s = 0; s < p; ++s) {
          INFO("stage " << s);
          const StageTimeline& t = sim.stages[s];
          CHECK(t.spans.size() == static_cast<size_t>(2 * m));
          CHECK(t.busy_time == Approx(3.0 * m));
          const int expected_peak = kind == ScheduleKind::gpipe ? m : std::min(p - s, m);
          CHECK(t.peak_activations == expected_peak);
          // Spans never overlap on a stage.
          for (size_t i = 1; i < t.spans.size(); ++i) {
            CHECK(t.spans[i].start >= t.spans[i - 1].end);
          }
        }
        CHECK(sim.stats.peak_activations == (kind == ScheduleKind::gpipe ? m : std::min(p, m)));
      }
    }
  }
}

TEST_CASE("a forward waits for the previous stage's activation", "[pipeline]") {
  const Simulation sim = simulate(ScheduleKind::gpipe, 2, 2);
  // Stage 1's forward of mb 0 starts when stage 0's forward of mb 0 ends.
  REQUIRE(sim.stages[1].spans.front().kind == OpKind::forward);
  CHECK(sim.stages[1].spans.front().start == Approx(1.0));
  // Stage 0's first backward waits for stage 1's backward of mb 0: F0 F1 on stage 1 end at 3,
  // its B0 runs 3..5.
  const ComputeSpan& b0 = sim.stages[0].spans[2];
  CHECK(b0.kind == OpKind::backward);
  CHECK(b0.micro_batch == 0);
  CHECK(b0.start == Approx(5.0));
}

TEST_CASE("a deadlocking instruction list is detected", "[pipeline]") {
  using K = OpKind;
  // Each stage first waits for what the other sends only afterwards.
  const Lists lists = {
      {{K::recv_grad, 0, 1}, {K::forward, 0, -1}, {K::send_activation, 0, 1}},
      {{K::recv_activation, 0, 0}, {K::forward, 0, -1}, {K::send_grad, 0, 0}},
  };
  CHECK_THROWS_AS(simulate(lists), DeadlockError);
  CHECK_THROWS_WITH(simulate(lists), Catch::Contains("deadlock") &&
                                         Catch::Contains("stage 0 instruction 0 (recv_grad mb 0 "
                                                         "from stage 1)") &&
                                         Catch::Contains("stage 1 instruction 0"));
}

TEST_CASE("inconsistent instruction lists are rejected with the place", "[pipeline]") {
  using K = OpKind;
  SECTION("receives in another order than the sends") {
    const Lists lists = {
        {{K::forward, 0, -1},
         {K::send_activation, 0, 1},
         {K::forward, 1, -1},
         {K::send_activation, 1, 1}},
        {{K::recv_activation, 1, 0}, {K::recv_activation, 0, 0}},
    };
    CHECK_THROWS_WITH(simulate(lists), Catch::Contains("same order"));
  }
  SECTION("a send nobody receives") {
    const Lists lists = {{{K::forward, 0, -1}, {K::send_activation, 0, 1}}, {}};
    CHECK_THROWS_AS(simulate(lists), ScheduleError);
    CHECK_THROWS_WITH(simulate(lists), Catch::Contains("never receives"));
  }
  SECTION("a backward before its forward") {
    const Lists lists = {{{K::backward, 0, -1}, {K::forward, 0, -1}}};
    CHECK_THROWS_WITH(simulate(lists), Catch::Contains("backward without"));
  }
  SECTION("a peer outside the pipeline") {
    const Lists lists = {{{K::send_activation, 0, 3}}};
    CHECK_THROWS_WITH(simulate(lists), Catch::Contains("out of range"));
  }
}

TEST_CASE("the timeline draws one cell per time unit", "[pipeline]") {
  const TimelineText gpipe = draw_timeline(simulate(ScheduleKind::gpipe, 2, 2));
  CHECK(gpipe.cells_total == 9);
  CHECK(gpipe.cells_drawn == 9);
  CHECK(gpipe.text ==
        "stage 0 | F0 F1 .. .. .. B0 -- B1 -- |\n"
        "stage 1 | .. F0 F1 B0 -- B1 -- .. .. |\n");

  const TimelineText one = draw_timeline(simulate(ScheduleKind::one_f_one_b, 2, 3));
  CHECK(one.text ==
        "stage 0 | F0 F1 .. .. B0 -- F2 B1 -- .. B2 -- |\n"
        "stage 1 | .. F0 B0 -- F1 B1 -- F2 B2 -- .. .. |\n");

  // Two-digit micro-batches widen every cell; a long schedule is cut with '>'.
  const TimelineText cut = draw_timeline(simulate(ScheduleKind::gpipe, 1, 12), 1, 5);
  CHECK(cut.cells_total == 36);
  CHECK(cut.cells_drawn == 5);
  CHECK(cut.text == "stage 0 | F0  F1  F2  F3  F4  >\n");
}
