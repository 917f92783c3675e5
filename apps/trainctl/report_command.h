#pragma once
// `trainctl report RUN_DIR [RUN_DIR ...] --out report.html [--x step|tokens] [--png FILE]`:
// one self-contained HTML page of one or more runs (lib/report/html_report.h). Returns the
// exit code; InputError (not a run directory, no metrics yet, no browser for --png)
// propagates to main.cpp, which maps it to 2.
#include <filesystem>
#include <string>
#include <vector>

namespace trainctl::app {

struct ReportArgs {
  std::vector<std::filesystem::path> runs;
  std::filesystem::path out;
  std::string x = "step";     // step | tokens
  std::filesystem::path png;  // empty: no picture
  double peak_tflops = 0.0;   // per worker, for MFU; 0: not shown
};

int cmd_report(const ReportArgs& args);

}  // namespace trainctl::app
