#pragma once
// The end of a profiled run (logging.profile_steps): every rank's timeline merged into one
// Chrome trace-event file, run_dir/trace.json (observe/trace_json.h), on world rank 0.
//
// Clocks: each worker's events carry its own steady clock. World rank 0 aligns every other
// rank's clock to its own by ping-pong over the world communicator (itself set up through the
// rendezvous store): 16 round trips per rank, offset = peer time - midpoint of the round trip
// with the shortest time, whose half is the bound on the residual error, reported in the file
// (otherData.clock_alignment) and returned. On one host the clocks are the same
// (CLOCK_MONOTONIC) and the measured offsets are ~0 within that bound.
#include <filesystem>
#include <string>

#include "comm/process_groups.h"
#include "observe/trace_recorder.h"

namespace trainctl::train {

// Collective over groups.world: every rank calls it once, after its last step. Returns the
// clock note on rank 0 ("" elsewhere). Stops the recorder first.
std::string write_merged_trace(observe::TraceRecorder& recorder, comm::ProcessGroups& groups,
                               const std::filesystem::path& trace_json);

}  // namespace trainctl::train
