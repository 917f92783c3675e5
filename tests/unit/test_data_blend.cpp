// Blends (data/blend.h, data/blend_schedule.h): each global sample's source follows the
// weights in every prefix of the stream, independently of who asks for which sample; each
// source continues from its own position after a resume.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "data/blend.h"
#include "data/blend_schedule.h"
#include "data/token_file.h"
#include "test_scratch.h"

using namespace trainctl;
using namespace trainctl::data;

namespace {

// A token file whose ids all lie in [lo, lo + 100): a sample says which source it is from.
void write_source(const std::filesystem::path& file, int32_t lo) {
  std::vector<int32_t> ids(2000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = lo + static_cast<int32_t>(i % 100);
  write_token_file(file, ids.data(), ids.size(), 512);
}

DatasetOptions blend_options(const std::filesystem::path& dir, double wa, double wb) {
  DatasetOptions o;
  o.type = "blend";
  o.vocab_size = 512;
  o.seq_len = 8;
  o.val_fraction = 0.1;
  o.blend_seed = 11;
  o.sources = {{"web", "tokens", dir / "a.bin", wa}, {"code", "tokens", dir / "b.bin", wb}};
  return o;
}

}  // namespace

TEST_CASE("the blend schedule keeps every prefix in proportion to the weights", "[data][blend]") {
  const std::vector<double> w = {0.5, 0.3, 0.2};
  const BlendSchedule s(w, 5);
  std::vector<uint64_t> count(3, 0);
  for (uint64_t g = 0; g < 20000; ++g) {
    const BlendSchedule::Pick p = s.pick(g);
    REQUIRE(p.index == count[p.source]);  // each source's samples in order, none skipped
    ++count[p.source];
    for (size_t k = 0; k < 3; ++k) {
      REQUIRE(std::abs(static_cast<double>(count[k]) - w[k] * static_cast<double>(g + 1)) < 3.0);
    }
  }
  CHECK(s.counts_before(20000) == count);
}

TEST_CASE("the blend schedule is a function of the sample index alone", "[data][blend]") {
  const BlendSchedule in_order({0.7, 0.3}, 9);
  std::vector<BlendSchedule::Pick> want;
  for (uint64_t g = 0; g < 10000; ++g) want.push_back(in_order.pick(g));
  // Another schedule asked in a random order (as DP ranks and restarts would) agrees.
  const BlendSchedule shuffled({0.7, 0.3}, 9);
  std::vector<uint64_t> order(10000);
  for (uint64_t g = 0; g < order.size(); ++g) order[g] = g;
  std::shuffle(order.begin(), order.end(), std::mt19937(1));
  for (uint64_t g : order) {
    const BlendSchedule::Pick p = shuffled.pick(g);
    REQUIRE(p.source == want[g].source);
    REQUIRE(p.index == want[g].index);
  }
  // Another seed interleaves differently, with the same proportions.
  const BlendSchedule other({0.7, 0.3}, 10);
  int differ = 0;
  for (uint64_t g = 0; g < 100; ++g) differ += other.pick(g).source != want[g].source;
  CHECK(differ > 0);
  CHECK_THROWS(BlendSchedule({0.0, 0.0}, 1));
}

TEST_CASE("a blend draws each global batch from its sources by weight", "[data][blend]") {
  test::ScratchDir dir("blend");
  write_source(dir.path / "a.bin", 0);
  write_source(dir.path / "b.bin", 200);
  BlendDataset blend(blend_options(dir.path, 0.75, 0.25));
  REQUIRE(blend.sources() == 2);
  CHECK(blend.name(0) == "web");
  std::vector<int32_t> x(8), y(8);
  // Every batch of 8 consecutive samples: 6 from web, 2 from code (within one).
  for (uint64_t batch = 0; batch < 20; ++batch) {
    int from_web = 0;
    for (uint64_t i = 0; i < 8; ++i) {
      blend.sample(Split::train, batch * 8 + i, x.data(), y.data());
      from_web += x[0] < 200;
    }
    CHECK(std::abs(from_web - 6) <= 1);
  }
  const std::vector<BlendPosition> at = blend.positions(160);
  CHECK(at[0].samples + at[1].samples == 160);
  CHECK(std::abs(static_cast<double>(at[0].samples) - 120.0) < 3.0);
  CHECK(at[0].tokens == at[0].samples * 8);
  // 1800 training tokens: 224 sequences of 9 tokens an epoch.
  CHECK(blend.source(0).epoch_size() == 224);
  // Validation draws from both sources' validation splits.
  std::set<bool> seen;
  for (uint64_t e = 0; e < 16; ++e) {
    blend.sample(Split::val, e, x.data(), y.data());
    seen.insert(x[0] < 200);
  }
  CHECK(seen.size() == 2);
}

TEST_CASE("a blend resumes each source where the checkpoint left it", "[data][blend]") {
  test::ScratchDir dir("blendresume");
  write_source(dir.path / "a.bin", 0);
  write_source(dir.path / "b.bin", 200);
  const BlendDataset straight(blend_options(dir.path, 0.75, 0.25));
  std::vector<int32_t> x(8), y(8), x2(8), y2(8);

  // The same blend: the recorded positions are the schedule's; the stream is unchanged.
  BlendDataset same(blend_options(dir.path, 0.75, 0.25));
  CHECK(same.continue_from(100, straight.positions(100)).empty());
  for (uint64_t g = 100; g < 140; ++g) {
    straight.sample(Split::train, g, x.data(), y.data());
    same.sample(Split::train, g, x2.data(), y2.data());
    REQUIRE(x == x2);
  }

  // New weights: each source goes on from its own count; the new mix applies from there.
  BlendDataset changed(blend_options(dir.path, 0.5, 0.5));
  const std::vector<BlendPosition> recorded = straight.positions(100);
  const std::string note = changed.continue_from(100, recorded);
  const uint64_t web_at = recorded[0].samples, code_at = recorded[1].samples;
  CHECK(web_at + code_at == 100);
  CHECK_THAT(note, Catch::Contains("web at sample " + std::to_string(web_at)));
  CHECK_THAT(note, Catch::Contains("code at sample " + std::to_string(code_at)));
  const std::vector<BlendPosition> later = changed.positions(140);
  CHECK(later[0].samples + later[1].samples == 140);
  CHECK(std::abs(static_cast<double>(later[0].samples) - static_cast<double>(web_at + 20)) <= 1.0);
  // Source web's next sample is the one after its recorded position, as it would have been.
  const DatasetOptions web = source_options(blend_options(dir.path, 0.75, 0.25), 0);
  const auto web_alone = make_dataset(web);
  for (uint64_t g = 100; g < 110; ++g) {
    changed.sample(Split::train, g, x.data(), y.data());
    if (x[0] < 200) {
      web_alone->sample(Split::train, web_at, x2.data(), y2.data());
      CHECK(x == x2);
      break;
    }
  }
}
