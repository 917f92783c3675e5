// Environment variables and `~` in job spec values (issue 37, item 3; docs/job-spec.md,
// "Variables"), and the one rule for relative paths stated in messages.
#include <cstdlib>
#include <map>

#include "config/variables.h"
#include "test_config_helpers.h"

namespace {

namespace fs = std::filesystem;
using trainctl::config::load_job_spec;
using trainctl::config::parse_job_spec;
using trainctl::config::detail::expand_home;
using trainctl::config::detail::expand_variables;
using trainctl::config::testing::error_of;
using trainctl::config::testing::TempDir;

// Sets (or unsets, for nullopt) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value) {
      ::setenv(name_.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

std::optional<std::string> lookup(const std::string& name) {
  static const std::map<std::string, std::string> env = {
      {"SCRATCH", "/scratch/u1"}, {"SLURM_JOB_ID", "4242"}, {"EMPTY", ""}, {"HOME", "/home/u1"}};
  const auto it = env.find(name);
  return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
}

std::string expansion_error(const std::string& text) {
  try {
    expand_variables(text, lookup);
  } catch (const trainctl::InputError& e) {
    return e.what();
  }
  FAIL("no error for " << text);
  return "";
}

}  // namespace

TEST_CASE("config: ${VAR}, ${VAR:-default}, $VAR and $$ expand", "[config]") {
  CHECK(expand_variables("${SCRATCH}/runs/x", lookup) == "/scratch/u1/runs/x");
  CHECK(expand_variables("$SCRATCH/runs/$SLURM_JOB_ID", lookup) == "/scratch/u1/runs/4242");
  CHECK(expand_variables("${UNSET:-/tmp}/x", lookup) == "/tmp/x");
  CHECK(expand_variables("${EMPTY:-d}", lookup) == "d");
  CHECK(expand_variables("${EMPTY}", lookup).empty());
  CHECK(expand_variables("${UNSET:-${SCRATCH}/a}", lookup) == "/scratch/u1/a");
  CHECK(expand_variables("cost $$5 and $$SCRATCH", lookup) == "cost $5 and $SCRATCH");
  CHECK(expand_variables("a $5 b $", lookup) == "a $5 b $");  // nothing to expand: as written
  CHECK(expansion_error("${NOPE}/x").find("environment variable NOPE is not set") !=
        std::string::npos);
  CHECK(expansion_error("$NOPE").find("NOPE is not set") != std::string::npos);
  CHECK(expansion_error("${SCRATCH").find("no closing }") != std::string::npos);
  CHECK(expansion_error("${1A}").find("is not a variable") != std::string::npos);
  CHECK(expansion_error("${A B}").find("is not a variable") != std::string::npos);
  // Defaults nest, but not without bound (a 1 MiB value of `${A:-` would recurse per level).
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "${U" + std::to_string(i % 10) + ":-";
  deep += "x" + std::string(100000, '}');
  CHECK(expansion_error(deep).find("nested more than 8 deep") != std::string::npos);
  CHECK(expand_variables("${A:-${B:-${C:-ok}}}", lookup) == "ok");
  CHECK(expand_home("~/corpus.txt", lookup) == "/home/u1/corpus.txt");
  CHECK(expand_home("~", lookup) == "/home/u1");
  CHECK(expand_home("a/~/b", lookup) == "a/~/b");
  CHECK_THROWS_AS(expand_home("~bob/x", lookup), trainctl::InputError);
}

TEST_CASE("config: variables in a spec file, and an unset one is an error with file:line",
          "[config]") {
  const ScopedEnv scratch("TRAINCTL_TEST_SCRATCH", "/scratch/u2");
  const ScopedEnv steps("TRAINCTL_TEST_STEPS", "7");
  const ScopedEnv unset("TRAINCTL_TEST_UNSET", std::nullopt);
  const auto spec = parse_job_spec(
      "name: a\nrun_dir: ${TRAINCTL_TEST_SCRATCH}/runs/$TRAINCTL_TEST_STEPS\n"
      "training: {steps: $TRAINCTL_TEST_STEPS}\n",
      "job.yaml", "/tmp");
  CHECK(spec.run_dir == "/scratch/u2/runs/7");
  CHECK(spec.training.steps == 7);
  const std::string message = error_of("name: a\nrun_dir: ${TRAINCTL_TEST_UNSET}/runs\n");
  CHECK(message.rfind("job.yaml:2:10: run_dir: environment variable TRAINCTL_TEST_UNSET is not "
                      "set",
                      0) == 0);
  // In an override too, naming the argument.
  const auto set =
      parse_job_spec("name: a\n", "job.yaml", "/tmp", {"run_dir=${TRAINCTL_TEST_SCRATCH}/o"});
  CHECK(set.run_dir == "/scratch/u2/o");
  CHECK(error_of("name: a\n", {"run_dir=$TRAINCTL_TEST_UNSET"})
            .rfind("--set run_dir=$TRAINCTL_TEST_UNSET: run_dir: environment variable", 0) == 0);
}

TEST_CASE("config: ~ in run_dir and data.path is the home directory", "[config]") {
  const TempDir home;
  home.write("corpus.txt", 4096);
  const ScopedEnv env("HOME", home.path().string());
  const auto spec = parse_job_spec(
      "name: a\nrun_dir: ~/runs/a\nmodel: {vocab_size: 256}\n"
      "data: {type: text, path: ~/corpus.txt}\n",
      "job.yaml", "/tmp");
  CHECK(spec.run_dir == home.path() / "runs/a");
  CHECK(spec.data.path == home.path() / "corpus.txt");
}

TEST_CASE("config: the relative-path rule in messages matches where the value came from",
          "[config]") {
  const TempDir dir;
  const fs::path spec_file = dir.write_text("job.yaml",
                                            "name: a\nmodel: {vocab_size: 256}\n"
                                            "data: {type: text, path: missing.txt}\n");
  std::string in_file, in_set;
  try {
    load_job_spec(spec_file);
  } catch (const trainctl::InputError& e) {
    in_file = e.what();
  }
  CHECK(in_file.find("no such file: " + (dir.path() / "missing.txt").string()) !=
        std::string::npos);
  CHECK(in_file.find("resolved against that file's directory, " + dir.path().string()) !=
        std::string::npos);
  try {
    load_job_spec(spec_file, {"data.path=other.txt"});
  } catch (const trainctl::InputError& e) {
    in_set = e.what();
  }
  CHECK(in_set.find("no such file: " + (fs::current_path() / "other.txt").string()) !=
        std::string::npos);
  CHECK(in_set.find("given with --set is resolved against the current directory") !=
        std::string::npos);
}

TEST_CASE("config: a resolved spec with a `$` in a path reads back the same", "[config]") {
  auto spec = parse_job_spec("name: a\nrun_dir: /tmp/a$$b\n", "job.yaml", "/tmp");
  CHECK(spec.run_dir == "/tmp/a$b");
  const auto again = parse_job_spec(trainctl::config::to_yaml(spec), "resolved.yaml", "/tmp");
  CHECK(again == spec);
}
