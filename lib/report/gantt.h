#pragma once
// The Gantt chart of a profiled run: one row per (rank, thread) of run_dir/trace.json
// (Chrome trace-event format, "X" complete events), one bar per event, coloured by what it
// is (forward, backward, pipeline send/receive, collectives, optimizer, data, checkpoint),
// each with a tooltip. Shows the pipeline schedule as it really ran.
#include <filesystem>
#include <string>

namespace trainctl::report {

struct GanttChart {
  std::string svg;   // "" when the trace has no events
  std::string note;  // e.g. how many events were left out, the clock alignment error
};

// Throws InputError naming the file when it is not a trace-event JSON document (the report
// then shows the message in the chart's place).
GanttChart gantt_from_trace(const std::filesystem::path& trace_json, int width = 1100);

}  // namespace trainctl::report
