// Pipeline schedules as instruction lists: their structure (forward before backward, sends
// paired with receives in order), their simulated bubble and activation memory against the
// closed forms, deadlock detection, and the text timeline of `trainctl plan`.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <tuple>

#include "parallel/pipeline_schedule.h"
#include "plan/pipeline_simulate.h"
#include "plan/pipeline_timeline.h"
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

// A pipeline shape to check: p stages, m micro-batches, V chunks per stage.
struct Shape {
  ScheduleKind kind;
  int p;
  int m;
  int v;
};

// gpipe and 1f1b for 1..4 stages and 1..8 micro-batches; interleaved for 2..5 stages, 2..4
// chunks and 1..4 groups of p micro-batches.
std::vector<Shape> all_shapes() {
  std::vector<Shape> shapes;
  for (ScheduleKind kind : kKinds) {
    for (int p = 1; p <= 4; ++p) {
      for (int m = 1; m <= 8; ++m) shapes.push_back({kind, p, m, 1});
    }
  }
  for (int p = 2; p <= 5; ++p) {
    for (int v = 2; v <= 4; ++v) {
      for (int m = p; m <= 4 * p; m += p) shapes.push_back({ScheduleKind::interleaved, p, m, v});
    }
  }
  return shapes;
}

// (sender, receiver, carries gradients, micro-batch, receiving virtual stage) of every send,
// or of every receive, over all stages: the engine's message identities.
using MessageSet = std::multiset<std::tuple<int, int, bool, int, int>>;

MessageSet messages(const Lists& lists, bool sends) {
  const int p = static_cast<int>(lists.size());
  MessageSet out;
  for (int s = 0; s < p; ++s) {
    for (const Instruction& i : lists[s]) {
      const int v = i.chunk * p + s;
      if (sends && i.kind == OpKind::send_activation) {
        out.insert({s, i.peer_stage, false, i.micro_batch, v + 1});
      } else if (sends && i.kind == OpKind::send_grad) {
        out.insert({s, i.peer_stage, true, i.micro_batch, v - 1});
      } else if (!sends && i.kind == OpKind::recv_activation) {
        out.insert({i.peer_stage, s, false, i.micro_batch, v});
      } else if (!sends && i.kind == OpKind::recv_grad) {
        out.insert({i.peer_stage, s, true, i.micro_batch, v});
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("schedule names parse and print as in the job spec", "[pipeline]") {
  CHECK(parse_schedule_kind("gpipe") == ScheduleKind::gpipe);
  CHECK(parse_schedule_kind("1f1b") == ScheduleKind::one_f_one_b);
  CHECK(std::string(to_string(ScheduleKind::one_f_one_b)) == "1f1b");
  CHECK(std::string(to_string(ScheduleKind::gpipe)) == "gpipe");
  CHECK(parse_schedule_kind("interleaved") == ScheduleKind::interleaved);
  CHECK(std::string(to_string(ScheduleKind::interleaved)) == "interleaved");
  CHECK_THROWS_AS(parse_schedule_kind("zigzag"), trainctl::InputError);
  CHECK_THROWS_WITH(parse_schedule_kind("1F1B"),
                    Catch::Contains("gpipe, 1f1b, interleaved or zb1p"));
}

TEST_CASE("make_schedule rejects impossible shapes", "[pipeline]") {
  CHECK_THROWS_AS(make_schedule(ScheduleKind::gpipe, 0, 0, 4), std::invalid_argument);
  CHECK_THROWS_AS(make_schedule(ScheduleKind::gpipe, 2, 2, 4), std::invalid_argument);
  CHECK_THROWS_AS(make_schedule(ScheduleKind::one_f_one_b, -1, 2, 4), std::invalid_argument);
  CHECK_THROWS_AS(make_schedule(ScheduleKind::one_f_one_b, 0, 2, 0), std::invalid_argument);
  CHECK_THROWS_AS(make_all_schedules(ScheduleKind::gpipe, 0, 4), std::invalid_argument);
  // Chunks per stage: one for gpipe and 1f1b, several for interleaved.
  CHECK_THROWS_WITH(make_schedule(ScheduleKind::one_f_one_b, 0, 2, 4, 2),
                    Catch::Contains("one chunk per stage"));
  CHECK_THROWS_AS(make_all_schedules(ScheduleKind::gpipe, 2, 4, 0), std::invalid_argument);
  CHECK_THROWS_WITH(make_schedule(ScheduleKind::interleaved, 0, 2, 4, 1),
                    Catch::Contains("virtual_stages >= 2"));
  CHECK_THROWS_WITH(make_schedule(ScheduleKind::interleaved, 0, 1, 4, 2),
                    Catch::Contains("at least 2 pipeline stages"));
  CHECK_THROWS_WITH(make_all_schedules(ScheduleKind::interleaved, 4, 6, 2),
                    Catch::Contains("multiple of") && Catch::Contains("6 micro-batches"));
  CHECK_THROWS_AS(theoretical_bubble(ScheduleKind::interleaved, 3, 4, 2), std::invalid_argument);
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

TEST_CASE("interleaved runs micro-batch groups through each chunk in turn", "[pipeline]") {
  // 2 stages, 2 chunks each (virtual stages 0 1 | 2 3 on stages 0 1 | 0 1), 2 micro-batches.
  using K = OpKind;
  // Stage 1: 2 warm-up forwards (chunk 0), then F/B pairs on chunk 1 (the last virtual
  // stage: no gradient to receive, no activation to send), then chunk 0's backwards.
  const std::vector<Instruction> stage1 = {
      {K::recv_activation, 0, 0, 0}, {K::forward, 0, -1, 0},        {K::send_activation, 0, 0, 0},
      {K::recv_activation, 1, 0, 0}, {K::forward, 1, -1, 0},        {K::send_activation, 1, 0, 0},
      {K::recv_activation, 0, 0, 1}, {K::forward, 0, -1, 1},        {K::backward, 0, -1, 1},
      {K::send_grad, 0, 0, 1},       {K::recv_activation, 1, 0, 1}, {K::forward, 1, -1, 1},
      {K::backward, 1, -1, 1},       {K::send_grad, 1, 0, 1},       {K::recv_grad, 0, 0, 0},
      {K::backward, 0, -1, 0},       {K::send_grad, 0, 0, 0},       {K::recv_grad, 1, 0, 0},
      {K::backward, 1, -1, 0},       {K::send_grad, 1, 0, 0},       {K::optimizer_step, -1, -1}};
  CHECK(make_schedule(ScheduleKind::interleaved, 1, 2, 2, 2) == stage1);
  // Stage 0 warms up with all four chunk forwards; its chunk 1 receives from stage 1.
  const std::vector<Instruction> stage0 = make_schedule(ScheduleKind::interleaved, 0, 2, 2, 2);
  REQUIRE(stage0.size() == 21);
  CHECK(stage0[4] == Instruction{K::recv_activation, 0, 1, 1});
  CHECK(stage0[5] == Instruction{K::forward, 0, -1, 1});
  CHECK(stage0[6] == Instruction{K::send_activation, 0, 1, 1});
  CHECK(stage0[10] == Instruction{K::recv_grad, 0, 1, 1});
  CHECK(stage0[11] == Instruction{K::backward, 0, -1, 1});
  CHECK(stage0[12] == Instruction{K::send_grad, 0, 1, 1});
  CHECK(stage0[19] == Instruction{K::backward, 1, -1, 0});  // virtual stage 0: nothing to send
  CHECK(describe(stage0[12]) == "send_grad mb 0 chunk 1 to stage 1");
  CHECK(warmup_forwards(ScheduleKind::interleaved, 0, 2, 2, 2) == 4);
  CHECK(warmup_forwards(ScheduleKind::interleaved, 1, 2, 2, 2) == 2);
  // Megatron's count with more micro-batches: (p - s - 1) * 2 + (V - 1) * p.
  CHECK(warmup_forwards(ScheduleKind::interleaved, 0, 4, 8, 3) == 14);
  CHECK(warmup_forwards(ScheduleKind::interleaved, 3, 4, 8, 3) == 8);
}

TEST_CASE("every schedule is well formed for many stages, micro-batches and chunks", "[pipeline]") {
  for (const Shape& shape : all_shapes()) {
    const auto [kind, p, m, v] = shape;
    INFO(to_string(kind) << " p=" << p << " m=" << m << " V=" << v);
    const Lists lists = make_all_schedules(kind, p, m, v);
    REQUIRE(lists.size() == static_cast<size_t>(p));
    const int last_virtual = p * v - 1;
    for (int s = 0; s < p; ++s) {
      INFO("stage " << s);
      const std::vector<Instruction>& list = lists[s];
      CHECK(count(list, OpKind::forward) == m * v);
      CHECK(count(list, OpKind::backward) == m * v);
      CHECK(count(list, OpKind::optimizer_step) == 1);
      CHECK(list.back().kind == OpKind::optimizer_step);

      // Each (chunk, micro-batch): exactly one forward, then exactly one backward.
      std::map<std::pair<int, int>, std::pair<int, int>> position;  // -> (forward, backward)
      for (int i = 0; i < static_cast<int>(list.size()); ++i) {
        const std::pair<int, int> key{list[i].chunk, list[i].micro_batch};
        if (list[i].kind == OpKind::forward) {
          CHECK(position.count(key) == 0);
          position[key] = {i, -1};
        }
        if (list[i].kind == OpKind::backward) {
          REQUIRE(position.count(key) == 1);
          CHECK(position[key].second == -1);
          position[key].second = i;
        }
      }
      CHECK(position.size() == static_cast<size_t>(m * v));
      for (const auto& [key, at] : position) {
        INFO("chunk " << key.first << " mb " << key.second);
        CHECK(key.first < v);
        CHECK(at.first < at.second);
      }

      // Every message sits right next to the compute op of the same chunk and micro-batch:
      // recv_activation before a forward, send_activation after it, recv_grad before a
      // backward, send_grad after it; activations go to virtual stage + 1 on the next stage
      // (wrapping to stage 0 for the next chunk), gradients the other way.
      int messages_here = 0;
      for (int i = 0; i < static_cast<int>(list.size()); ++i) {
        const Instruction& in = list[i];
        if (!is_compute(in.kind)) continue;
        const int vs = in.chunk * p + s;
        const bool fwd = in.kind == OpKind::forward;
        const bool has_before = fwd ? vs > 0 : vs < last_virtual;
        const bool has_after = fwd ? vs < last_virtual : vs > 0;
        const int before_peer = fwd ? (s + p - 1) % p : (s + 1) % p;
        const int after_peer = fwd ? (s + 1) % p : (s + p - 1) % p;
        if (has_before) {
          REQUIRE(i > 0);
          CHECK(list[i - 1] == Instruction{fwd ? OpKind::recv_activation : OpKind::recv_grad,
                                           in.micro_batch, before_peer, in.chunk});
          ++messages_here;
        }
        if (has_after) {
          CHECK(list[i + 1] == Instruction{fwd ? OpKind::send_activation : OpKind::send_grad,
                                           in.micro_batch, after_peer, in.chunk});
          ++messages_here;
        }
      }
      CHECK(messages_here + 2 * m * v + 1 == static_cast<int>(list.size()));  // nothing else
      if (v == 1 && p > 1) {
        // Communication only with neighbours, and none beyond the ends.
        for (const Instruction& i : list) {
          if (!is_compute(i.kind) && i.kind != OpKind::optimizer_step) {
            CHECK((i.peer_stage == s - 1 || i.peer_stage == s + 1));
          }
        }
      }
    }
    // Every send has its receive and the other way round.
    const MessageSet sent = messages(lists, true);
    CHECK(sent == messages(lists, false));
    CHECK(sent.size() == static_cast<size_t>(2 * m * last_virtual));
    if (kind != ScheduleKind::interleaved) {
      // Receives come in the order of the sends between each pair of neighbours.
      for (int s = 0; s + 1 < p; ++s) {
        CHECK(traffic(lists[s], OpKind::send_activation, s + 1) ==
              traffic(lists[s + 1], OpKind::recv_activation, s));
        CHECK(traffic(lists[s], OpKind::recv_grad, s + 1) ==
              traffic(lists[s + 1], OpKind::send_grad, s));
      }
    }
    CHECK_NOTHROW(simulate(lists));
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

TEST_CASE("interleaved: bubble (p-1)/(V*m+p-1), at most warm-up + 1 chunk activations",
          "[pipeline]") {
  for (const Shape& shape : all_shapes()) {
    if (shape.kind != ScheduleKind::interleaved) continue;
    const auto [kind, p, m, v] = shape;
    INFO("p=" << p << " m=" << m << " V=" << v);
    const double formula = static_cast<double>(p - 1) / (v * m + p - 1);
    CHECK(theoretical_bubble(kind, p, m, v) == Approx(formula));
    for (auto [fwd, bwd] : {std::pair{1.0, 1.0}, std::pair{1.0, 2.0}}) {
      INFO("forward " << fwd << " backward " << bwd);
      Simulation sim;
      REQUIRE_NOTHROW(sim = simulate(kind, p, m, fwd, bwd, v));
      CHECK(sim.virtual_stages == v);
      CHECK(sim.stats.bubble_fraction == Approx(formula).margin(1e-12));
      // The fill and drain take one chunk's forward + backward per further stage.
      CHECK(sim.makespan == Approx((m + static_cast<double>(p - 1) / v) * (fwd + bwd)));
      // V times smaller fill than 1F1B's on the same pipeline.
      CHECK(sim.stats.bubble_fraction <
            simulate(ScheduleKind::one_f_one_b, p, m, fwd, bwd).stats.bubble_fraction);
    }
    const Simulation sim = simulate(kind, p, m, 1, 2, v);
    int peak = 0;
    for (int s = 0; s < p; ++s) {
      INFO("stage " << s);
      const StageTimeline& t = sim.stages[s];
      CHECK(t.spans.size() == static_cast<size_t>(2 * m * v));
      CHECK(t.busy_time == Approx(3.0 * m));  // each chunk costs 1/V of the stage
      // Megatron's bound: the warm-up forwards, plus one of the steady state's.
      const int warmup = warmup_forwards(kind, s, p, m, v);
      CHECK(warmup == std::min((p - s - 1) * 2 + (v - 1) * p, m * v));
      CHECK(t.peak_activations == std::min(warmup + 1, m * v));
      peak = std::max(peak, t.peak_activations);
      for (size_t i = 1; i < t.spans.size(); ++i) {
        CHECK(t.spans[i].start >= t.spans[i - 1].end);
      }
    }
    CHECK(sim.stats.peak_activations == peak);
    // Stage 0 holds at most (p - 1) * 2 + (V - 1) * p + 1 chunks: each 1/V of its layers,
    // that is about (1 + (p - 2) / (p * V)) times 1F1B's p micro-batches' worth.
    CHECK(peak <= std::min((p - 1) * 2 + (v - 1) * p + 1, m * v));
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

TEST_CASE("receives match messages by identity, in any order", "[pipeline]") {
  using K = OpKind;
  // As the engine's tagged receives: stage 1 takes mb 1 first although mb 0 was sent first.
  const Lists lists = {
      {{K::forward, 0, -1},
       {K::send_activation, 0, 1},
       {K::forward, 1, -1},
       {K::send_activation, 1, 1}},
      {{K::recv_activation, 1, 0},
       {K::forward, 1, -1},
       {K::recv_activation, 0, 0},
       {K::forward, 0, -1}},
  };
  const Simulation sim = simulate(lists, 1, 1);
  REQUIRE(sim.stages[1].spans.size() == 2);
  CHECK(sim.stages[1].spans[0].micro_batch == 1);
  CHECK(sim.stages[1].spans[0].start == Approx(2.0));
  CHECK(sim.stages[1].spans[1].start == Approx(3.0));
}

TEST_CASE("inconsistent instruction lists are rejected with the place", "[pipeline]") {
  using K = OpKind;
  SECTION("a peer that does not hold the neighbouring virtual stage") {
    const Lists lists = {{{K::forward, 0, -1}, {K::send_activation, 0, 2}}, {}, {}};
    CHECK_THROWS_WITH(simulate(lists), Catch::Contains("virtual stage 1 is on stage 1"));
  }
  SECTION("an activation sent beyond the last virtual stage") {
    const Lists lists = {{}, {{K::forward, 0, -1}, {K::send_activation, 0, 0}}};
    CHECK_THROWS_WITH(simulate(lists), Catch::Contains("has no neighbour 2"));
  }
  SECTION("the same message sent twice") {
    const Lists lists = {{{K::send_activation, 0, 1}, {K::send_activation, 0, 1}}, {}};
    CHECK_THROWS_WITH(simulate(lists), Catch::Contains("twice"));
  }
  SECTION("a backward of another chunk than the forward") {
    const Lists lists = {{{K::forward, 0, -1, 0}, {K::backward, 0, -1, 1}}};
    CHECK_THROWS_WITH(simulate(lists), Catch::Contains("backward without"));
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

  // Interleaved: each cell is one chunk's forward (costs V, 2V per stage make it 1 unit),
  // labelled with its chunk letter.
  const TimelineText inter = draw_timeline(simulate(ScheduleKind::interleaved, 2, 2, 2, 4, 2));
  CHECK(inter.cells_total == 15);
  CHECK(inter.text ==
        "stage 0 | F0a F1a F0b F1b ... ... B0b --- ... B1b --- B0a --- B1a --- |\n"
        "stage 1 | ... F0a F1a F0b B0b --- F1b B1b --- B0a --- B1a --- ... ... |\n");
  CHECK(chunk_suffix(0, 1).empty());
  CHECK(chunk_suffix(2, 3) == "c");
  CHECK(chunk_suffix(27, 30) == ".27");
}
