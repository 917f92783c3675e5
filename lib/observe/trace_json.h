#pragma once
// Chrome trace-event JSON (what Perfetto UI and chrome://tracing open) for the merged
// trace.json: one process per rank, one thread per recording thread, "X" (complete) events
// with the step, layer, micro-batch, chunk, group, bytes and peer as args.
#include <cstdint>
#include <string>
#include <vector>

#include "observe/trace_recorder.h"

namespace trainctl::observe {

// One rank's events as comma-separated JSON objects (no brackets), ready to join with other
// ranks'. `offset_ns` is subtracted from every time (this rank's clock minus the reference
// clock); times are written in microseconds. `process_name` labels the rank.
std::string rank_trace_events(const std::vector<TraceEvent>& events,
                              const std::vector<std::string>& thread_names, int rank,
                              const std::string& process_name, int64_t offset_ns);

// The whole document: every rank's fragment, and `clock_note` (how the clocks were aligned
// and the residual error) under otherData.
std::string trace_document(const std::vector<std::string>& rank_fragments,
                           const std::string& clock_note, int64_t first_step, int64_t last_step);

}  // namespace trainctl::observe
