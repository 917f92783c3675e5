#include "plan/pipeline_timeline.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace trainctl::parallel {
namespace {

int digits(int value) { return static_cast<int>(std::to_string(value).size()); }

int to_cell(double time, double time_unit) {
  return static_cast<int>(std::llround(time / time_unit));
}

// F forward, B backward (or its input half), W the zero-bubble schedules' weight gradients.
std::string span_letter(OpKind kind) {
  if (kind == OpKind::forward) return "F";
  return kind == OpKind::backward_weight ? "W" : "B";
}

}  // namespace

std::string chunk_suffix(int chunk, int virtual_stages) {
  constexpr int kLetters = 26;
  if (virtual_stages <= 1) return "";
  if (virtual_stages <= kLetters) return std::string(1, static_cast<char>('a' + chunk));
  return "." + std::to_string(chunk);
}

TimelineText draw_timeline(const Simulation& sim, double time_unit, int max_cells) {
  if (!(time_unit > 0) || max_cells < 1) {
    throw std::invalid_argument("draw_timeline: time_unit must be > 0 and max_cells >= 1");
  }
  int max_mb = 0;
  for (const StageTimeline& stage : sim.stages) {
    for (const ComputeSpan& span : stage.spans) max_mb = std::max(max_mb, span.micro_batch);
  }
  // "F" + the number + the widest chunk suffix.
  const size_t width = 1 + static_cast<size_t>(digits(max_mb)) +
                       chunk_suffix(sim.virtual_stages - 1, sim.virtual_stages).size();
  TimelineText out;
  out.cells_total = static_cast<int>(std::ceil(sim.makespan / time_unit - 1e-9));
  out.cells_drawn = std::min(out.cells_total, max_cells);
  const bool cut = out.cells_drawn < out.cells_total;
  const int label_width = digits(std::max<int>(0, static_cast<int>(sim.stages.size()) - 1));

  for (size_t s = 0; s < sim.stages.size(); ++s) {
    std::vector<std::string> cells(out.cells_drawn, std::string(width, '.'));
    for (const ComputeSpan& span : sim.stages[s].spans) {
      const int first = to_cell(span.start, time_unit);
      const int last = std::max(first + 1, to_cell(span.end, time_unit));
      for (int c = first; c < std::min(last, out.cells_drawn); ++c) {
        if (c == first) {
          std::string label = span_letter(span.kind) + std::to_string(span.micro_batch) +
                              chunk_suffix(span.chunk, sim.virtual_stages);
          label.resize(width, ' ');
          cells[c] = label;
        } else {
          cells[c] = std::string(width, '-');
        }
      }
    }
    std::string number = std::to_string(s);
    std::string line = "stage " + std::string(label_width - number.size(), ' ') + number + " |";
    for (const std::string& cell : cells) line += " " + cell;
    line += cut ? " >\n" : " |\n";
    out.text += line;
  }
  return out;
}

}  // namespace trainctl::parallel
