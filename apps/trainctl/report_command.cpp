#include "report_command.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <utility>

#include "report/html_report.h"
#include "report/run_data.h"
#include "report/screenshot.h"
#include "util/error.h"
#include "util/exit_codes.h"

namespace trainctl::app {

namespace {

namespace fs = std::filesystem;

// The path with symbolic links resolved as far as it exists, so a link into a run
// directory counts as inside it.
fs::path resolved(const fs::path& p) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(fs::absolute(p), ec);
  return ec ? fs::absolute(p).lexically_normal() : r;
}

bool is_inside(const fs::path& path, const fs::path& dir) {
  const fs::path rel = path.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

// `option`'s file (--out: ".html", --png: ".png"): a file whose directory exists. Inside a
// run being reported only a `extension` file directly in the run directory is accepted
// (RUN/report.html: a new page, or an earlier report replaced); everything else there is
// the run's own (metrics.jsonl, config.resolved.yaml, checkpoints/, logs/, the model, ...)
// and a report must never replace it.
void check_target(const std::string& option, const fs::path& out, const std::string& extension,
                  const std::vector<fs::path>& runs) {
  std::error_code ec;
  if (fs::is_directory(out, ec)) {
    throw InputError(option + " " + out.string() + " is a directory: give a file name such as " +
                     (out / ("report" + extension)).string());
  }
  const fs::path parent = fs::absolute(out).parent_path();
  if (!fs::is_directory(parent, ec)) {
    throw InputError(option + " " + out.string() + ": directory " + parent.string() +
                     " does not exist");
  }
  const fs::path target = resolved(out);
  for (const fs::path& run : runs) {
    const fs::path dir = resolved(run);
    if (!is_inside(target, dir)) continue;
    const bool own_page = target.parent_path() == dir && target.extension() == extension;
    if (!own_page) {
      throw InputError(option + " " + out.string() + " is a file of the run directory " +
                       run.string() + " (the report would replace it): write the report outside " +
                       "it, or as a new " + extension + " file directly in it (e.g. " +
                       (run / ("report" + extension)).string() + ")");
    }
  }
}

// `text` into `out` through a temporary file beside it (the rename is atomic); the
// temporary file is removed whatever fails.
void write_atomically(const fs::path& out, const std::string& text) {
  const fs::path tmp = out.string() + "." + std::to_string(::getpid()) + ".tmp";
  try {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    if (!f) throw InputError("cannot write " + out.string() + " (is the disk full?)");
    fs::rename(tmp, out);
  } catch (const fs::filesystem_error& e) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw InputError("cannot write " + out.string() + ": " + e.code().message());
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
}

}  // namespace

int cmd_report(const ReportArgs& args) {
  if (!args.png.empty() && report::find_chromium().empty()) {
    throw InputError(
        "--png needs a headless Chromium and none is on PATH (chromium, "
        "chromium-browser, google-chrome); on Debian: apt-get install chromium. "
        "Nothing was written");
  }
  check_target("--out", args.out, ".html", args.runs);
  if (!args.png.empty()) {
    check_target("--png", args.png, ".png", args.runs);
    if (resolved(args.png) == resolved(args.out)) {
      throw InputError("--png " + args.png.string() + " is the --out file: give another name");
    }
  }
  std::vector<report::RunData> runs;
  for (const auto& dir : args.runs) runs.push_back(report::load_run(dir));
  report::ReportOptions options;
  options.x_tokens = args.x == "tokens";
  options.peak_tflops = args.peak_tflops;
  std::vector<std::string> notes;
  for (const auto& r : runs) notes.insert(notes.end(), r.notes.begin(), r.notes.end());
  const size_t count = runs.size();
  const std::string html = report::render_report(std::move(runs), options);
  write_atomically(args.out, html);
  for (const auto& note : notes) std::fprintf(stderr, "note: %s\n", note.c_str());
  std::printf("report: %s (%zu run%s)\n", args.out.c_str(), count, count == 1 ? "" : "s");
  if (!args.png.empty()) {
    report::screenshot_png(args.out, html, args.png);
    std::printf("picture: %s\n", args.png.c_str());
  }
  return kExitOk;
}

}  // namespace trainctl::app
