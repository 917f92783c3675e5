// metrics.jsonl's file (train/jsonl_file.h) and the storage errors of failed writes
// (util/storage_error.h): a torn last line is cut off on open, replayed steps are dropped,
// a line that fails halfway is taken back, and a full disk is a StorageFullError (exit 2)
// naming the file.
#include <signal.h>
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "checkpoint/durable_file.h"
#include "train/jsonl_file.h"
#include "unit/test_scratch.h"
#include "util/storage_error.h"

using trainctl::StorageFullError;
using trainctl::test::ScratchDir;
using trainctl::train::JsonLinesFile;
namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_all(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
}

}  // namespace

TEST_CASE("a torn last line is cut off when the file is opened", "[train][metrics]") {
  ScratchDir dir("jsonl_torn");
  const fs::path file = dir.path / "metrics.jsonl";
  write_all(file, "{\"step\":1}\n{\"step\":2}\n{\"step\":3,\"lo");
  {
    JsonLinesFile f(file);
    CHECK(f.repaired_bytes() == std::string("{\"step\":3,\"lo").size());
    f.append("{\"step\":3}");
  }
  CHECK(read_all(file) == "{\"step\":1}\n{\"step\":2}\n{\"step\":3}\n");

  SECTION("a file of one torn line becomes empty, a whole file stays as it is") {
    write_all(file, "{\"st");
    CHECK(JsonLinesFile(file).repaired_bytes() == 4);
    CHECK(read_all(file).empty());
    write_all(file, "{\"step\":1}\n");
    CHECK(JsonLinesFile(file).repaired_bytes() == 0);
    CHECK(read_all(file) == "{\"step\":1}\n");
  }
}

TEST_CASE("steps after the resumed one are dropped, so each step appears once",
          "[train][metrics]") {
  ScratchDir dir("jsonl_keep");
  const fs::path file = dir.path / "metrics.jsonl";
  // Two earlier runs: 1..4, then a restart from step 2 that got to 3 (2 and 3 twice).
  write_all(file,
            "{\"step\":1}\n{\"step\":2}\n{\"step\":3}\n{\"step\":4}\n{\"step\":3}\n"
            "not json\n");
  JsonLinesFile f(file);
  CHECK(f.keep_steps_through(2) == 3);
  f.append("{\"step\":3}");
  CHECK(read_all(file) == "{\"step\":1}\n{\"step\":2}\nnot json\n{\"step\":3}\n");
  CHECK(f.keep_steps_through(3) == 0);  // nothing to drop: the file is not rewritten
  CHECK(f.keep_steps_through(0) == 3);  // a start from scratch drops every step
  CHECK(read_all(file) == "not json\n");
}

TEST_CASE("a full disk is a StorageFullError naming the file, not a crash", "[train][metrics]") {
  ScratchDir dir("jsonl_full");
  // /dev/full answers every write with ENOSPC, like a file system with no space left.
  const fs::path metrics = dir.path / "metrics.jsonl";
  fs::create_symlink("/dev/full", metrics);
  JsonLinesFile f(metrics);
  CHECK(f.keep_steps_through(0) == 0);  // not a regular file: nothing read, nothing replaced
  try {
    f.append("{\"step\":1}");
    FAIL("expected a StorageFullError");
  } catch (const StorageFullError& e) {
    CHECK_THAT(e.what(), Catch::Contains("cannot write " + metrics.string()) &&
                             Catch::Contains("No space left on device") &&
                             Catch::Contains("the last complete checkpoint is intact"));
  }
  // A checkpoint shard on a full disk: the same error, so the launcher does not restart.
  trainctl::checkpoint::DurableFile shard("/dev/full");
  const std::vector<char> bytes(1 << 16, 'x');
  CHECK_THROWS_AS(
      [&] {
        shard.write(bytes.data(), bytes.size());
        shard.finish();
      }(),
      StorageFullError);
  CHECK(trainctl::storage_refuses_writes(EDQUOT));
  CHECK(trainctl::storage_refuses_writes(EROFS));
  CHECK_FALSE(trainctl::storage_refuses_writes(EIO));
  CHECK_THROWS_AS(trainctl::throw_write_error(EIO, "cannot write", metrics), std::runtime_error);
}

TEST_CASE("a line cut short by a failed write is taken back", "[train][metrics]") {
  ScratchDir dir("jsonl_short");
  const fs::path file = dir.path / "metrics.jsonl";
  JsonLinesFile f(file);
  f.append("{\"step\":1}");
  const auto first = fs::file_size(file);
  // A file size limit makes the kernel write part of the line and then fail (EFBIG), as a
  // disk that fills in the middle of a line does.
  struct sigaction ignore {
  }, old_action{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGXFSZ, &ignore, &old_action);
  rlimit old_limit{};
  ::getrlimit(RLIMIT_FSIZE, &old_limit);
  rlimit limit = old_limit;
  limit.rlim_cur = first + 5;
  ::setrlimit(RLIMIT_FSIZE, &limit);
  bool threw = false;
  try {
    f.append("{\"step\":2,\"loss\":1.0}");
  } catch (const std::runtime_error&) {
    threw = true;
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::sigaction(SIGXFSZ, &old_action, nullptr);
  CHECK(threw);
  CHECK(read_all(file) == "{\"step\":1}\n");
}
