#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "data/dataset.h"
#include "data/prefetcher.h"
#include "data/sampler.h"
#include "data/synthetic.h"
#include "data/token_file.h"
#include "util/error.h"

using namespace trainctl;
using namespace trainctl::data;
namespace fs = std::filesystem;

namespace {
fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("trainctl_data_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}
void write_bytes(const fs::path& p, const void* data, size_t n) {
  std::ofstream out(p, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}
}  // namespace

TEST_CASE("synthetic data is deterministic and follows its transition table", "[data]") {
  DatasetOptions o;
  o.seed = 7;
  o.vocab_size = 64;
  o.seq_len = 32;
  SyntheticDataset a(o), b(o);
  std::vector<int32_t> ta(32), ya(32), tb(32), yb(32);
  a.sample(Split::train, 123, ta.data(), ya.data());
  b.sample(Split::train, 123, tb.data(), yb.data());
  CHECK(ta == tb);
  CHECK(ya == yb);
  // Targets are the inputs shifted by one.
  for (int t = 0; t + 1 < 32; ++t)
    CHECK(ya[static_cast<size_t>(t)] == ta[static_cast<size_t>(t) + 1]);
  // Other index or split gives another walk.
  a.sample(Split::val, 123, tb.data(), yb.data());
  CHECK(ta != tb);
  // Empirical conditional entropy approaches the stated best loss (1.75 ln 2).
  std::map<int, std::map<int, int>> counts;
  for (uint64_t i = 0; i < 3000; ++i) {
    a.sample(Split::train, i, ta.data(), ya.data());
    for (int t = 0; t < 32; ++t) counts[ta[static_cast<size_t>(t)]][ya[static_cast<size_t>(t)]]++;
  }
  double h = 0.0, total = 0.0;
  for (auto& [s, next] : counts) {
    double n = 0;
    for (auto& [k, c] : next) n += c;
    CHECK(next.size() <= 4);
    for (auto& [k, c] : next) h -= c * std::log(c / n);
    total += n;
  }
  CHECK(h / total == Approx(a.best_loss()).epsilon(0.03));
  CHECK(a.unigram_entropy() > a.best_loss() + 1.0);
  CHECK(a.unigram_entropy() <= std::log(64.0) + 1e-9);
}

TEST_CASE("a step's samples do not depend on how the global batch is split", "[data]") {
  // dp=1 x accum=4, dp=2 x accum=2 and dp=4 x accum=1 consume the same sample indices.
  auto indices = [](int dp, int accum) {
    std::multiset<uint64_t> s;
    for (int r = 0; r < dp; ++r) {
      BatchLayout l{2, 8, accum, dp, r};
      for (int m = 0; m < accum; ++m)
        for (int b = 0; b < 2; ++b) s.insert(train_sample_index(l, 5, m, b));
    }
    return s;
  };
  const auto ref = indices(1, 4);
  CHECK(ref.size() == 8);
  CHECK(*ref.begin() == 40);
  CHECK(indices(2, 2) == ref);
  CHECK(indices(4, 1) == ref);
}

TEST_CASE("a resumed run with another global batch draws the next unseen samples", "[data]") {
  // A checkpoint after 4 steps of 8 samples (32 drawn); resumed with dp 2 x 2 x accum 4.
  BatchLayout l{2, 8, 4, 2, 1};
  l.first_step = 4;
  l.first_sample = 32;
  CHECK(l.samples_before(4) == 32);
  CHECK(l.samples_before(6) == 64);
  std::multiset<uint64_t> step4;
  for (int r = 0; r < 2; ++r) {
    l.dp_rank = r;
    for (int m = 0; m < 4; ++m)
      for (int b = 0; b < 2; ++b) step4.insert(train_sample_index(l, 4, m, b));
  }
  CHECK(step4.size() == 16);
  CHECK(*step4.begin() == 32);
  CHECK(*step4.rbegin() == 47);
  CHECK(std::set<uint64_t>(step4.begin(), step4.end()).size() == 16);
}

TEST_CASE("prefetcher yields the same batches as direct sampling, in order", "[data]") {
  DatasetOptions o;
  o.vocab_size = 32;
  o.seq_len = 16;
  SyntheticDataset d(o);
  BatchLayout l{3, 16, 2, 1, 0};
  Prefetcher p(d, l, 2, 6);
  for (int64_t s = 2; s < 6; ++s) {
    StepBatch got = p.next();
    StepBatch want;
    fill_step_batch(d, l, s, want);
    CHECK(got.step == s);
    CHECK(got.tokens == want.tokens);
    CHECK(got.targets == want.targets);
  }
}

TEST_CASE("token files: llm.c header and raw uint16 are both read", "[data]") {
  const fs::path dir = temp_dir();
  std::vector<uint16_t> toks(1000);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<uint16_t>((i * 7) % 300);

  write_bytes(dir / "raw.bin", toks.data(), toks.size() * 2);
  TokenFile raw(dir / "raw.bin");
  CHECK(raw.format() == "raw uint16");
  REQUIRE(raw.size() == 1000);
  CHECK(raw.token(999) == toks[999]);

  std::vector<int32_t> header(256, 0);
  header[0] = TokenFile::kLlmcMagic;
  header[1] = 1;
  header[2] = 1000;
  {
    std::ofstream out(dir / "llmc.bin", std::ios::binary);
    out.write(reinterpret_cast<const char*>(header.data()), 1024);
    out.write(reinterpret_cast<const char*>(toks.data()), 2000);
  }
  TokenFile llmc(dir / "llmc.bin");
  CHECK(llmc.format() == "llm.c");
  REQUIRE(llmc.size() == 1000);
  CHECK(llmc.token(0) == toks[0]);
  CHECK(llmc.token(999) == toks[999]);

  header[2] = 5000;  // claims more tokens than the file holds
  {
    std::ofstream out(dir / "trunc.bin", std::ios::binary);
    out.write(reinterpret_cast<const char*>(header.data()), 1024);
    out.write(reinterpret_cast<const char*>(toks.data()), 2000);
  }
  CHECK_THROWS_AS(TokenFile(dir / "trunc.bin"), InputError);
  CHECK_THROWS_AS(TokenFile(dir / "missing.bin"), InputError);

  // Token ids beyond the model's vocabulary are refused with the fix in the message.
  DatasetOptions o;
  o.type = "tokens";
  o.path = dir / "raw.bin";
  o.vocab_size = 256;
  o.seq_len = 16;
  try {
    make_dataset(o);
    FAIL("expected InputError");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("vocab_size to at least 300"));
  }
  o.vocab_size = 512;
  auto ds = make_dataset(o);
  std::vector<int32_t> x(16), y(16);
  ds->sample(Split::val, 0, x.data(), y.data());
  // Validation windows come from the last 5% of the file.
  bool found = false;
  for (size_t off = 950; off + 17 <= 1000; ++off) {
    bool match = true;
    for (size_t t = 0; t < 16; ++t)
      match = match && x[t] == toks[off + t] && y[t] == toks[off + t + 1];
    found = found || match;
  }
  CHECK(found);
  fs::remove_all(dir);
}

TEST_CASE("text data: bytes are tokens and the corpus is split train/validation", "[data]") {
  const fs::path dir = temp_dir();
  std::string text;
  for (int i = 0; i < 200; ++i) text += "hello world, héllo wörld\n";
  write_bytes(dir / "c.txt", text.data(), text.size());
  DatasetOptions o;
  o.type = "text";
  o.path = dir / "c.txt";
  o.seq_len = 32;
  o.val_fraction = 0.1;
  auto ds = make_dataset(o);
  std::vector<int32_t> x(32), y(32);
  ds->sample(Split::train, 3, x.data(), y.data());
  for (int32_t t : x) CHECK((t >= 0 && t < 256));
  CHECK_THAT(ds->describe(), Catch::Contains("train"));
  CHECK(ds->unigram_entropy() > 1.0);
  o.seq_len = 10000;  // windows larger than the split
  CHECK_THROWS_AS(make_dataset(o), InputError);
  fs::remove_all(dir);
}
