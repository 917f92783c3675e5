// One job per run directory (launch/run_dir_lock.h): a second lock is refused naming the
// holder; closing (or dying) releases it; a lock file left behind never blocks.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "launch/run_dir_lock.h"
#include "util/error.h"

using trainctl::InputError;
using trainctl::launch::RunDirLock;
namespace fs = std::filesystem;

namespace {

struct Dir {
  fs::path path = fs::temp_directory_path() / ("trainctl_lock_" + std::to_string(::getpid()));
  ~Dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("run_dir lock: the second taker is refused and told who holds it", "[launch]") {
  Dir dir;
  const fs::path run_dir = dir.path / "runs" / "job";
  std::optional<RunDirLock> first;
  first.emplace(run_dir, "job", "/specs/job.yaml");  // creates run_dir
  const std::string note = read_text(RunDirLock::file_of(run_dir));
  CHECK_THAT(note, Catch::Contains("pid: " + std::to_string(::getpid()) + "\n"));
  CHECK_THAT(note, Catch::Contains("started: "));

  // flock locks belong to an open file description: a second open in this same process
  // conflicts exactly as another process would.
  try {
    RunDirLock second(run_dir, "other", "/specs/other.yaml");
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    const std::string msg = e.what();
    CHECK_THAT(msg, Catch::StartsWith("run_dir " + run_dir.string() +
                                      " is in use by another trainctl job: pid " +
                                      std::to_string(::getpid()) + " on host "));
    CHECK_THAT(msg, Catch::Contains(", job 'job' (/specs/job.yaml)"));
    CHECK_THAT(msg, Catch::Contains("--set run_dir=PATH"));
  }
  // The refused job left the holder's note alone.
  CHECK(read_text(RunDirLock::file_of(run_dir)) == note);

  first.reset();  // released: the next job gets it and writes its own note
  RunDirLock third(run_dir, "third", "/specs/third.yaml");
  CHECK_THAT(read_text(RunDirLock::file_of(run_dir)), Catch::Contains("job: third\n"));
}

TEST_CASE("run_dir lock: a lock file from a dead job does not block", "[launch]") {
  Dir dir;
  fs::create_directories(dir.path);
  {
    std::ofstream stale(RunDirLock::file_of(dir.path));
    stale << "pid: 999999\nhost: gone\nstarted: 2020-01-01 00:00:00 UTC\njob: old\nspec: x\nend\n";
  }
  RunDirLock lock(dir.path, "new", "/specs/new.yaml");
  const std::string note = read_text(RunDirLock::file_of(dir.path));
  CHECK_THAT(note, Catch::Contains("job: new\n"));
  CHECK_THAT(note, !Catch::Contains("999999"));
}

TEST_CASE("run_dir lock: an uncreatable run_dir is bad input naming the path", "[launch]") {
  Dir dir;
  fs::create_directories(dir.path);
  std::ofstream(dir.path / "file") << "x";
  try {
    RunDirLock lock(dir.path / "file" / "run", "job", "job.yaml");
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("run_dir " + (dir.path / "file" / "run").string() +
                                         ": cannot create it: "));
  }
}
