#include <catch2/catch.hpp>
#include <stdexcept>
#include <vector>

#include "model/parameters.h"
#include "ps/shard_plan.h"

using trainctl::model::ParamSpec;
using trainctl::ps::plan_shards;
using trainctl::ps::ServerShard;

namespace {

std::vector<ParamSpec> specs_of(const std::vector<int64_t>& sizes) {
  std::vector<ParamSpec> specs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ParamSpec s;
    s.name = "p" + std::to_string(i);
    s.shard.global_shape = {sizes[i]};
    specs.push_back(s);
  }
  return specs;
}

// Every parameter in exactly one shard, shards in order and contiguous, ranges matching
// the flat layout, and no shard more than one parameter above an even split.
void check_plan(const std::vector<int64_t>& sizes, int servers) {
  const auto specs = specs_of(sizes);
  const auto offsets = trainctl::model::flat_offsets(specs);
  const std::vector<ServerShard> plan = plan_shards(specs, servers);
  REQUIRE(plan.size() == static_cast<size_t>(servers));
  int64_t total = 0, largest_param = 0;
  for (int64_t n : sizes) {
    total += n;
    largest_param = std::max(largest_param, n);
  }
  size_t next = 0;
  for (const ServerShard& s : plan) {
    CHECK(s.first_param == next);
    REQUIRE(s.last_param > s.first_param);  // at least one parameter each
    CHECK(s.begin == offsets[s.first_param]);
    CHECK(s.end == offsets[s.last_param - 1] + sizes[s.last_param - 1]);
    int64_t numel = 0;
    for (size_t i = s.first_param; i < s.last_param; ++i) numel += sizes[i];
    INFO("servers " << servers << ", shard " << s.first_param << ".." << s.last_param);
    CHECK(static_cast<double>(numel) <=
          static_cast<double>(total) / servers + static_cast<double>(largest_param));
    next = s.last_param;
  }
  CHECK(next == sizes.size());
}

}  // namespace

TEST_CASE("plan_shards: contiguous runs of whole parameters, balanced by size", "[ps]") {
  check_plan({100}, 1);
  check_plan({10, 10, 10, 10}, 4);
  check_plan({10, 10, 10, 10}, 2);
  check_plan({1, 1000, 1, 1, 1}, 3);
  check_plan({1000, 1, 1, 1, 1}, 5);
  check_plan({1, 1, 1, 1, 1000}, 2);
  check_plan({768 * 50257, 1024 * 768, 768, 768, 768 * 2304, 2304, 768 * 768, 768}, 3);
  std::vector<int64_t> sizes;
  for (int i = 0; i < 40; ++i) sizes.push_back(1 + (i * 7919) % 513);
  for (int s = 1; s <= 40; ++s) check_plan(sizes, s);

  // Equal parameters split evenly.
  const auto even = plan_shards(specs_of({16, 16, 16, 16}), 2);
  CHECK(even[0].last_param == 2);
  CHECK(even[1].begin == 32);
  CHECK(even[1].floats() == 32);
}

TEST_CASE("plan_shards: a server with nothing to hold is refused", "[ps]") {
  CHECK_THROWS_AS(plan_shards(specs_of({1, 2}), 3), std::invalid_argument);
  CHECK_THROWS_AS(plan_shards(specs_of({1, 2}), 0), std::invalid_argument);
  CHECK_THROWS_AS(plan_shards(specs_of({}), 1), std::invalid_argument);
}
