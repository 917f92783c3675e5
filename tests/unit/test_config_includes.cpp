// `include:` in job specs (issue 37, item 3; docs/job-spec.md, "Includes"): merged key by
// key, errors pointing into the file that set the value, relative paths resolved against
// that file's directory, cycles and missing files named with the include chain.
#include "test_config_helpers.h"

namespace {

namespace fs = std::filesystem;
using trainctl::config::load_job_spec;
using trainctl::config::testing::TempDir;

std::string load_error(const fs::path& file, const std::vector<std::string>& overrides = {}) {
  try {
    load_job_spec(file, overrides);
  } catch (const trainctl::InputError& e) {
    return e.what();
  }
  FAIL("no InputError for " << file);
  return "";
}

constexpr const char* kBase = R"(name: base
model: {n_layer: 3, d_model: 64}
optimizer:
  lr: 0.01
  warmup_steps: 5
)";

}  // namespace

TEST_CASE("config: include merges key by key, the including file on top", "[config]") {
  const TempDir dir;
  dir.write_text("base.yaml", kBase);
  dir.write_text("more.yaml", "optimizer: {warmup_steps: 9}\ntraining: {steps: 40}\n");
  const fs::path job = dir.write_text("job.yaml", R"(include: [base.yaml, more.yaml]
name: job
optimizer:
  lr: 0.002
)");
  const auto spec = load_job_spec(job);
  CHECK(spec.name == "job");
  CHECK(spec.model.n_layer == 3);           // from base.yaml
  CHECK(spec.optimizer.lr == 0.002);        // job.yaml's own wins
  CHECK(spec.optimizer.warmup_steps == 9);  // more.yaml, after base.yaml, wins
  CHECK(spec.training.steps == 40);
  CHECK(spec.run_dir == dir.path() / "runs/job");  // next to the spec that was run
  // A single name works as well as a list; --set still goes on top of everything.
  const fs::path one = dir.write_text("one.yaml", "include: base.yaml\n");
  CHECK(load_job_spec(one, {"optimizer.lr=0.5"}).optimizer.lr == 0.5);
  CHECK(load_job_spec(one).optimizer.lr == 0.01);
}

TEST_CASE("config: an error in an included value points into the included file", "[config]") {
  const TempDir dir;
  dir.write_text("base.yaml", "name: base\nmodel: {n_layer: 0}\ntraining: {lr: 1}\n");
  const fs::path job = dir.write_text("job.yaml", "include: base.yaml\ntraining: {steps: 2}\n");
  const std::string base = (dir.path() / "base.yaml").string();
  const std::string message = load_error(job);
  INFO(message);
  // The first problem read is model.n_layer, set in base.yaml line 2.
  CHECK(message.rfind(base + ":2:18: model.n_layer: must be between 1", 0) == 0);
  const std::string lr = load_error(job, {"model.n_layer=2"});
  CHECK(lr.rfind(base + ":3:12: training.lr: unknown key. Did you mean `optimizer.lr`?", 0) == 0);
}

TEST_CASE("config: relative paths resolve against the directory of the file that set them",
          "[config]") {
  const TempDir dir;
  fs::create_directories(dir.path() / "shared" / "data");
  dir.write_text("shared/data/corpus.txt", std::string(8192, 'x'));
  dir.write_text("shared/base.yaml",
                 "name: base\nmodel: {vocab_size: 256}\ndata: {type: text, path: "
                 "data/corpus.txt}\nrun_dir: runs/base\n");
  fs::create_directories(dir.path() / "exp");
  const fs::path job = dir.write_text("exp/job.yaml", "include: ../shared/base.yaml\n");
  const auto spec = load_job_spec(job);
  CHECK(spec.data.path == dir.path() / "shared/data/corpus.txt");
  CHECK(spec.run_dir == dir.path() / "shared/runs/base");
  // The including file's own relative path: against its own directory.
  const fs::path own =
      dir.write_text("exp/own.yaml", "include: ../shared/base.yaml\nrun_dir: runs/own\n");
  CHECK(load_job_spec(own).run_dir == dir.path() / "exp/runs/own");
}

TEST_CASE("config: include cycles and missing include files name the chain", "[config]") {
  const TempDir dir;
  dir.write_text("a.yaml", "include: b.yaml\nname: a\n");
  dir.write_text("b.yaml", "include: [a.yaml]\n");
  const fs::path job = dir.write_text("job.yaml", "include: a.yaml\n");
  const std::string cycle = load_error(job);
  INFO(cycle);
  const std::string p = dir.path().string() + "/";
  CHECK(cycle.rfind(p + "b.yaml:1:11: include: includes itself", 0) == 0);
  CHECK(cycle.find("include chain: " + p + "job.yaml -> " + p + "a.yaml -> " + p + "b.yaml -> " +
                   p + "a.yaml") != std::string::npos);
  dir.write_text("c.yaml", "include: nowhere.yaml\n");
  const fs::path missing = dir.write_text("m.yaml", "name: m\ninclude: c.yaml\n");
  const std::string gone = load_error(missing);
  INFO(gone);
  CHECK(gone.rfind(p + "c.yaml:1:10: include: ", 0) == 0);
  CHECK(gone.find("nowhere.yaml") != std::string::npos);
  CHECK(gone.find("include chain: " + p + "m.yaml -> " + p + "c.yaml -> " + p + "nowhere.yaml") !=
        std::string::npos);
  const fs::path bad = dir.write_text("bad.yaml", "include: {a: 1}\n");
  CHECK(load_error(bad).find("include: expected a file name") != std::string::npos);
}

TEST_CASE("config: a key given twice in one file is still an error after includes", "[config]") {
  const TempDir dir;
  dir.write_text("base.yaml", kBase);
  const fs::path job = dir.write_text("job.yaml", "include: base.yaml\nseed: 1\nseed: 2\n");
  CHECK(load_error(job).find("seed: given twice") != std::string::npos);
}

TEST_CASE("config: a problem with a merged section points at its key", "[config]") {
  const TempDir dir;
  dir.write_text("base.yaml", "name: base\nmodel: {vocab_size: 256}\ndata: {type: text}\n");
  const fs::path job =
      dir.write_text("job.yaml", "include: base.yaml\ndata: {val_fraction: 0.1}\n");
  // data.path is missing: the message points at the `data:` of the including file.
  CHECK(load_error(job).rfind(job.string() + ":2:1: data.path: is required", 0) == 0);
}
