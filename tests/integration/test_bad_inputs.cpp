// Every input that can be checked before launch is checked before launch (issue 15): a job
// spec that is not a regular file or too large, and a data file the workers would refuse,
// make `validate` and `train` exit 2 at once, naming the file and the problem; `train`
// creates no run_dir and starts no worker.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <climits>
#include <cstdint>

#include "integration/helpers.h"

using namespace trainctl::test;
using namespace std::chrono_literals;

namespace {

// An llm.c token file: header (magic, version, count), then `n` tokens 0..max_id.
fs::path write_llmc(const fs::path& file, int32_t version, int32_t count, size_t n, int max_id) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = version;
  header[2] = count;
  std::vector<uint16_t> tokens(n);
  for (size_t i = 0; i < n; ++i) tokens[i] = static_cast<uint16_t>(i % (size_t(max_id) + 1));
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), 1024);
  out.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(n * 2));
  return file;
}

fs::path tokens_job(const fs::path& dir, const fs::path& data) {
  const fs::path file = dir / "job.yaml";
  write_text(file,
             "name: data\n"
             "model: {vocab_size: 512, seq_len: 16, n_layer: 1, n_head: 2, d_model: 16}\n"
             "data: {type: tokens, path: '" +
                 data.string() +
                 "'}\n"
                 "training: {steps: 3, micro_batch_size: 2, global_batch_size: 2}\n"
                 "runtime: {comm_timeout_s: 30}\n");
  return file;
}

}  // namespace

TEST_CASE("a job spec that is a device, FIFO, directory or 2 MiB file exits 2 at once",
          "[cli][spec]") {
  TempDir dir("bad-spec-files");
  const fs::path fifo = dir / "fifo.yaml";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const fs::path big = dir / "big.yaml";
  write_text(big, "name: big\n#" + std::string(2 * 1024 * 1024 - 12, 'x') + "\n");
  REQUIRE(fs::file_size(big) == 2 * 1024 * 1024);
  fs::create_directories(dir / "specdir");

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/dev/zero",
       "/dev/zero: is a character device, not a regular file; a job spec file must "
       "be a regular file"},
      {fifo.string(), fifo.string() + ": is a FIFO (named pipe), not a regular file"},
      {(dir / "specdir").string(), (dir / "specdir").string() + ": is a directory"},
      {big.string(), big.string() + ": is 2097152 bytes (2.0 MiB); a job spec file may be at "
                                    "most 1048576 bytes (1.0 MiB)"},
  };
  for (const auto& [path, message] : cases) {
    for (const char* command : {"validate", "train"}) {
      // Named by the file's name only: a section's name must be the same on every run of
      // the test case (Catch re-runs it once per section), and the directory is not.
      DYNAMIC_SECTION(command << " " << fs::path(path).filename().string()) {
        // A hang (a FIFO opened for reading waits for a writer) would hit this limit.
        const ProcResult r = run_trainctl({command, path}, dir.path(), 20s);
        INFO(r.err);
        CHECK_FALSE(r.timed_out);
        CHECK(r.exit_code == 2);
        CHECK(r.seconds < 10.0);
        CHECK_THAT(r.err, Catch::Contains("error: " + message));
        CHECK_FALSE(fs::exists(dir / "runs"));
      }
    }
  }
}

TEST_CASE("bad token files: validate reports them, train exits 2 before run_dir exists",
          "[cli][data]") {
  TempDir dir("bad-data");
  const fs::path fifo = dir / "fifo.bin";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  fs::create_directories(dir / "bindir");
  write_text(dir / "empty.bin", "");
  write_text(dir / "odd.bin", std::string(4001, 'a'));

  struct Case {
    fs::path file;
    std::string problem;
  };
  const std::vector<Case> cases = {
      {write_llmc(dir / "negative.bin", 1, -5, 1000, 255), "llm.c header says -5 tokens"},
      {write_llmc(dir / "int_min.bin", 1, INT32_MIN, 1000, 255),
       "llm.c header says -2147483648 tokens"},
      {write_llmc(dir / "truncated.bin", 1, 5000, 1000, 255),
       "llm.c header says 5000 tokens (11024 bytes with the header) but the file is 3024 bytes "
       "(truncated?)"},
      {write_llmc(dir / "v3.bin", 3, 1000, 1000, 255),
       "llm.c token file version 3 (magic 20240520) is not supported"},
      // Version 2 holds uint32 ids: 1000 of them need 4000 bytes, the file has 2000.
      {write_llmc(dir / "v2.bin", 2, 1000, 1000, 255),
       "llm.c header says 1000 uint32 tokens (5024 bytes with the header) but the file is "
       "3024 bytes (truncated?)"},
      {write_llmc(dir / "vocab.bin", 1, 1000, 1000, 600),
       "contains token id 600 but model.vocab_size is 512; set model.vocab_size to at least 601"},
      {dir / "empty.bin", "token file is empty (0 bytes)"},
      {dir / "odd.bin", "raw token file has an odd size (4001 bytes)"},
      {fifo, "is a FIFO (named pipe), not a regular file"},
      // A directory is token data only when `trainctl data prepare` wrote it.
      {dir / "bindir", "bindir: is a directory without manifest.json"},
      {"/dev/null", "is a character device, not a regular file"},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.file.filename().string()) {
      const fs::path job = tokens_job(dir.path(), c.file);
      const ProcResult v = run_trainctl({"validate", job.string()}, dir.path(), 20s);
      INFO(v.out << v.err);
      CHECK_FALSE(v.timed_out);
      CHECK(v.exit_code == 2);
      CHECK_THAT(v.err, Catch::Contains("data.path"));
      CHECK_THAT(v.err, Catch::Contains(c.file.string()));
      CHECK_THAT(v.err, Catch::Contains(c.problem));

      const ProcResult t = run_trainctl({"train", job.string()}, dir.path(), 20s);
      INFO(t.out << t.err);
      CHECK_FALSE(t.timed_out);
      CHECK(t.exit_code == 2);
      CHECK(t.err == v.err);  // the same check, the same words
      CHECK_FALSE(fs::exists(dir / "runs"));
      CHECK(processes_mentioning(dir.path().string()).empty());
    }
  }
}

TEST_CASE("a good llm.c token file: validate describes it and train uses it", "[cli][data]") {
  TempDir dir("good-data");
  const fs::path data = write_llmc(dir / "train.bin", 1, 1000, 1000, 300);
  const fs::path job = tokens_job(dir.path(), data);
  const ProcResult v = run_trainctl({"validate", job.string()}, dir.path(), 20s);
  INFO(v.out << v.err);
  CHECK(v.exit_code == 0);
  CHECK_THAT(v.out, Catch::Contains("data file:  " + data.string() +
                                    ": llm.c token file, 1000 tokens, ids 0..300"));
  const ProcResult t = run_trainctl({"train", job.string()}, dir.path(), 120s);
  INFO(t.out << t.err);
  CHECK(t.exit_code == 0);
  CHECK_THAT(t.out, Catch::Contains("done: 3 steps"));
}
