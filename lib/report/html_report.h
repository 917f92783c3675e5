#pragma once
// `trainctl report`'s page: one self-contained HTML file (inline SVG and CSS, no scripts,
// nothing fetched), readable offline and in a headless browser. Sections: each run's
// summary; loss and validation loss (runs overlaid); tokens/s; model FLOP/s and MFU; the
// step-time breakdown (compute, exposed communication, pipeline bubble, DP wait); memory
// and the fp16 loss scale when logged; the rank map; the Gantt chart of trace.json.
#include <string>
#include <vector>

#include "report/run_data.h"

namespace trainctl::report {

struct ReportOptions {
  bool x_tokens = false;     // x axis: tokens seen instead of steps
  double peak_tflops = 0.0;  // per worker; > 0 adds MFU (model FLOP/s / (world x peak))
};

// Takes the runs by value (a long run's metrics are large: move them in, no copy is made).
std::string render_report(std::vector<RunData> runs, const ReportOptions& options);

}  // namespace trainctl::report
