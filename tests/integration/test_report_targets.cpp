// `trainctl report --out/--png`: the page never replaces a file of a run it reports
// (metrics.jsonl, config.resolved.yaml, a checkpoint's files, logs), a directory is refused
// (exit 2) and no temporary file is left behind; a long run's page stays small.
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

#include "integration/helpers.h"

using namespace trainctl::test;

namespace {

const char* kMetrics =
    "{\"step\":1,\"loss\":4.5,\"tokens_per_s\":1000,\"step_ms\":10}\n"
    "{\"step\":2,\"loss\":3.5,\"tokens_per_s\":1100,\"step_ms\":9}\n";
const char* kConfig = "name: tee\nparallel: {dp: 1}\n";
const char* kMetadata = "{\"step\":2}\n";

// A run directory with the files a run leaves: metrics, resolved spec, a checkpoint, a log.
fs::path fake_run(const fs::path& dir) {
  const fs::path run = dir / "run";
  fs::create_directories(run / "checkpoints/step_00000002");
  fs::create_directories(run / "logs");
  write_text(run / "metrics.jsonl", kMetrics);
  write_text(run / "config.resolved.yaml", kConfig);
  write_text(run / "checkpoints/step_00000002/metadata.json", kMetadata);
  write_text(run / "logs/rank_0.log", "log\n");
  return run;
}

// Files whose name ends in ".tmp" anywhere under `dir`.
std::vector<std::string> temporary_files(const fs::path& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() >= 4 && name.compare(name.size() - 4, 4, ".tmp") == 0) {
      found.push_back(e.path().string());
    }
  }
  return found;
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t i = text.find(what); i != std::string::npos; i = text.find(what, i + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("report --out refuses the run's own files and directories (exit 2)",
          "[report][integration]") {
  TempDir dir("report-out");
  const fs::path run = fake_run(dir.path());
  fs::create_directories(dir / "cwd");
  const fs::path cwd = dir / "cwd";
  for (const std::string own :
       {"metrics.jsonl", "config.resolved.yaml", "checkpoints/step_00000002/metadata.json",
        "logs/rank_0.log", "checkpoints/report.html", "logs/new.html", "model.safetensors"}) {
    INFO(own);
    ProcResult r = run_trainctl({"report", run.string(), "--out", (run / own).string()}, cwd);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains((run / own).string()) &&
                          Catch::Contains("is a file of the run directory"));
  }
  CHECK(read_text(run / "metrics.jsonl") == kMetrics);
  CHECK(read_text(run / "config.resolved.yaml") == kConfig);
  CHECK(read_text(run / "checkpoints/step_00000002/metadata.json") == kMetadata);
  CHECK(read_text(run / "logs/rank_0.log") == "log\n");
  CHECK_FALSE(fs::exists(run / "model.safetensors"));
  CHECK_FALSE(fs::exists(run / "checkpoints/report.html"));

  // A link elsewhere that points at a run file is that file.
  fs::create_symlink(run / "metrics.jsonl", dir / "link.html");
  ProcResult link =
      run_trainctl({"report", run.string(), "--out", (dir / "link.html").string()}, cwd);
  CHECK(link.exit_code == 2);
  CHECK(read_text(run / "metrics.jsonl") == kMetrics);
  // --png follows the same rule.
  ProcResult png = run_trainctl({"report", run.string(), "--out", (dir / "r.html").string(),
                                 "--png", (run / "metrics.jsonl").string()},
                                cwd);
  CHECK(png.exit_code == 2);

  // A directory, or a file in a missing one: exit 2, and no DIR.tmp.
  ProcResult d = run_trainctl({"report", run.string(), "--out", cwd.string()}, cwd);
  CHECK(d.exit_code == 2);
  CHECK_THAT(d.err, Catch::Contains("is a directory: give a file name such as"));
  ProcResult missing =
      run_trainctl({"report", run.string(), "--out", (dir / "no/r.html").string()}, cwd);
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("does not exist"));
  CHECK(temporary_files(dir.path()).empty());
  CHECK_FALSE(fs::exists(dir / "cwd.tmp"));

  // The run's own page directly in it: written, and written again over the earlier one.
  for (int i = 0; i < 2; ++i) {
    ProcResult ok =
        run_trainctl({"report", run.string(), "--out", (run / "report.html").string()}, cwd);
    INFO(ok.err);
    CHECK(ok.exit_code == 0);
  }
  CHECK(read_text(run / "report.html").rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(temporary_files(dir.path()).empty());
}

TEST_CASE("report of a long run draws at most a few thousand points per curve",
          "[report][integration]") {
  TempDir dir("report-long");
  const fs::path run = dir / "long";
  fs::create_directories(run);
  // 50000 steps; one loss spike (9.0 at step 31234) that the thinned curve must keep.
  std::string lines;
  for (int s = 1; s <= 50000; ++s) {
    const double loss = s == 31234 ? 9.0 : 3.0 + (s % 7) * 0.01;
    lines += "{\"step\":" + std::to_string(s) + ",\"loss\":" + std::to_string(loss) + "}\n";
  }
  write_text(run / "metrics.jsonl", lines);
  ProcResult r =
      run_trainctl({"report", run.string(), "--out", (dir / "r.html").string()}, dir.path());
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string html = read_text(dir / "r.html");
  // The loss chart's polyline: at most 4000 "x,y" pairs (50000 without thinning).
  const size_t at = html.find("<polyline");
  REQUIRE(at != std::string::npos);
  const size_t begin = html.find("points=\"", at) + 8, end = html.find('"', begin);
  const std::string points = html.substr(begin, end - begin);
  const int pairs = count_of(points, ",");
  CHECK(pairs > 1000);
  CHECK(pairs <= 4000);
  // The spike (9.0 against 3.0-3.06 elsewhere) is still drawn: near the plot's top
  // (y = 30 px; the other points lie below 250 px).
  double top_y = 1e9;
  std::istringstream in(points);
  for (std::string pair; in >> pair;)
    top_y = std::min(top_y, std::stod(pair.substr(pair.find(',') + 1)));
  CHECK(top_y < 50);
  CHECK(fs::file_size(dir / "r.html") < 400000);
  // The summary still counts every step.
  CHECK_THAT(html, Catch::Contains("<td>50000</td><td>50000</td>"));
}
