// The zero-bubble schedule zb1p (parallel/zero_bubble_schedule.h) and the B/W split of the
// model's backward it runs on (model/deferred_weight_grads.h): the lists are consistent
// and reach ZB-H1's bubble at 1F1B's peak memory; a backward split into B and W gives the
// same gradients, to the bit, and reports the gradient pieces only when W has made them
// final.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "parallel/pipeline_executor.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/zero_bubble_schedule.h"
#include "plan/pipeline_simulate.h"
#include "plan/pipeline_timeline.h"
#include "util/random.h"

using namespace trainctl;
using parallel::Instruction;
using parallel::OpKind;
using parallel::ScheduleKind;

namespace {

int count(const std::vector<Instruction>& list, OpKind kind) {
  return static_cast<int>(std::count_if(list.begin(), list.end(),
                                        [&](const Instruction& i) { return i.kind == kind; }));
}

// The micro-batches of `kind` in list order.
std::vector<int> order_of(const std::vector<Instruction>& list, OpKind kind) {
  std::vector<int> mbs;
  for (const Instruction& i : list) {
    if (i.kind == kind) mbs.push_back(i.micro_batch);
  }
  return mbs;
}

std::vector<int> iota(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

}  // namespace

TEST_CASE("zb1p is spelled zb1p and runs one chunk per stage", "[pipeline][zero_bubble]") {
  CHECK(parallel::parse_schedule_kind("zb1p") == ScheduleKind::zb1p);
  CHECK(std::string(parallel::to_string(ScheduleKind::zb1p)) == "zb1p");
  CHECK_THROWS_AS(parallel::make_schedule(ScheduleKind::zb1p, 0, 2, 4, 2), std::invalid_argument);
  CHECK(parallel::describe({OpKind::backward_weight, 3, -1, 0}) == "backward_weight mb 3");
  CHECK(parallel::is_compute(OpKind::backward_input));
  CHECK(parallel::is_compute(OpKind::backward_weight));
}

TEST_CASE("zb1p lists: F, B, W of every micro-batch in order, messages around B only",
          "[pipeline][zero_bubble]") {
  for (int p = 1; p <= 5; ++p) {
    for (int m = 1; m <= 12; ++m) {
      INFO("p " << p << " m " << m);
      const auto lists = parallel::make_all_schedules(ScheduleKind::zb1p, p, m);
      for (int s = 0; s < p; ++s) {
        const auto& list = lists[static_cast<size_t>(s)];
        CHECK(count(list, OpKind::backward) == 0);
        CHECK(order_of(list, OpKind::forward) == iota(m));
        CHECK(order_of(list, OpKind::backward_input) == iota(m));
        CHECK(order_of(list, OpKind::backward_weight) == iota(m));
        CHECK(count(list, OpKind::send_grad) == (s > 0 ? m : 0));
        CHECK(count(list, OpKind::recv_grad) == (s + 1 < p ? m : 0));
        CHECK(parallel::warmup_forwards(ScheduleKind::zb1p, s, p, m) == std::min(p - 1 - s, m));
        for (size_t i = 0; i < list.size(); ++i) {
          // A send_grad follows its B directly; a W is never between a recv_grad and its B.
          if (list[i].kind == OpKind::send_grad) {
            CHECK(list[i - 1].kind == OpKind::backward_input);
          }
          if (list[i].kind == OpKind::recv_grad) {
            CHECK(list[i + 1].kind == OpKind::backward_input);
          }
        }
        CHECK(list.back().kind == OpKind::optimizer_step);
      }
      // Consistent (sends pair with receives, B before W, no deadlock): simulate() checks.
      const parallel::Simulation sim = parallel::simulate(lists, 1, 2);
      // 1F1B's peak memory: no stage holds more micro-batches from F to W than 1F1B's first
      // stage holds from F to its backward.
      CHECK(sim.stats.peak_activations ==
            parallel::simulate(ScheduleKind::one_f_one_b, p, m).stats.peak_activations);
    }
  }
}

TEST_CASE("zb1p reaches ZB-H1's bubble, at most half of 1F1B's", "[pipeline][zero_bubble]") {
  for (int p = 2; p <= 6; ++p) {
    for (int m = p; m <= 4 * p; ++m) {
      INFO("p " << p << " m " << m);
      // F, B and W one unit each.
      const double zb = parallel::simulate(ScheduleKind::zb1p, p, m, 1, 2).stats.bubble_fraction;
      const double one =
          parallel::simulate(ScheduleKind::one_f_one_b, p, m, 1, 2).stats.bubble_fraction;
      CHECK(zb == Approx(parallel::theoretical_bubble(ScheduleKind::zb1p, p, m)));
      CHECK(zb == Approx((p - 1.0) / (3.0 * m + p - 1)));
      CHECK(zb <= 0.5 * one);
    }
  }
}

TEST_CASE("plan's timeline draws B and W of zb1p", "[pipeline][zero_bubble]") {
  const parallel::TimelineText t =
      parallel::draw_timeline(parallel::simulate(ScheduleKind::zb1p, 2, 3, 1, 2));
  CHECK(t.text ==
        "stage 0 | F0 F1 .. B0 W0 F2 B1 W1 B2 W2 |\n"
        "stage 1 | .. F0 B0 F1 B1 W0 F2 B2 W1 W2 |\n");
}

TEST_CASE("the executor keeps one activation slot per micro-batch from F to W",
          "[pipeline][zero_bubble]") {
  // W reads the linear layers' inputs in the slot, so a slot is free after W: 1F1B's peak of
  // 4 on stage 0, and on the last stage too (its Ws held back three rounds), as the
  // simulator's peak activations count them. 1F1B frees after its undivided backward.
  for (int stage = 0; stage < 4; ++stage) {
    INFO("stage " << stage);
    const auto zb = parallel::make_schedule(ScheduleKind::zb1p, stage, 4, 8);
    CHECK(parallel::activation_slots_needed(zb) == 4);
    CHECK(parallel::activation_slots_needed(zb) == parallel::simulate(ScheduleKind::zb1p, 4, 8)
                                                       .stages[static_cast<size_t>(stage)]
                                                       .peak_activations);
  }
  CHECK(parallel::activation_slots_needed(
            parallel::make_schedule(ScheduleKind::one_f_one_b, 3, 4, 8)) == 1);
}

namespace {

model::ModelConfig small(model::Family family) {
  model::ModelConfig c;
  c.vocab_size = 19;
  c.max_seq_len = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 16;
  if (family == model::Family::llama) {
    c.family = family;
    c.n_head = 4;
    c.n_kv_head = 2;
    c.ffn_hidden = 24;
    c.tie_embeddings = false;
  }
  return c;
}

constexpr int kB = 2, kT = 8;

struct Result {
  std::vector<float> grads;
  std::vector<int> pieces;  // reported, in order
  size_t pieces_after_backwards = 0;
};

// Two micro-batches through the whole model: forwards in slots 0 and 1, then both
// backwards (the second one final), each split into B and W when `split`.
Result two_micro_batches(model::Family family, model::Recompute mode, bool split) {
  auto be = ops::make_cpu_backend({});
  model::GptOptions options;
  options.recompute = mode;
  options.slots = 2;
  model::Gpt gpt(small(family), *be, kB, kT, options);
  gpt.init_weights(11);
  Result r;
  gpt.set_grad_ready_hook([&](int piece) { r.pieces.push_back(piece); });
  std::vector<int32_t> x(kB * kT), y(kB * kT);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<int32_t>(rng::hash(3, i) % 19);
    y[i] = static_cast<int32_t>(rng::hash(4, i) % 19);
  }
  model::ChunkLoss loss;
  gpt.forward_chunk(0, 0, x.data(), y.data(), true, 0.25f, &loss);
  gpt.forward_chunk(0, 1, y.data(), x.data(), true, 0.25f, &loss);
  model::DeferredWeightGrads w0(*be), w1(*be);
  gpt.backward_chunk(0, 0, x.data(), false, split ? &w0 : nullptr);
  gpt.backward_chunk(0, 1, y.data(), true, split ? &w1 : nullptr);
  r.pieces_after_backwards = r.pieces.size();
  CHECK(w0.empty() != split);
  w0.run();
  w1.run();
  CHECK(w1.empty());
  const float* g = gpt.params().grads();
  r.grads.assign(g, g + gpt.params().total());
  return r;
}

}  // namespace

TEST_CASE("B then W gives the gradients of an undivided backward, to the bit",
          "[model][zero_bubble]") {
  for (model::Family family : {model::Family::gpt, model::Family::llama}) {
    for (model::Recompute mode :
         {model::Recompute::none, model::Recompute::selective, model::Recompute::full}) {
      INFO(model::to_string(mode) << (family == model::Family::llama ? " llama" : " gpt"));
      const Result whole = two_micro_batches(family, mode, false);
      const Result split = two_micro_batches(family, mode, true);
      REQUIRE(whole.grads.size() == split.grads.size());
      CHECK(std::memcmp(whole.grads.data(), split.grads.data(),
                        whole.grads.size() * sizeof(float)) == 0);
      // The same pieces in the same order, but only once W has run.
      CHECK(split.pieces == whole.pieces);
      CHECK(!whole.pieces.empty());
      CHECK(whole.pieces_after_backwards == whole.pieces.size());
      CHECK(split.pieces_after_backwards == 0);
    }
  }
}
