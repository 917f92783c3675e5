// `trainctl report RUN... --out FILE`: options and help; the page is built in
// report_command.cpp (lib/report).
#include "cli.h"
#include "report_command.h"

namespace trainctl::app {

void add_report_command(CLI::App& app, Dispatches& out) {
  auto o = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "report", "One HTML page of a run's curves, throughput, step time, rank map and timeline");
  cmd->add_option("run_dir", o->runs, "Run directories (several: curves overlaid)")->required();
  cmd->add_option("--out", o->out, "The HTML file to write")->required();
  cmd->add_option("--x", o->x, "x axis of the curves: step or tokens (seen so far)")
      ->capture_default_str()
      ->check(CLI::IsMember({"step", "tokens"}));
  cmd->add_option("--png", o->png, "Also write a picture of the page (needs a headless chromium)");
  cmd->add_option("--peak-tflops", o->peak_tflops,
                  "Each worker's peak TFLOP/s: adds MFU (model FLOP/s / (workers x peak))")
      ->check(CLI::PositiveNumber);
  cmd->footer(
      "Example:\n  trainctl report runs/quickstart --out report.html\n"
      "  trainctl report runs/a runs/b --out compare.html --x tokens --png compare.png\n\n"
      "One self-contained HTML file (inline SVG, no scripts, works offline): loss and\n"
      "validation loss (runs overlaid), tokens/s, model FLOP/s (and MFU with --peak-tflops),\n"
      "the step-time breakdown (compute, exposed communication, pipeline bubble, DP wait),\n"
      "memory and the fp16 loss scale when logged, the rank map, and a Gantt chart of every\n"
      "rank when the run was profiled (trace.json, `train --profile A:B`). Reads a running\n"
      "job too: an unfinished last line of metrics.jsonl is skipped. Exit code 2 when a\n"
      "directory is not a run or has no metrics yet, or --png finds no chromium.");
  out.push_back({cmd, [o] { return cmd_report(*o); }});
}

}  // namespace trainctl::app
