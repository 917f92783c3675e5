// The timeline recorder (observe/trace_recorder.h) and its trace-event JSON: recording only
// inside the profiled steps, threads told apart, times shifted onto the reference clock.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <thread>

#include "observe/trace_json.h"
#include "observe/trace_recorder.h"

using namespace trainctl::observe;

TEST_CASE("trace recorder: records steps A..B only and a null recorder records nothing",
          "[observe]") {
  TraceRecorder rec(2, 3);
  for (int64_t step = 1; step <= 4; ++step) {
    rec.set_step(step);
    TraceFields f;
    f.layer = static_cast<int>(step);
    TraceScope scope(&rec, "forward", "compute", f);
  }
  { TraceScope nothing(nullptr, "forward", "compute"); }
  const std::vector<TraceEvent> events = rec.take();
  REQUIRE(events.size() == 2);
  CHECK(events[0].step == 2);
  CHECK(events[1].step == 3);
  CHECK(events[0].layer == 2);
  CHECK(events[0].end_ns >= events[0].begin_ns);
  CHECK(std::string(events[0].name) == "forward");
  rec.set_step(3);
  rec.stop();
  { TraceScope after_stop(&rec, "forward", "compute"); }
  CHECK(rec.take().empty());
}

TEST_CASE("trace recorder: each recording thread gets its number and role", "[observe]") {
  TraceRecorder rec(1, 1);
  rec.set_step(1);
  { TraceScope main_thread(&rec, "backward", "compute"); }
  std::thread comm([&] { TraceScope s(&rec, "allreduce", "comm"); });
  comm.join();
  const auto events = rec.take();
  REQUIRE(events.size() == 2);
  CHECK(events[0].thread == 0);
  CHECK(events[1].thread == 1);
  CHECK(rec.thread_names() == std::vector<std::string>{"training", "comm"});
}

TEST_CASE("trace JSON: one process per rank, times in microseconds on the reference clock",
          "[observe]") {
  TraceEvent e;
  e.name = "allreduce";
  e.category = "comm";
  e.begin_ns = 5'000'000;
  e.end_ns = 5'002'500;
  e.step = 7;
  e.bytes = 4096;
  e.group = "dp[0]";
  const std::string fragment = rank_trace_events({e}, {"training"}, 3, "rank 3", 1'000'000);
  const auto doc = nlohmann::json::parse(trace_document({fragment, ""}, "note", 7, 8));
  const auto& events = doc["traceEvents"];
  REQUIRE(events.size() == 4);  // process name, sort index, thread name, the event
  CHECK(events[0]["args"]["name"] == "rank 3");
  const auto& x = events[3];
  CHECK(x["ph"] == "X");
  CHECK(x["pid"] == 3);
  CHECK(x["tid"] == 0);
  CHECK(x["ts"].get<double>() == Approx(4000.0));  // (5 ms - 1 ms offset) in us
  CHECK(x["dur"].get<double>() == Approx(2.5));
  CHECK(x["args"]["group"] == "dp[0]");
  CHECK(x["args"]["bytes"] == 4096);
  CHECK(x["args"]["step"] == 7);
  CHECK(doc["otherData"]["clock_alignment"] == "note");
  CHECK(doc["otherData"]["profile_steps"] == nlohmann::json::array({7, 8}));
}
