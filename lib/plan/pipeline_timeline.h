#pragma once
// Draws a simulated pipeline schedule as text, one line per stage, for `trainctl plan`:
//   stage 0 | F0 F1 F2 F3 .. .. .. B0 -- .. B1 -- ...
// Each cell is one time unit: a forward of mb 3 is "F3", a backward "B3" followed by "--"
// for each further unit it takes, idle time "..". The zero-bubble schedules' backward_input
// is drawn "B3", their backward_weight "W3". Cells are as wide as the largest label.
// With several chunks per stage (interleaved) the label ends in the chunk: a letter, chunk 0
// = 'a', 1 = 'b', ... ("F3a", "B3b"), or ".<chunk>" beyond 26 chunks ("F3.27").
#include <string>

#include "plan/pipeline_simulate.h"

namespace trainctl::parallel {

// The label suffix of `chunk` when a stage holds `virtual_stages` chunks: "" for one chunk.
std::string chunk_suffix(int chunk, int virtual_stages);

struct TimelineText {
  std::string text;     // one line per stage, each ending in '\n'
  int cells_drawn = 0;  // time units shown per line
  int cells_total = 0;  // time units of the whole schedule (makespan / time_unit, rounded up)
};

// Draws the first `max_cells` time units (all of them when the schedule is shorter); a line
// cut short ends in '>' instead of '|'. Span boundaries are rounded to whole units, so pick
// `time_unit` dividing the forward and backward costs. Throws std::invalid_argument unless
// time_unit > 0 and max_cells >= 1.
TimelineText draw_timeline(const Simulation& simulation, double time_unit = 1, int max_cells = 64);

}  // namespace trainctl::parallel
