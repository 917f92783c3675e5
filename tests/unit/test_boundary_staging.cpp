// The gradient staging pool (parallel/boundary_staging.h): the fewest buffers with which every
// schedule's step finishes, found by running all stages' lists together; a list that
// receives out of order deadlocks with too few, and Llama 3 405B's interleaved stage needs
// a handful, not 64. (The executor runs every schedule with its pool in the pipeline
// layout tests: too small a pool would hang them.)
#include <catch2/catch.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "parallel/boundary_staging.h"

using namespace trainctl;
using parallel::ScheduleKind;

namespace {

struct Case {
  ScheduleKind kind;
  int stages, micro_batches, virtual_stages;
};

// The smallest pool that finishes, by trying 1, 2, ... in turn.
int fewest_that_finish(const Case& c) {
  const auto lists =
      parallel::make_all_schedules(c.kind, c.stages, c.micro_batches, c.virtual_stages);
  for (int pool = 1;; ++pool) {
    if (parallel::finishes_with_pool(lists, parallel::chunk_order(c.kind), pool)) return pool;
  }
}

int unbounded(const Case& c) {
  int most = 0;
  for (const auto& list :
       parallel::make_all_schedules(c.kind, c.stages, c.micro_batches, c.virtual_stages)) {
    most = std::max(most, parallel::grad_staging_buffers(list));
  }
  return most;
}

}  // namespace

TEST_CASE("grad staging: the pool is one more than the fewest buffers that finish",
          "[parallel][pipeline]") {
  const Case cases[] = {
      {ScheduleKind::gpipe, 4, 8, 1},        {ScheduleKind::one_f_one_b, 2, 4, 1},
      {ScheduleKind::one_f_one_b, 4, 16, 1}, {ScheduleKind::interleaved, 2, 4, 2},
      {ScheduleKind::interleaved, 4, 8, 3},  {ScheduleKind::zb1p, 4, 8, 1},
      {ScheduleKind::zbv, 2, 4, 2},          {ScheduleKind::zbv, 4, 8, 2},
  };
  for (const Case& c : cases) {
    INFO(parallel::to_string(c.kind)
         << " pp " << c.stages << " m " << c.micro_batches << " v " << c.virtual_stages);
    const int fewest = fewest_that_finish(c);
    const int pool =
        parallel::boundary_staging_pool(c.kind, c.stages, c.micro_batches, c.virtual_stages);
    CHECK(pool == std::min(fewest + 1, unbounded(c)));
    CHECK(pool >= 1);
    const auto lists =
        parallel::make_all_schedules(c.kind, c.stages, c.micro_batches, c.virtual_stages);
    // Monotone: every pool from the fewest up finishes (bisection relies on it).
    for (int more = fewest; more <= unbounded(c); ++more) {
      CHECK(parallel::finishes_with_pool(lists, parallel::chunk_order(c.kind), more));
    }
  }
  CHECK(parallel::boundary_staging_pool(ScheduleKind::one_f_one_b, 1, 8, 1) == 0);
}

TEST_CASE("grad staging: a receiver that takes gradients out of order needs two buffers",
          "[parallel][pipeline]") {
  // Stage 1 sends the gradients of micro-batches 0 and 1; stage 0 receives 1 first. With one
  // buffer, stage 1 must wait for its send of 0 to complete before it can stage 1, while
  // stage 0 waits for 1: a deadlock the run must find, and two buffers avoid.
  using parallel::Instruction;
  using parallel::OpKind;
  const std::vector<std::vector<Instruction>> lists = {
      {{OpKind::recv_grad, 1, 1},
       {OpKind::backward, 1, -1},
       {OpKind::recv_grad, 0, 1},
       {OpKind::backward, 0, -1},
       {OpKind::optimizer_step, -1, -1}},
      {{OpKind::backward, 0, -1},
       {OpKind::send_grad, 0, 0},
       {OpKind::backward, 1, -1},
       {OpKind::send_grad, 1, 0},
       {OpKind::optimizer_step, -1, -1}},
  };
  CHECK(parallel::grad_staging_buffers(lists[1]) == 2);
  CHECK_FALSE(parallel::finishes_with_pool(lists, model::ChunkOrder::looped, 1));
  CHECK(parallel::finishes_with_pool(lists, model::ChunkOrder::looped, 2));
  // A send no one receives is a broken list, not a deadlock.
  std::vector<std::vector<Instruction>> unmatched = lists;
  unmatched[0].erase(unmatched[0].begin() + 2);
  CHECK_THROWS_AS(parallel::finishes_with_pool(unmatched, model::ChunkOrder::looped, 2),
                  std::logic_error);
}

TEST_CASE("grad staging: Llama 3 405B's interleaved stage keeps a few buffers, not 2 x m",
          "[parallel][pipeline]") {
  // pp 16, 2 chunks a stage, 32 micro-batches a step (global batch 2048 over dp 64): one
  // buffer per gradient sent would be 64 of 512 MiB each (fp32 [8192, 16384]).
  const Case meta{ScheduleKind::interleaved, 16, 32, 2};
  CHECK(unbounded(meta) == 64);
  const int pool = parallel::boundary_staging_pool(meta.kind, meta.stages, meta.micro_batches,
                                                   meta.virtual_stages);
  CHECK(pool <= 4);
}
