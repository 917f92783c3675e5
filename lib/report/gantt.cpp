#include "report/gantt.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

#include "report/svg_plot.h"
#include "util/error.h"

namespace trainctl::report {

namespace {

constexpr size_t kMaxBars = 20000;  // keeps the page light; Perfetto shows the rest

struct Bar {
  double ts = 0, dur = 0;
  std::string name, category, detail;
};

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

// One colour per kind of work, so a schedule reads at a glance.
const char* color_of(const std::string& name, const std::string& category) {
  if (name.rfind("forward", 0) == 0) return "#4e79a7";
  if (name.rfind("backward", 0) == 0) return "#f28e2b";
  if (name.rfind("send", 0) == 0 || name.rfind("recv", 0) == 0) return "#76b7b2";
  if (name.rfind("optimizer", 0) == 0) return "#59a14f";
  if (name.rfind("data", 0) == 0) return "#edc948";
  if (name.rfind("checkpoint", 0) == 0) return "#b07aa1";
  if (category == "comm") return "#e15759";
  return "#9c755f";
}

// The "X" (complete) events of a trace, one row per (pid, tid), with the names the "M"
// (metadata) events give processes and threads, and the time they span.
struct TraceRows {
  std::map<int, std::string> process_names;
  std::map<std::pair<int, int>, std::string> thread_names;
  std::map<std::pair<int, int>, std::vector<Bar>> rows;
  size_t total = 0;  // events, drawn or not
  double t0 = 0, t1 = 0;

  std::string label(const std::pair<int, int>& key) const {
    const auto pn = process_names.find(key.first);
    const auto tn = thread_names.find(key);
    return (pn != process_names.end() ? pn->second : "rank " + std::to_string(key.first)) + " · " +
           (tn != thread_names.end() ? tn->second : "thread " + std::to_string(key.second));
  }
};

Bar bar_of(const nlohmann::json& e) {
  Bar b;
  b.ts = e["ts"].get<double>();
  b.dur = e["dur"].get<double>();
  b.name = e.value("name", "");
  b.category = e.value("cat", "");
  if (e.contains("args") && e["args"].is_object()) {
    for (const auto& [k, v] : e["args"].items()) {
      b.detail += " " + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
    }
  }
  return b;
}

TraceRows collect_rows(const nlohmann::json& events) {
  TraceRows t;
  for (const auto& e : events) {
    if (!e.is_object()) continue;
    const std::string ph = e.value("ph", "");
    const int pid = e.value("pid", 0), tid = e.value("tid", 0);
    if (ph == "M") {
      const std::string what = e.value("name", "");
      const std::string label = e.contains("args") ? e["args"].value("name", "") : "";
      if (what == "process_name") t.process_names[pid] = label;
      if (what == "thread_name") t.thread_names[{pid, tid}] = label;
      continue;
    }
    if (ph != "X" || !e.contains("ts") || !e.contains("dur")) continue;
    Bar b = bar_of(e);
    t.t0 = t.total > 0 ? std::min(t.t0, b.ts) : b.ts;
    t.t1 = t.total > 0 ? std::max(t.t1, b.ts + b.dur) : b.ts + b.dur;
    ++t.total;
    t.rows[{pid, tid}].push_back(std::move(b));
  }
  return t;
}

// What the chart leaves out, and how well the ranks' clocks were aligned.
std::string chart_note(const nlohmann::json& doc, size_t total) {
  std::string note;
  if (total > kMaxBars) {
    note = "showing the first " + std::to_string(kMaxBars) + " of " + std::to_string(total) +
           " events; open trace.json in Perfetto UI for all";
  }
  if (doc.is_object() && doc.contains("otherData") && doc["otherData"].is_object()) {
    const auto& od = doc["otherData"];
    if (od.contains("clock_alignment")) {
      note += (note.empty() ? "" : "; ") + std::string("clocks: ") +
              od["clock_alignment"].get<std::string>();
    }
  }
  return note;
}

// The geometry: a label column, one row per (rank, thread), the time axis below.
struct Geometry {
  static constexpr double label_w = 190, right = 12, top = 26, row_h = 18, axis_h = 36;
  int width = 0;
  double t0 = 0, span = 1, pw = 0;
  double px(double ts) const { return label_w + (ts - t0) / span * pw; }
};

// One row: its band (every other row), its label and its bars in time order, while fewer
// than kMaxBars were drawn (`drawn` counts across rows).
std::string row_svg(const std::string& label, std::vector<Bar>& bars, int r, const Geometry& g,
                    size_t& drawn) {
  const double y = Geometry::top + r * Geometry::row_h, row_h = Geometry::row_h;
  std::string svg;
  if (r % 2 == 0) {
    svg += "<rect x=\"0\" y=\"" + fmt(y) + "\" width=\"" + std::to_string(g.width) +
           "\" height=\"" + fmt(row_h) + "\" class=\"band\"/>";
  }
  svg += "<text x=\"4\" y=\"" + fmt(y + row_h / 2) +
         "\" dominant-baseline=\"middle\" class=\"rowlabel\">" + xml_escape(label) + "</text>";
  std::sort(bars.begin(), bars.end(), [](const Bar& a, const Bar& b) { return a.ts < b.ts; });
  for (const Bar& b : bars) {
    if (drawn++ >= kMaxBars) break;
    const double w = std::max(b.dur / g.span * g.pw, 0.5);
    svg += "<rect x=\"" + fmt(g.px(b.ts)) + "\" y=\"" + fmt(y + 2) + "\" width=\"" + fmt(w) +
           "\" height=\"" + fmt(row_h - 4) + "\" fill=\"" + color_of(b.name, b.category) +
           "\"><title>" + xml_escape(b.name + b.detail) + " — " + fmt(b.dur / 1000.0) +
           " ms</title></rect>";
  }
  return svg;
}

// Milliseconds since the first event, with grid lines, along the bottom at `ay`.
std::string time_axis_svg(const Geometry& g, double ay) {
  std::string svg;
  for (double t : nice_ticks(0, g.span / 1000.0, 8)) {
    const double x = g.px(g.t0 + t * 1000.0);
    svg += "<line x1=\"" + fmt(x) + "\" y1=\"" + fmt(Geometry::top) + "\" x2=\"" + fmt(x) +
           "\" y2=\"" + fmt(ay) + "\" class=\"grid\"/><text x=\"" + fmt(x) + "\" y=\"" +
           fmt(ay + 14) + "\" text-anchor=\"middle\" class=\"axis\">" + short_number(t) +
           " ms</text>";
  }
  return svg;
}

// What the colours mean, in one line under the axis.
std::string legend_svg(double ay) {
  std::string svg;
  double lx = Geometry::label_w;
  for (const auto& [name, cat] :
       std::vector<std::pair<std::string, std::string>>{{"forward", ""},
                                                        {"backward", ""},
                                                        {"send/recv", ""},
                                                        {"collective", "comm"},
                                                        {"optimizer", ""},
                                                        {"data", ""},
                                                        {"checkpoint", ""}}) {
    svg += "<rect x=\"" + fmt(lx) + "\" y=\"" + fmt(ay + 18) +
           "\" width=\"10\" height=\"8\" fill=\"" +
           color_of(name == "collective" ? "" : name, cat) + "\"/><text x=\"" + fmt(lx + 13) +
           "\" y=\"" + fmt(ay + 26) + "\" class=\"legend\">" + name + "</text>";
    lx += 95;
  }
  return svg;
}

GanttChart draw(const std::filesystem::path& trace_json, const nlohmann::json& doc, int width) {
  const nlohmann::json& events = doc.is_object() ? doc.at("traceEvents") : doc;
  if (!events.is_array()) {
    throw InputError(trace_json.string() + ": no traceEvents array");
  }
  TraceRows t = collect_rows(events);
  GanttChart chart;
  if (t.total == 0) return chart;
  chart.note = chart_note(doc, t.total);
  Geometry g;
  g.width = width;
  g.t0 = t.t0;
  g.span = std::max(t.t1 - t.t0, 1.0);
  g.pw = width - Geometry::label_w - Geometry::right;
  const double rows = static_cast<double>(t.rows.size());
  const double height = Geometry::top + Geometry::row_h * rows + Geometry::axis_h;
  std::string& svg = chart.svg;
  svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
        "\" height=\"" + fmt(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " +
        fmt(height) + "\" class=\"chart\">";
  svg += "<text x=\"" + fmt(width / 2.0) +
         "\" y=\"16\" text-anchor=\"middle\" class=\"title\">Timeline of the profiled steps "
         "(every rank)</text>";
  size_t drawn = 0;
  int r = 0;
  for (auto& [key, bars] : t.rows) svg += row_svg(t.label(key), bars, r++, g, drawn);
  const double ay = Geometry::top + Geometry::row_h * rows;
  svg += time_axis_svg(g, ay) + legend_svg(ay) + "</svg>";
  return chart;
}

}  // namespace

GanttChart gantt_from_trace(const std::filesystem::path& trace_json, int width) {
  std::ifstream in(trace_json);
  nlohmann::json doc;
  try {
    in >> doc;
  } catch (const std::exception& e) {
    throw InputError(trace_json.string() + ": not a trace-event JSON document (" + e.what() + ")");
  }
  try {
    return draw(trace_json, doc, width);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(trace_json.string() + ": not a trace-event document (" + e.what() + ")");
  }
}

}  // namespace trainctl::report
