// The checks a data file passes before launch and in the workers (data/file_checks.h,
// data/token_file.h): every way an llm.c or nanoGPT token file can be wrong is refused with
// an InputError naming the file and the problem, never a crash (issue 15: a negative
// header count used to wrap around the size check and SIGBUS the workers).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <climits>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/file_checks.h"
#include "data/token_file.h"
#include "test_scratch.h"
#include "util/error.h"

using namespace trainctl;
using namespace trainctl::data;
namespace fs = std::filesystem;
using trainctl::test::input_error_of;
using trainctl::test::ScratchDir;

namespace {

std::vector<uint16_t> ramp(size_t n, int modulo) {
  std::vector<uint16_t> t(n);
  for (size_t i = 0; i < n; ++i)
    t[i] = static_cast<uint16_t>((i * 7) % static_cast<size_t>(modulo));
  return t;
}

// An llm.c file: the 256-int header (magic, version, count) and then `tokens`.
fs::path write_llmc(const fs::path& file, int32_t version, int32_t count,
                    const std::vector<uint16_t>& tokens) {
  std::vector<int32_t> header(256, 0);
  header[0] = TokenFile::kLlmcMagic;
  header[1] = version;
  header[2] = count;
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), 1024);
  out.write(reinterpret_cast<const char*>(tokens.data()),
            static_cast<std::streamsize>(tokens.size() * 2));
  return file;
}

fs::path write_bytes(const fs::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary);
  out << bytes;
  return file;
}

DatasetOptions tokens_options(const fs::path& file, int vocab = 512) {
  DatasetOptions o;
  o.type = "tokens";
  o.path = file;
  o.vocab_size = vocab;
  o.seq_len = 16;
  return o;
}

}  // namespace

TEST_CASE("llm.c header counts: negative, zero, huge and mismatched are refused", "[data]") {
  ScratchDir dir("datacheck");
  const auto toks = ramp(1000, 300);
  // The case: struct.pack('<256i', 20240520, 1, -5, ...) then tokens. As a size_t,
  // -5 times 2 wrapped around to a small byte count that "fit" the file.
  for (int32_t count : {-5, -1, INT32_MIN, INT32_MIN + 1, -(1 << 30)}) {
    const fs::path f = write_llmc(dir.path / "neg.bin", 1, count, toks);
    const std::string msg = input_error_of([&] { TokenFile file(f); });
    CHECK_THAT(msg, Catch::Contains(f.string()));
    CHECK_THAT(msg, Catch::Contains("llm.c header says " + std::to_string(count) + " tokens"));
  }
  const std::string zero =
      input_error_of([&] { TokenFile file(write_llmc(dir.path / "zero.bin", 1, 0, toks)); });
  CHECK_THAT(zero, Catch::Contains("says 0 tokens; a token file needs at least one"));

  for (int32_t count : {1001, 5000, INT32_MAX}) {
    const std::string msg =
        input_error_of([&] { TokenFile file(write_llmc(dir.path / "big.bin", 1, count, toks)); });
    CHECK_THAT(msg, Catch::Contains("(truncated?)"));
    CHECK_THAT(msg, Catch::Contains("but the file is 3024 bytes"));
  }
  // Fewer tokens announced than stored: llm.c's loader refuses this too.
  const std::string extra =
      input_error_of([&] { TokenFile file(write_llmc(dir.path / "extra.bin", 1, 999, toks)); });
  CHECK_THAT(extra, Catch::Contains("(data after the last token?)"));

  TokenFile exact(write_llmc(dir.path / "ok.bin", 1, 1000, toks));
  CHECK(exact.format() == "llm.c");
  CHECK(exact.size() == 1000);
  CHECK(exact.max_token() == 299);
}

TEST_CASE("llm.c version and header length, raw odd sizes and empty files", "[data]") {
  ScratchDir dir("datacheck");
  const auto toks = ramp(100, 50);
  const std::string v3 =
      input_error_of([&] { TokenFile f(write_llmc(dir.path / "v3.bin", 3, 100, toks)); });
  CHECK_THAT(v3, Catch::Contains("version 3 (magic 20240520) is not supported"));
  CHECK_THAT(v3, Catch::Contains("version 1"));
  // Version 2 holds 4-byte ids: 100 uint16 tokens are 50 of them, not the 100 claimed.
  const std::string v2 =
      input_error_of([&] { TokenFile f(write_llmc(dir.path / "v2.bin", 2, 100, toks)); });
  CHECK_THAT(v2, Catch::Contains("100 uint32 tokens (1424 bytes with the header)"));

  // The magic and then less than a whole header.
  int32_t magic = TokenFile::kLlmcMagic;
  std::string head(reinterpret_cast<const char*>(&magic), 4);
  head += std::string(96, '\0');
  const std::string short_header =
      input_error_of([&] { TokenFile f(write_bytes(dir.path / "short.bin", head)); });
  CHECK_THAT(short_header, Catch::Contains("shorter than llm.c's 1024-byte header"));

  const std::string odd = input_error_of(
      [&] { TokenFile f(write_bytes(dir.path / "odd.bin", std::string(2001, 'a'))); });
  CHECK_THAT(odd, Catch::Contains("odd size (2001 bytes)"));

  const std::string empty =
      input_error_of([&] { TokenFile f(write_bytes(dir.path / "e.bin", "")); });
  CHECK_THAT(empty, Catch::Contains("token file is empty (0 bytes)"));

  TokenFile raw(write_bytes(dir.path / "raw.bin", std::string(2000, '\x01')));
  CHECK(raw.format() == "raw uint16");
  CHECK(raw.size() == 1000);
  CHECK(raw.max_token() == 0x0101);
}

TEST_CASE("token files must be regular files: FIFO, device, directory refused", "[data]") {
  ScratchDir dir("datacheck");
  const fs::path fifo = dir.path / "tokens.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Opening a FIFO for reading blocks until a writer comes: refused without opening it.
  CHECK_THAT(input_error_of([&] { TokenFile f(fifo); }), Catch::Contains("is a FIFO (named pipe)"));
  CHECK_THAT(input_error_of([&] { TokenFile f("/dev/null"); }),
             Catch::Contains("/dev/null: is a character device, not a regular file"));
  CHECK_THAT(input_error_of([&] { TokenFile f(dir.path); }), Catch::Contains("is a directory"));
  CHECK_THAT(input_error_of([&] { TokenFile f(dir.path / "missing.bin"); }),
             Catch::Contains("no such token file"));
  // The pre-launch check says the same for both data types.
  DatasetOptions text = tokens_options(fifo);
  text.type = "text";
  CHECK_THAT(input_error_of([&] { check_dataset_file(text); }), Catch::Contains("is a FIFO"));
  CHECK_THAT(input_error_of([&] { check_dataset_file(tokens_options(fifo)); }),
             Catch::Contains("is a FIFO"));
}

TEST_CASE("the pre-launch check: token ids against vocab_size, split sizes, a summary", "[data]") {
  ScratchDir dir("datacheck");
  const fs::path f = write_llmc(dir.path / "t.bin", 1, 1000, ramp(1000, 300));
  const std::string vocab = input_error_of([&] { check_dataset_file(tokens_options(f, 256)); });
  CHECK_THAT(vocab, Catch::Contains(f.string() + ": contains token id 299"));
  CHECK_THAT(vocab, Catch::Contains("set model.vocab_size to at least 300"));
  // The workers refuse exactly the same file, with the same words.
  CHECK(input_error_of([&] { make_dataset(tokens_options(f, 256)); }) == vocab);

  CHECK(check_dataset_file(tokens_options(f, 300)) ==
        f.string() + ": llm.c token file, 1000 tokens, ids 0..299");

  DatasetOptions long_windows = tokens_options(f, 300);
  long_windows.seq_len = 999;
  CHECK_THAT(input_error_of([&] { check_dataset_file(long_windows); }),
             Catch::Contains("1000 tokens are too few for windows of 1000 tokens"));

  DatasetOptions text;
  text.type = "text";
  text.path = write_bytes(dir.path / "c.txt", std::string(4000, 'x'));
  text.seq_len = 16;
  CHECK_THAT(check_dataset_file(text), Catch::Contains("UTF-8 text, 4000 bytes"));
  text.path = write_bytes(dir.path / "empty.txt", "");
  CHECK_THAT(input_error_of([&] { check_dataset_file(text); }),
             Catch::Contains("text file is empty"));

  DatasetOptions synthetic;
  CHECK(check_dataset_file(synthetic).empty());
}

TEST_CASE("uint32 token files: version 2 and llm.c's Llama 3 header, ids beyond 65535", "[data]") {
  ScratchDir dir("datacheck32");
  std::vector<int32_t> ids(1000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7919) % 128256);
  data::write_token_file(dir.path / "v2.bin", ids.data(), ids.size(), 128256);
  TokenFile v2(dir.path / "v2.bin");
  CHECK(v2.format() == "llm.c uint32");
  CHECK(v2.bytes_per_token() == 4);
  REQUIRE(v2.size() == 1000);
  for (size_t i = 0; i < ids.size(); ++i) REQUIRE(v2.token(i) == static_cast<uint32_t>(ids[i]));
  const int32_t max_id = *std::max_element(ids.begin(), ids.end());
  CHECK(v2.max_token() == static_cast<uint32_t>(max_id));
  std::vector<int32_t> window(10);
  v2.copy(990, 10, window.data());
  CHECK(std::equal(window.begin(), window.end(), ids.begin() + 990));

  // A small vocabulary is written as version 1 (uint16), which llm.c's GPT-2 loader reads.
  std::vector<int32_t> small = {1, 2, 65535, 4};
  data::write_token_file(dir.path / "v1.bin", small.data(), small.size(), 65536);
  TokenFile v1(dir.path / "v1.bin");
  CHECK(v1.format() == "llm.c");
  CHECK(v1.token(2) == 65535);

  // llm.c's own Llama 3 files: magic 20240801, version 7, uint32 ids.
  std::vector<int32_t> header(256, 0);
  header[0] = TokenFile::kLlmcLlama3Magic;
  header[1] = TokenFile::kLlmcLlama3Version;
  header[2] = 3;
  const std::vector<uint32_t> llama = {128000, 9906, 128001};
  {
    std::ofstream out(dir.path / "llama3.bin", std::ios::binary);
    out.write(reinterpret_cast<const char*>(header.data()), 1024);
    out.write(reinterpret_cast<const char*>(llama.data()), 12);
  }
  TokenFile l3(dir.path / "llama3.bin");
  CHECK(l3.size() == 3);
  CHECK(l3.token(0) == 128000);
  CHECK(l3.max_token() == 128001);

  // The pre-launch check and the dataset take the ids against model.vocab_size.
  CHECK_THAT(
      input_error_of([&] { check_dataset_file(tokens_options(dir.path / "v2.bin", max_id)); }),
      Catch::Contains("set model.vocab_size to at least " + std::to_string(max_id + 1)));
  auto o = tokens_options(dir.path / "v2.bin", 128256);
  CHECK_THAT(check_dataset_file(o), Catch::Contains("ids 0.." + std::to_string(max_id)));
  auto ds = make_dataset(o);
  std::vector<int32_t> x(16), y(16);
  bool wide = false;
  for (uint64_t i = 0; i < 20; ++i) {
    ds->sample(Split::train, i, x.data(), y.data());
    for (int t = 0; t < 15; ++t)
      REQUIRE(y[static_cast<size_t>(t)] == x[static_cast<size_t>(t) + 1]);
    for (int32_t v : x) wide = wide || v > 65535;
  }
  CHECK(wide);
}
