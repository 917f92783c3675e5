// Every file in tests/data/bad_specs is a small job spec with exactly one mistake. The real
// CLI must refuse each with exit code 2 and a message naming the file, the line and the key
// path. A file states what it expects in its comment header:
//   # expect-key: parallel.tp         (`none` where the problem has no key, e.g. invalid YAML)
//   # expect-line: 9                  (`none` where no line applies, e.g. an empty file)
//   # expect-text: must divide        (a fragment of the message)
//   # also-train: yes                 (optional: `trainctl train` must refuse it too)
// corpus.txt there is a valid text corpus for specs with text data whose mistake lies elsewhere.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "integration/helpers.h"

using namespace trainctl::test;
using namespace std::chrono_literals;

namespace {

const fs::path kSpecDir = fs::path(TRAINCTL_SOURCE_DIR) / "tests" / "data" / "bad_specs";

struct BadSpec {
  fs::path file;
  std::string key;   // "none": no key path in the message
  std::string line;  // "none": no line in the message
  std::string text;
  bool also_train = false;
};

// The `# expect-<what>: value` lines of a spec's leading comment block.
std::map<std::string, std::string> header_of(const fs::path& file) {
  std::map<std::string, std::string> fields;
  std::istringstream in(read_text(file));
  for (std::string line; std::getline(in, line) && line.rfind('#', 0) == 0;) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t name_start = line.find_first_not_of("# ");
    const size_t value_start = line.find_first_not_of(' ', colon + 1);
    if (name_start == std::string::npos || name_start >= colon) continue;
    fields[line.substr(name_start, colon - name_start)] =
        value_start == std::string::npos ? "" : line.substr(value_start);
  }
  return fields;
}

std::vector<BadSpec> bad_specs() {
  std::vector<BadSpec> specs;
  for (const auto& entry : fs::directory_iterator(kSpecDir)) {
    if (entry.path().extension() != ".yaml") continue;
    auto h = header_of(entry.path());
    specs.push_back({entry.path(), h["expect-key"], h["expect-line"], h["expect-text"],
                     h["also-train"] == "yes"});
  }
  std::sort(specs.begin(), specs.end(),
            [](const BadSpec& a, const BadSpec& b) { return a.file < b.file; });
  return specs;
}

// The place a message must start with: "error: <file>:<line>:" (or "error: <file>: " when no
// line applies), followed by the key path where there is one.
void check_refusal(const ProcResult& r, const std::string& file_as_given, const BadSpec& spec) {
  INFO("stderr: " << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("error: "));
  if (spec.line == "none") {
    CHECK_THAT(r.err, Catch::Contains(file_as_given + ": "));
  } else {
    CHECK_THAT(r.err, Catch::Contains(file_as_given + ":" + spec.line + ":"));
  }
  if (spec.key != "none") CHECK_THAT(r.err, Catch::Contains(": " + spec.key + ": "));
  CHECK_THAT(r.err, Catch::Contains(spec.text));
}

// Everything in `dir` except the spec itself and the captured output of the child.
std::vector<std::string> left_behind(const fs::path& dir, const std::string& spec_name) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name != spec_name && name.rfind(".proc-", 0) != 0) names.push_back(name);
  }
  return names;
}

// A valid spec (the one the bad specs were derived from) for the `--set` cases.
const char* kGoodSpec = R"(name: good-spec
seed: 1
model: {vocab_size: 256, seq_len: 32, n_layer: 2, n_head: 4, d_model: 64}
data: {type: synthetic}
parallel: {dp: 1, tp: 1, pp: 1}
training: {steps: 10, micro_batch_size: 2, global_batch_size: 4}
optimizer: {lr: 1.0e-3, warmup_steps: 2, min_lr: 1.0e-4}
)";

}  // namespace

TEST_CASE("validate refuses every bad spec with file, line and key path", "[cli][spec]") {
  const std::vector<BadSpec> specs = bad_specs();
  REQUIRE(specs.size() >= 35);
  TempDir cwd("bad-specs");
  for (const BadSpec& spec : specs) {
    DYNAMIC_SECTION(spec.file.filename().string()) {
      REQUIRE_FALSE(spec.key.empty());
      REQUIRE_FALSE(spec.line.empty());
      REQUIRE_FALSE(spec.text.empty());
      const ProcResult r = run_trainctl({"validate", spec.file.string()}, cwd.path(), 10s);
      check_refusal(r, spec.file.string(), spec);
    }
  }
  CHECK(left_behind(cwd.path(), "").empty());
}

TEST_CASE("train refuses bad specs before starting anything", "[cli][spec]") {
  std::vector<BadSpec> specs = bad_specs();
  specs.erase(
      std::remove_if(specs.begin(), specs.end(), [](const BadSpec& s) { return !s.also_train; }),
      specs.end());
  REQUIRE(specs.size() >= 5);
  for (const BadSpec& spec : specs) {
    DYNAMIC_SECTION(spec.file.filename().string()) {
      // A copy in a fresh directory: were the spec accepted, its run_dir (runs/<name> next
      // to the spec) and any worker logs would appear there, not in the source tree.
      TempDir dir("bad-train");
      const std::string name = spec.file.filename().string();
      fs::copy_file(spec.file, dir / name);
      const ProcResult r = run_trainctl({"train", name}, dir.path(), 10s);
      check_refusal(r, name, spec);
      CHECK(left_behind(dir.path(), name).empty());
      CHECK(processes_mentioning(dir.path().string()).empty());
    }
  }
}

TEST_CASE("bad --set overrides are refused and blamed on the --set argument", "[cli][spec]") {
  TempDir dir("bad-set");
  write_text(dir / "job.yaml", kGoodSpec);
  const ProcResult good = run_trainctl({"validate", "job.yaml"}, dir.path(), 10s);
  INFO("stderr: " << good.err);
  REQUIRE(good.exit_code == 0);

  SECTION("an unknown key path gets a suggestion") {
    const ProcResult r =
        run_trainctl({"validate", "job.yaml", "--set", "parallel.tq=2"}, dir.path(), 10s);
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("--set parallel.tq=2: parallel.tq: unknown key.") &&
                          Catch::Contains("Did you mean `tp`?"));
  }
  SECTION("a value of the wrong type") {
    const ProcResult r =
        run_trainctl({"validate", "job.yaml", "--set", "training.steps=many"}, dir.path(), 10s);
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("--set training.steps=many: training.steps: expected an "
                                      "integer"));
  }
  SECTION("a value that breaks a cross-field invariant") {
    const ProcResult r =
        run_trainctl({"train", "job.yaml", "--set", "parallel.tp=3"}, dir.path(), 10s);
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("--set parallel.tp=3: parallel.tp: must divide "
                                      "model.n_head (4)"));
    CHECK(left_behind(dir.path(), "job.yaml").empty());
  }
}
