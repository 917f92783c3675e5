#include <catch2/catch.hpp>

#include <stdexcept>
#include <vector>

#include "parallel/comm_queue.h"

using trainctl::parallel::CommQueue;

TEST_CASE("CommQueue runs tasks in submission order and waits by ticket", "[parallel]") {
  CommQueue queue;
  std::vector<int> ran;  // written by the queue's thread only: read after wait_all()
  std::vector<char> done(5, 0);
  int64_t third = 0;
  for (int i = 0; i < 5; ++i) {
    const int64_t ticket = queue.submit([&ran, &done, i] {
      ran.push_back(i);
      done[static_cast<size_t>(i)] = 1;
    });
    CHECK(ticket == i + 1);
    if (i == 2) third = ticket;
  }
  queue.wait(third);
  CHECK(done[2] == 1);  // written before task 2 completed; tasks 3, 4 write other bytes
  queue.wait_all();
  CHECK(ran == std::vector<int>{0, 1, 2, 3, 4});
  const CommQueue::Times t = queue.times();
  CHECK(t.tasks == 5);
  CHECK(t.busy_s >= 0.0);
  queue.reset_times();
  CHECK(queue.times().tasks == 0);
}

TEST_CASE("CommQueue rethrows a task's error at every later wait and skips what follows",
          "[parallel]") {
  CommQueue queue;
  bool later_ran = false;
  queue.submit([] { throw std::runtime_error("allgather on group dp[0] failed: peer gone"); });
  const int64_t later = queue.submit([&later_ran] { later_ran = true; });
  CHECK_THROWS_WITH(queue.wait(later), "allgather on group dp[0] failed: peer gone");
  CHECK_THROWS_AS(queue.wait_all(), std::runtime_error);
  CHECK_FALSE(later_ran);
}
