// lib/report: metrics.jsonl read into columns (a resumed step once, the later line; keys only
// replaced lines had dropped) and long curves thinned for a chart (first, lowest, highest
// and last point of each bucket, in order).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "report/downsample.h"
#include "report/html_report.h"
#include "report/run_data.h"
#include "test_scratch.h"

namespace fs = std::filesystem;
using trainctl::report::Series;

TEST_CASE("metrics.jsonl becomes columns, one row per step, the later line of a step wins",
          "[report]") {
  const trainctl::test::ScratchDir scratch("report_metrics");
  const fs::path& dir = scratch.path;
  std::ofstream(dir / "metrics.jsonl")
      << "{\"step\":1,\"loss\":4.0,\"ranks\":[1,2]}\n"
         "{\"step\":2,\"loss\":3.0,\"old\":7}\n"
         "{\"step\":3,\"loss\":2.0,\"flag\":true}\n"
         "{\"step\":2,\"loss\":2.5}\n"  // a resume from step 1 logged step 2 again
         "{\"step\":4,\"loss\":1.5}\n";
  const trainctl::report::RunData run = trainctl::report::load_run(dir);
  const auto& m = run.metrics;
  REQUIRE(m.steps == std::vector<int64_t>{1, 2, 3, 4});
  CHECK(m.value("loss", 1) == 2.5);
  CHECK(m.value("loss", 3) == 1.5);
  CHECK(m.value("ranks/1", 0) == 2.0);
  CHECK(std::isnan(m.value("ranks/1", 1)));
  CHECK(m.value("flag", 2) == 1.0);
  CHECK_FALSE(m.has("old"));  // only the replaced line of step 2 had it
  CHECK(std::isnan(m.value("missing", 0)));
  for (const auto& [key, column] : m.columns) CHECK(column.size() == m.size());
}

TEST_CASE("a long curve is thinned to 4 points per bucket, keeping its extremes", "[report]") {
  Series s;
  const size_t n = 100003;
  for (size_t i = 0; i < n; ++i) {
    s.x.push_back(static_cast<double>(i));
    s.y.push_back(std::sin(static_cast<double>(i) / 500.0));
  }
  s.y[54321] = 10.0;  // a spike
  s.y[777] = -10.0;   // a dip
  Series thin = s;
  trainctl::report::downsample_for_plot(thin, 1000);
  CHECK(thin.x.size() == thin.y.size());
  CHECK(thin.x.size() <= 4000);
  CHECK(thin.x.size() >= 2000);
  CHECK(thin.x.front() == 0.0);
  CHECK(thin.x.back() == static_cast<double>(n - 1));
  CHECK(std::is_sorted(thin.x.begin(), thin.x.end()));
  CHECK(*std::max_element(thin.y.begin(), thin.y.end()) == 10.0);
  CHECK(*std::min_element(thin.y.begin(), thin.y.end()) == -10.0);
  bool kept_points_are_the_curves = true;
  for (size_t i = 0; i < thin.x.size(); ++i) {
    kept_points_are_the_curves &= thin.y[i] == s.y[static_cast<size_t>(thin.x[i])];
  }
  CHECK(kept_points_are_the_curves);

  Series small = s;
  small.x.resize(4000);
  small.y.resize(4000);
  const Series before = small;
  trainctl::report::downsample_for_plot(small, 1000);
  CHECK(small.x == before.x);
  CHECK(small.y == before.y);
}

TEST_CASE("a fault-tolerant run's report draws the live replicas and lists each change",
          "[report]") {
  const trainctl::test::ScratchDir scratch("report_replicas");
  const fs::path& dir = scratch.path;
  std::ofstream(dir / "metrics.jsonl") << "{\"step\":1,\"loss\":4.0,\"replicas\":3}\n"
                                          "{\"step\":2,\"loss\":3.0,\"replicas\":2}\n"
                                          "{\"step\":3,\"loss\":2.0,\"replicas\":2}\n"
                                          "{\"step\":4,\"loss\":1.5,\"replicas\":3}\n";
  std::vector<trainctl::report::RunData> runs{trainctl::report::load_run(dir)};
  const std::string html = trainctl::report::render_report(std::move(runs), {});
  CHECK(html.find("Live replicas (fault tolerance)") != std::string::npos);
  CHECK(html.find("<h2>Membership changes</h2>") != std::string::npos);
  CHECK(html.find("<td>2</td><td>3 → 2</td>") != std::string::npos);
  CHECK(html.find("<td>4</td><td>2 → 3</td>") != std::string::npos);
  CHECK(html.find("<td>3</td><td>2 → 2</td>") == std::string::npos);

  std::ofstream(dir / "metrics.jsonl", std::ios::trunc) << "{\"step\":1,\"loss\":4.0}\n";
  std::vector<trainctl::report::RunData> plain{trainctl::report::load_run(dir)};
  const std::string without = trainctl::report::render_report(std::move(plain), {});
  CHECK(without.find("Membership changes") == std::string::npos);
  CHECK(without.find("Live replicas") == std::string::npos);
}
