// The zero-bubble V schedule zbv (parallel/zero_bubble_schedule.h, zero_bubble_v_order): two
// chunks per stage in V order (model::ChunkOrder::v_shape), the turn of the V handed over on
// the last stage with no message, every list consistent and deadlock-free, and a bubble
// below zb1p's at 1F1B's peak activation memory.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "model/shard.h"
#include "parallel/pipeline_executor.h"
#include "parallel/pipeline_schedule.h"
#include "plan/pipeline_simulate.h"
#include "plan/pipeline_timeline.h"

using namespace trainctl;
using model::ChunkOrder;
using parallel::Instruction;
using parallel::OpKind;
using parallel::ScheduleKind;

namespace {

// The micro-batches of `kind` on `chunk` in list order.
std::vector<int> order_of(const std::vector<Instruction>& list, OpKind kind, int chunk) {
  std::vector<int> mbs;
  for (const Instruction& i : list) {
    if (i.kind == kind && i.chunk == chunk) mbs.push_back(i.micro_batch);
  }
  return mbs;
}

std::vector<int> iota(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

int messages(const std::vector<Instruction>& list) {
  return static_cast<int>(std::count_if(list.begin(), list.end(),
                                        [](const Instruction& i) { return i.peer_stage >= 0; }));
}

}  // namespace

TEST_CASE("zbv is spelled zbv, runs 2 chunks in V order on 2 or more stages",
          "[pipeline][zero_bubble][zbv]") {
  CHECK(parallel::parse_schedule_kind("zbv") == ScheduleKind::zbv);
  CHECK(std::string(parallel::to_string(ScheduleKind::zbv)) == "zbv");
  CHECK(parallel::chunk_order(ScheduleKind::zbv) == ChunkOrder::v_shape);
  CHECK(parallel::chunk_order(ScheduleKind::interleaved) == ChunkOrder::looped);
  CHECK_THROWS_AS(parallel::make_schedule(ScheduleKind::zbv, 0, 2, 4, 1), std::invalid_argument);
  CHECK_THROWS_AS(parallel::make_schedule(ScheduleKind::zbv, 0, 2, 4, 3), std::invalid_argument);
  CHECK_THROWS_AS(parallel::make_schedule(ScheduleKind::zbv, 0, 1, 4, 2), std::invalid_argument);
}

TEST_CASE("V order: rank r holds virtual stages r and 2p-1-r, rank 0 the embedding and head",
          "[pipeline][zbv]") {
  const int p = 3;
  for (int r = 0; r < p; ++r) {
    CHECK(model::virtual_stage_of(ChunkOrder::v_shape, 0, r, p) == r);
    CHECK(model::virtual_stage_of(ChunkOrder::v_shape, 1, r, p) == 2 * p - 1 - r);
    CHECK(model::virtual_stage_of(ChunkOrder::looped, 1, r, p) == p + r);
  }
  for (int v = 0; v < 2 * p; ++v) {
    const model::ChunkPlace at = model::place_of_virtual_stage(ChunkOrder::v_shape, v, p);
    CHECK(model::virtual_stage_of(ChunkOrder::v_shape, at.chunk, at.rank, p) == v);
  }
  model::ModelConfig config;
  config.n_layer = 6;
  config.d_model = 32;
  config.n_head = 2;
  config.vocab_size = 64;
  config.max_seq_len = 16;
  const auto parts = model::partition_layers(config, 16, 2 * p);
  for (int r = 0; r < p; ++r) {
    const auto shard = model::GptShardSpec::of(config, 16, p, r, 2, 1, 0, {}, ChunkOrder::v_shape);
    REQUIRE(shard.chunks.size() == 2);
    CHECK(shard.chunks[0] == parts[static_cast<size_t>(r)]);
    CHECK(shard.chunks[1] == parts[static_cast<size_t>(2 * p - 1 - r)]);
    CHECK(shard.embedding == (r == 0));
    CHECK(shard.head == (r == 0));
    CHECK_FALSE(shard.tied_copy());  // the head and wte share rank 0: no copy to exchange
  }
  CHECK_THROWS_AS(model::GptShardSpec::of(config, 16, p, 0, 3, 1, 0, {}, ChunkOrder::v_shape),
                  std::invalid_argument);
}

TEST_CASE("zbv lists: F, B, W of each chunk in micro-batch order, no message at the V's turn",
          "[pipeline][zero_bubble][zbv]") {
  for (int p = 2; p <= 5; ++p) {
    for (int m = 1; m <= 12; ++m) {
      INFO("p " << p << " m " << m);
      const auto lists = parallel::make_all_schedules(ScheduleKind::zbv, p, m, 2);
      for (int s = 0; s < p; ++s) {
        INFO("stage " << s);
        const auto& list = lists[static_cast<size_t>(s)];
        for (int c = 0; c < 2; ++c) {
          CHECK(order_of(list, OpKind::forward, c) == iota(m));
          CHECK(order_of(list, OpKind::backward_input, c) == iota(m));
          CHECK(order_of(list, OpKind::backward_weight, c) == iota(m));
          CHECK(order_of(list, OpKind::backward, c).empty());
        }
        for (const Instruction& i : list) CHECK(i.peer_stage != s);
        // Per micro-batch and chunk: an activation in and out, a gradient in and out; none
        // past the model's ends (stage 0) nor at the V's turn (the last stage).
        CHECK(messages(list) == (s == 0 || s == p - 1 ? 4 : 8) * m);
        // Stage 0's tied embedding is final after its last W, behind every W of the head.
        const auto last_w0 = std::find_if(list.rbegin(), list.rend(), [](const Instruction& i) {
          return i.kind == OpKind::backward_weight && i.chunk == 0;
        });
        CHECK(std::none_of(list.rbegin(), last_w0, [](const Instruction& i) {
          return i.kind == OpKind::backward_weight && i.chunk == 1;
        }));
        CHECK(list.back().kind == OpKind::optimizer_step);
      }
      // Consistent and deadlock-free, the local hand-offs in order: simulate() checks.
      const parallel::Simulation sim = parallel::simulate(lists, 1, 2, ChunkOrder::v_shape);
      // 1F1B's peak activation memory: at most 2p half-stage chunks held from F to W.
      CHECK(sim.stats.peak_activations <= 2 * p);
    }
  }
}

TEST_CASE("zbv's bubble is its theory's, and below zb1p's from 2p-1 micro-batches",
          "[pipeline][zero_bubble][zbv]") {
  for (int p = 2; p <= 6; ++p) {
    for (int m = 1; m <= 4 * p; ++m) {
      INFO("p " << p << " m " << m);
      // A chunk's F, B and W one unit each (a stage's F 2, backward 4).
      const double v = parallel::simulate(ScheduleKind::zbv, p, m, 2, 4, 2).stats.bubble_fraction;
      CHECK(v == Approx(parallel::theoretical_bubble(ScheduleKind::zbv, p, m, 2)));
      if (m >= 2 * p - 1) {
        CHECK(v == Approx((p - 1.0) / (6.0 * m + p - 1)));
        CHECK(v < parallel::simulate(ScheduleKind::zb1p, p, m, 1, 2).stats.bubble_fraction);
      }
    }
  }
}

TEST_CASE("plan's timeline draws zbv's two chunks with B and W", "[pipeline][zbv]") {
  const parallel::TimelineText t =
      parallel::draw_timeline(parallel::simulate(ScheduleKind::zbv, 2, 3, 2, 4, 2));
  // Stage 1 turns the V: F0a then F0b with no message between; stage 0's last Ws are
  // chunk a's (the embedding), after every W of chunk b (the head).
  CHECK(
      t.text ==
      "stage 0 | F0a F1a F2a F0b B0b W0b F1b B1b W1b B0a W0a F2b B2b W2b B1a W1a B2a W2a ... |\n"
      "stage 1 | ... F0a F0b F1a F1b B0b W0b F2a B0a W0a F2b B1b W1b B1a B2b B2a W1a W2b W2a |\n");
}

TEST_CASE("the simulator refuses a V turn run out of order", "[pipeline][zbv]") {
  auto lists = parallel::make_all_schedules(ScheduleKind::zbv, 2, 2, 2);
  auto& last = lists[1];
  // Stage 1 runs chunk 1's forward of mb 0 right after chunk 0's: swap the two.
  const auto f0 = std::find_if(last.begin(), last.end(), [](const Instruction& i) {
    return i.kind == OpKind::forward && i.chunk == 0 && i.micro_batch == 0;
  });
  const auto f1 = std::find_if(last.begin(), last.end(), [](const Instruction& i) {
    return i.kind == OpKind::forward && i.chunk == 1 && i.micro_batch == 0;
  });
  REQUIRE(f0 != last.end());
  REQUIRE(f1 != last.end());
  std::iter_swap(f0, f1);
  CHECK_THROWS_AS(parallel::simulate(lists, 1, 2, ChunkOrder::v_shape), parallel::ScheduleError);
  // Read as looped chunks the same lists are inconsistent too (chunk 1 of stage 1 would be
  // virtual stage 3, the last).
  CHECK_THROWS_AS(parallel::simulate(parallel::make_all_schedules(ScheduleKind::zbv, 2, 2, 2)),
                  parallel::ScheduleError);
}

TEST_CASE("zbv stages its sends and its local hand-offs: the staging pool's upper bound",
          "[pipeline][zbv]") {
  // Slots: each chunk's micro-batches between F and B.
  const auto last = parallel::make_schedule(ScheduleKind::zbv, 1, 2, 4, 2);
  CHECK(parallel::activation_slots_needed(last) >= 1);
  // Chunk 0's 4 sends to stage 0 and chunk 1's 4 local hand-offs to chunk 0.
  CHECK(parallel::grad_staging_buffers(last) == 8);
  CHECK(parallel::grad_staging_buffers(parallel::make_schedule(ScheduleKind::zbv, 0, 2, 4, 2)) ==
        4);
}
