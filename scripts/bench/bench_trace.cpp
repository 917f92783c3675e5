// What profiling costs (observe/trace_recorder.h): the time of one instrumented place
// (a TraceScope) with profiling off (no recorder: a null pointer), outside the profiled
// steps (a recorder that is not active: one relaxed atomic load) and inside them (an
// event recorded: two clock reads and a locked push_back). Multiply by the events a step
// records (count them in a trace.json: rank 0 records a few hundred per step of a small
// dp x pp job) for the cost per step. One JSON line per case; medians of 7 runs.
//
//   bench_trace [--iterations 20000000]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "observe/trace_recorder.h"

namespace {

using trainctl::observe::TraceFields;
using trainctl::observe::TraceRecorder;
using trainctl::observe::TraceScope;

// Keeps the loop body from being folded away: the compiler must assume memory changed.
inline void clobber() { asm volatile("" ::: "memory"); }

template <typename Body>
double ns_per_iteration(long iterations, Body body) {
  std::vector<double> runs;
  for (int r = 0; r < 7; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < iterations; ++i) body(i);
    const auto t1 = std::chrono::steady_clock::now();
    runs.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() /
                   static_cast<double>(iterations));
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

void report(const char* name, double ns) {
  std::printf(R"({"case": "%s", "ns_per_site": %.3f})"
              "\n",
              name, ns);
}

}  // namespace

int main(int argc, char** argv) {
  long iterations = 20'000'000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      iterations = std::atol(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_trace [--iterations N]\n");
      return 2;
    }
  }
  // The recorder pointer comes through memory, as the engine's member does.
  TraceRecorder* volatile none = nullptr;
  TraceRecorder idle(1000, 1000);  // profiles step 1000 only
  idle.set_step(1);
  TraceRecorder* volatile idle_ptr = &idle;
  const double baseline = ns_per_iteration(iterations, [](long) { clobber(); });
  const double off = ns_per_iteration(iterations, [&](long i) {
    TraceFields f;
    f.layer = static_cast<int>(i);
    TraceScope scope(none, "forward", "compute", f);
    clobber();
  });
  const double inactive = ns_per_iteration(iterations, [&](long i) {
    TraceFields f;
    f.layer = static_cast<int>(i);
    TraceScope scope(idle_ptr, "forward", "compute", f);
    clobber();
  });
  TraceRecorder active(1, 1);
  active.set_step(1);
  const long recorded = std::min(iterations, 1'000'000L);  // events stay in memory
  const double on = ns_per_iteration(recorded, [&](long i) {
    TraceFields f;
    f.layer = static_cast<int>(i);
    TraceScope scope(&active, "forward", "compute", f);
    clobber();
    if (i + 1 == recorded) active.take();  // keep memory bounded between runs
  });
  report("empty_loop", baseline);
  report("profiling_off_null_recorder", off - baseline);
  report("outside_profiled_steps", inactive - baseline);
  report("event_recorded", on - baseline);
  return 0;
}
