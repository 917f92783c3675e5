#include <catch2/catch.hpp>

#include "config/number_text.h"
#include "config/suggest.h"

using namespace trainctl::config::detail;

TEST_CASE("config: edit distance and did-you-mean", "[config]") {
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("1F1B", "1f1b") == 0);
  const std::vector<std::string> keys = {"steps", "micro_batch_size", "global_batch_size"};
  CHECK(closest_match("step", keys) == "steps");
  CHECK(closest_match("global_batchsize", keys) == "global_batch_size");
  CHECK(closest_match("epochs", keys).empty());
  CHECK(closest_match("size_batch_micro", keys) == "micro_batch_size");
  CHECK(closest_match("GPU", {"cpu", "cuda"}, {{"gpu", "cuda"}}) == "cuda");
  CHECK(did_you_mean("stpes", keys) == " Did you mean `steps`?");
  CHECK(did_you_mean("zzz", keys).empty());
  CHECK(join({"a", "b"}) == "a, b");
}

TEST_CASE("config: numbers read back exactly as written", "[config]") {
  for (double v : {0.1, 3e-4, 1e-8, 300.0, 0.95, 1.0 / 3.0, 12.25}) {
    CHECK(parse_real(format_real(v)) == v);
  }
  CHECK(parse_integer("+4") == 4);
  CHECK(parse_integer("-3") == -3);
  CHECK_FALSE(parse_integer("1.0"));
  CHECK_FALSE(parse_integer("1e3"));
  CHECK_FALSE(parse_integer("+-1"));
  CHECK_FALSE(parse_integer(""));
  CHECK_FALSE(parse_unsigned("-1"));
  CHECK(parse_unsigned("18446744073709551615") == 18446744073709551615ULL);
  CHECK_FALSE(parse_real("fast"));
  CHECK(parse_real("2") == 2.0);
}
