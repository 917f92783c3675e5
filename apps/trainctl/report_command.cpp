#include "report_command.h"

#include <cstdio>
#include <fstream>

#include "report/html_report.h"
#include "report/run_data.h"
#include "report/screenshot.h"
#include "util/error.h"
#include "util/exit_codes.h"

namespace trainctl::app {

int cmd_report(const ReportArgs& args) {
  if (!args.png.empty() && report::find_chromium().empty()) {
    throw InputError(
        "--png needs a headless Chromium and none is on PATH (chromium, "
        "chromium-browser, google-chrome); on Debian: apt-get install chromium. "
        "Nothing was written");
  }
  std::vector<report::RunData> runs;
  for (const auto& dir : args.runs) runs.push_back(report::load_run(dir));
  report::ReportOptions options;
  options.x_tokens = args.x == "tokens";
  options.peak_tflops = args.peak_tflops;
  const std::string html = report::render_report(runs, options);
  const auto tmp = args.out.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << html;
    f.close();
    if (!f) throw InputError("cannot write " + args.out.string());
  }
  std::filesystem::rename(tmp, args.out);
  for (const auto& r : runs) {
    for (const auto& note : r.notes) std::fprintf(stderr, "note: %s\n", note.c_str());
  }
  std::printf("report: %s (%zu run%s)\n", args.out.c_str(), runs.size(),
              runs.size() == 1 ? "" : "s");
  if (!args.png.empty()) {
    report::screenshot_png(args.out, html, args.png);
    std::printf("picture: %s\n", args.png.c_str());
  }
  return kExitOk;
}

}  // namespace trainctl::app
