// `trainctl report`: one self-contained HTML page from run directories, and its refusals
// (exit 2) for a directory that is not a run, a run with no metrics yet, a damaged line.
// The page in a real browser: tests/observe/check_report_browser.sh.
#include <catch2/catch.hpp>

#include "integration/helpers.h"

using namespace trainctl::test;

namespace {

// A run directory as a run leaves it: step 3 logged twice (a resume: the later line counts)
// and a last line the run is still writing.
fs::path fake_run(const fs::path& dir, const std::string& name) {
  const fs::path run = dir / name;
  fs::create_directories(run);
  write_text(
      run / "metrics.jsonl",
      R"({"step":1,"loss":4.5,"lr":0.001,"grad_norm":1.5,"tokens_per_s":1000,"step_ms":10,"comm_ms":2,"exposed_comm_ms":1,"optimizer_state_mb":0.5,"elapsed_s":0.1}
{"step":2,"loss":3.5,"lr":0.001,"grad_norm":1.2,"tokens_per_s":1100,"step_ms":9,"pipeline_idle_ms":[1.0,2.0],"pipeline_bubble":0.2,"elapsed_s":0.2}
{"step":3,"loss":2.5,"lr":0.001,"grad_norm":1.1,"tokens_per_s":1200,"step_ms":8,"val_loss":2.75,"elapsed_s":0.3}
{"step":3,"loss":2.25,"lr":0.001,"grad_norm":1.1,"tokens_per_s":1250,"step_ms":8,"val_loss":2.5,"loss_scale":65536,"elapsed_s":0.3}
{"step":4,"loss":2.)");
  return run;
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t i = text.find(what); i != std::string::npos; i = text.find(what, i + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE(
    "report writes one self-contained page: a resumed step counts once and an unfinished "
    "last line is skipped",
    "[report][integration]") {
  TempDir dir("report");
  const fs::path run = fake_run(dir.path(), "a");
  ProcResult r =
      run_trainctl({"report", run.string(), "--out", (dir / "r.html").string()}, dir.path());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("skipped the unfinished last line 5"));
  const std::string html = read_text(dir / "r.html");
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  // Self-contained: inline SVG, no scripts, nothing fetched.
  CHECK(count_of(html, "<svg") >= 6);
  CHECK(count_of(html, "<script") == 0);
  CHECK(count_of(html, "src=") == 0);
  CHECK(count_of(html, "href=") == 0);
  // The summary: 3 steps (step 3 once), the later line's loss, the best validation loss.
  CHECK_THAT(html, Catch::Contains("<td>3</td><td>3</td><td>2.2500</td><td>2.5000</td>"));
  CHECK_THAT(html, Catch::Contains("Training and validation loss"));
  CHECK_THAT(html, Catch::Contains("step-time breakdown"));
  CHECK_THAT(html, Catch::Contains("pipeline bubble"));
  CHECK_THAT(html, Catch::Contains("fp16 loss scale"));
  CHECK_THAT(html, Catch::Contains("optimizer_state_mb"));
  CHECK_FALSE(fs::exists(dir / "r.html.tmp"));

  // Two runs overlaid; a run of a real spec gets its rank map.
  const fs::path b = fake_run(dir.path(), "b");
  write_text(b / "config.resolved.yaml",
             "name: bee\nparallel: {dp: 2, tp: 2, pp: 2}\nmodel: {n_head: 4}\n"
             "training: {micro_batch_size: 2, global_batch_size: 8}\n");
  ProcResult two = run_trainctl(
      {"report", run.string(), b.string(), "--out", (dir / "two.html").string()}, dir.path());
  INFO(two.err);
  REQUIRE(two.exit_code == 0);
  const std::string both = read_text(dir / "two.html");
  CHECK_THAT(both, Catch::Contains("a loss"));
  CHECK_THAT(both, Catch::Contains("bee loss"));
  CHECK_THAT(both, Catch::Contains("Rank map"));
  // rank = (pp * dp + dp_rank) * tp + tp_rank: pp 1, dp 1 holds ranks 6 and 7.
  CHECK_THAT(both, Catch::Contains("<td>rank 6 (tp 0), rank 7 (tp 1)</td>"));

  // x = tokens seen: global batch 8 x seq_len 128 (the default) per step; a run without a
  // spec cannot say, and the page says so.
  ProcResult tokens = run_trainctl({"report", run.string(), b.string(), "--out",
                                    (dir / "tokens.html").string(), "--x", "tokens"},
                                   dir.path());
  REQUIRE(tokens.exit_code == 0);
  const std::string by_tokens = read_text(dir / "tokens.html");
  CHECK_THAT(by_tokens, Catch::Contains(">tokens</text>"));
  CHECK_THAT(by_tokens, Catch::Contains(">3072</text>"));  // step 3's x tick
  CHECK_THAT(by_tokens, Catch::Contains("a: tokens per step unknown"));
}

TEST_CASE("report draws trace.json as a Gantt chart, one row per rank and thread",
          "[report][integration]") {
  TempDir dir("report-trace");
  const fs::path run = fake_run(dir.path(), "t");
  write_text(run / "trace.json", R"({"traceEvents":[
{"name":"process_name","ph":"M","pid":0,"args":{"name":"rank 0"}},
{"name":"thread_name","ph":"M","pid":0,"tid":0,"args":{"name":"compute"}},
{"name":"forward","cat":"compute","ph":"X","ts":0,"dur":100,"pid":0,"tid":0,"args":{"mb":0}},
{"name":"backward","cat":"compute","ph":"X","ts":100,"dur":200,"pid":0,"tid":0},
{"name":"allreduce","cat":"comm","ph":"X","ts":150,"dur":80,"pid":0,"tid":1},
{"name":"forward","cat":"compute","ph":"X","ts":50,"dur":100,"pid":1,"tid":0}],
"otherData":{"clock_alignment":"max residual 12 us"}})");
  ProcResult r =
      run_trainctl({"report", run.string(), "--out", (dir / "r.html").string()}, dir.path());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::string html = read_text(dir / "r.html");
  CHECK_THAT(html, Catch::Contains("Timeline (trace.json)"));
  CHECK_THAT(html, Catch::Contains("rank 0 · compute"));
  CHECK_THAT(html, Catch::Contains("rank 0 · thread 1"));
  CHECK_THAT(html, Catch::Contains("rank 1 · thread 0"));
  CHECK_THAT(html, Catch::Contains("<title>forward mb=0 — 0.1 ms</title>"));
  CHECK_THAT(html, Catch::Contains("clocks: max residual 12 us"));

  // A damaged trace costs the chart, not the page.
  write_text(run / "trace.json", R"({"traceEvents":[{"ph":"X","pid":"zero","ts":1,"dur":1}]})");
  ProcResult damaged =
      run_trainctl({"report", run.string(), "--out", (dir / "d.html").string()}, dir.path());
  INFO(damaged.err);
  REQUIRE(damaged.exit_code == 0);
  CHECK_THAT(read_text(dir / "d.html"), Catch::Contains("t: no timeline: "));
}

TEST_CASE("report refuses what is not a run with metrics (exit 2)", "[report][integration]") {
  TempDir dir("report-bad");
  const std::string out = (dir / "r.html").string();
  ProcResult none = run_trainctl({"report", (dir / "missing").string(), "--out", out}, dir.path());
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.err, Catch::Contains("missing: not a directory"));

  fs::create_directories(dir / "plain");
  ProcResult plain = run_trainctl({"report", (dir / "plain").string(), "--out", out}, dir.path());
  CHECK(plain.exit_code == 2);
  CHECK_THAT(plain.err, Catch::Contains("plain: not a run directory (no metrics.jsonl or "
                                        "config.resolved.yaml)"));

  // A run that has started but not logged a whole line yet.
  fs::create_directories(dir / "young");
  write_text(dir / "young/metrics.jsonl", R"({"step":1,"lo)");
  ProcResult young = run_trainctl({"report", (dir / "young").string(), "--out", out}, dir.path());
  CHECK(young.exit_code == 2);
  CHECK_THAT(young.err, Catch::Contains("no metrics yet"));

  // A damaged line in the middle is not a run still writing: named with its line.
  fs::create_directories(dir / "bad");
  write_text(dir / "bad/metrics.jsonl", "{\"step\":1,\"loss\":2}\nnot json\n{\"step\":2}\n");
  ProcResult bad = run_trainctl({"report", (dir / "bad").string(), "--out", out}, dir.path());
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("bad/metrics.jsonl:2: not a metrics line"));
  CHECK_FALSE(fs::exists(out));

  ProcResult axis =
      run_trainctl({"report", (dir / "bad").string(), "--out", out, "--x", "time"}, dir.path());
  CHECK(axis.exit_code == 2);
}
