// Files users name are opened safely (util/regular_file.h): only regular files, never a
// blocking open, reads bounded by a cap. The job spec reader uses it (issue 15: `validate
// /dev/zero` grew to 5.8 GB, a FIFO as the spec hung forever).
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "config/load.h"
#include "test_scratch.h"
#include "util/error.h"
#include "util/regular_file.h"

using namespace trainctl;
namespace fs = std::filesystem;
using trainctl::test::input_error_of;
using trainctl::test::ScratchDir;

namespace {}  // namespace

TEST_CASE("RegularFile refuses what is not a regular file, saying what it is", "[util]") {
  ScratchDir dir("inputs");
  const fs::path fifo = dir.path / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(input_error_of([&] { RegularFile f(fifo, "job spec file"); }) ==
        fifo.string() +
            ": is a FIFO (named pipe), not a regular file; a job spec file must be a regular file");
  CHECK_THAT(input_error_of([&] { RegularFile f("/dev/zero", "job spec file"); }),
             Catch::Contains("/dev/zero: is a character device"));
  CHECK_THAT(input_error_of([&] { RegularFile f(dir.path, "job spec file"); }),
             Catch::Contains(": is a directory, not a regular file"));
  CHECK(input_error_of([&] { RegularFile f(dir.path / "nope.yaml", "job spec file"); }) ==
        (dir.path / "nope.yaml").string() + ": no such job spec file");
}

TEST_CASE("RegularFile::read_all reads at most its cap", "[util]") {
  ScratchDir dir("inputs");
  const fs::path file = dir.path / "f.txt";
  {
    std::ofstream out(file);
    out << std::string(3000, 'a');
  }
  const RegularFile f(file, "test file");
  CHECK(f.size() == 3000);
  CHECK(f.read_all(3000) == std::string(3000, 'a'));
  CHECK(input_error_of([&] { RegularFile(file, "test file").read_all(2999); }) ==
        file.string() +
            ": is 3000 bytes (0.0 MiB); a test file may be at most 2999 bytes (0.0 MiB)");
  char head[4] = {};
  f.read_at(0, head, 3);
  CHECK(std::string(head) == "aaa");
  CHECK_THAT(input_error_of([&] { f.read_at(2999, head, 2); }),
             Catch::Contains("ended after 3000"));
  CHECK(byte_size_text(1024 * 1024) == "1048576 bytes (1.0 MiB)");
}

TEST_CASE("job specs: /dev/zero, a FIFO, a directory and a 2 MiB file are refused", "[config]") {
  ScratchDir dir("inputs");
  using config::load_job_spec;
  CHECK_THAT(input_error_of([] { load_job_spec("/dev/zero"); }),
             Catch::Contains("/dev/zero: is a character device, not a regular file"));
  const fs::path fifo = dir.path / "job.yaml";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THAT(input_error_of([&] { load_job_spec(fifo); }),
             Catch::Contains("is a FIFO (named pipe)"));
  CHECK_THAT(input_error_of([&] { load_job_spec(dir.path); }), Catch::Contains("is a directory"));
  const fs::path big = dir.path / "big.yaml";
  {
    std::ofstream out(big);
    out << "name: big\n";
    out << std::string(2 * 1024 * 1024 - 10, '#');
  }
  CHECK(input_error_of([&] { load_job_spec(big); }) ==
        big.string() +
            ": is 2097152 bytes (2.0 MiB); a job spec file may be at most 1048576 bytes "
            "(1.0 MiB)");
  // Just under the cap is read (and then parsed as usual).
  const fs::path fits = dir.path / "fits.yaml";
  {
    std::ofstream out(fits);
    out << "name: fits\n#" << std::string(config::kMaxSpecBytes - 13, 'x') << "\n";
  }
  REQUIRE(fs::file_size(fits) == config::kMaxSpecBytes);
  CHECK(load_job_spec(fits).name == "fits");
}
