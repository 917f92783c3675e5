// Epochs (data/epoch_order.h): each epoch visits every sequence of a split exactly once, in
// an order that changes with the epoch and the seed, as a pure function of the sample index.
#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/epoch_order.h"
#include "data/token_file.h"
#include "test_scratch.h"

using namespace trainctl;
using namespace trainctl::data;

TEST_CASE("keyed_permutation is a bijection of 0..n-1 for any n", "[data][epochs]") {
  for (uint64_t n : {1ull, 2ull, 3ull, 5ull, 16ull, 17ull, 1000ull, 4097ull}) {
    std::set<uint64_t> seen;
    for (uint64_t x = 0; x < n; ++x) {
      const uint64_t y = keyed_permutation(x, n, 42);
      REQUIRE(y < n);
      seen.insert(y);
    }
    CHECK(seen.size() == n);
  }
  // Another key, another order.
  std::vector<uint64_t> a, b;
  for (uint64_t x = 0; x < 100; ++x) {
    a.push_back(keyed_permutation(x, 100, 1));
    b.push_back(keyed_permutation(x, 100, 2));
  }
  CHECK(a != b);
}

TEST_CASE("every epoch visits each sequence once, each epoch in a new order", "[data][epochs]") {
  const uint64_t n = 37;
  std::vector<std::vector<uint64_t>> orders(3);
  for (uint64_t i = 0; i < 3 * n; ++i) {
    const EpochSample s = epoch_sample(i, n, 7, 0x7a11);
    REQUIRE(s.epoch == i / n);
    orders[s.epoch].push_back(s.sequence);
  }
  for (const auto& order : orders) {
    CHECK(std::set<uint64_t>(order.begin(), order.end()).size() == n);
  }
  CHECK(orders[0] != orders[1]);
  CHECK(orders[1] != orders[2]);
  // Another seed shuffles differently.
  const bool reordered =
      epoch_sample(0, n, 8, 0x7a11).sequence != epoch_sample(0, n, 7, 0x7a11).sequence ||
      epoch_sample(1, n, 8, 0x7a11).sequence != epoch_sample(1, n, 7, 0x7a11).sequence;
  CHECK(reordered);
}

TEST_CASE("a token file's epoch: every sequence of seq_len + 1 tokens once, then again",
          "[data][epochs]") {
  test::ScratchDir dir("epochs");
  // Token t at position t: a window's first token says where it starts.
  std::vector<int32_t> ids(1001);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  write_token_file(dir.path / "t.bin", ids.data(), ids.size(), 2000);
  DatasetOptions o;
  o.type = "tokens";
  o.path = dir.path / "t.bin";
  o.vocab_size = 2000;
  o.seq_len = 10;
  o.val_fraction = 0.1;  // 900 training tokens (positions 0..899): 89 sequences
  o.seed = 3;
  const auto ds = make_dataset(o);
  REQUIRE(ds->epoch_size() == 89);
  std::vector<int32_t> x(10), y(10);
  for (uint64_t epoch = 0; epoch < 2; ++epoch) {
    std::set<int32_t> starts;
    for (uint64_t i = 0; i < 89; ++i) {
      ds->sample(Split::train, epoch * 89 + i, x.data(), y.data());
      REQUIRE(x[0] % 10 == 0);  // sequences start every seq_len tokens
      REQUIRE(y[9] == x[0] + 10);
      REQUIRE(y[9] < 900);  // inside the training split
      starts.insert(x[0]);
    }
    CHECK(starts.size() == 89);
  }
  // The same index, the same sample: nothing depends on what was drawn before.
  std::vector<int32_t> x2(10), y2(10);
  ds->sample(Split::train, 100, x.data(), y.data());
  const auto again = make_dataset(o);
  again->sample(Split::train, 100, x2.data(), y2.data());
  CHECK(x == x2);
}
