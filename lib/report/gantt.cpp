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

}  // namespace

namespace {
GanttChart draw(const std::filesystem::path& trace_json, const nlohmann::json& doc, int width);
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

namespace {

GanttChart draw(const std::filesystem::path& trace_json, const nlohmann::json& doc, int width) {
  const nlohmann::json& events = doc.is_object() ? doc.at("traceEvents") : doc;
  if (!events.is_array()) {
    throw InputError(trace_json.string() + ": no traceEvents array");
  }
  std::map<int, std::string> process_names;
  std::map<std::pair<int, int>, std::string> thread_names;
  std::map<std::pair<int, int>, std::vector<Bar>> rows;
  size_t total = 0;
  double t0 = 0, t1 = 0;
  bool any = false;
  for (const auto& e : events) {
    if (!e.is_object()) continue;
    const std::string ph = e.value("ph", "");
    const int pid = e.value("pid", 0), tid = e.value("tid", 0);
    if (ph == "M") {
      const std::string what = e.value("name", "");
      const std::string label = e.contains("args") ? e["args"].value("name", "") : "";
      if (what == "process_name") process_names[pid] = label;
      if (what == "thread_name") thread_names[{pid, tid}] = label;
      continue;
    }
    if (ph != "X" || !e.contains("ts") || !e.contains("dur")) continue;
    ++total;
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
    t0 = any ? std::min(t0, b.ts) : b.ts;
    t1 = any ? std::max(t1, b.ts + b.dur) : b.ts + b.dur;
    any = true;
    rows[{pid, tid}].push_back(std::move(b));
  }
  GanttChart chart;
  if (!any) return chart;
  if (total > kMaxBars) {
    chart.note = "showing the first " + std::to_string(kMaxBars) + " of " + std::to_string(total) +
                 " events; open trace.json in Perfetto UI for all";
  }
  if (doc.is_object() && doc.contains("otherData") && doc["otherData"].is_object()) {
    const auto& od = doc["otherData"];
    if (od.contains("clock_alignment")) {
      chart.note += (chart.note.empty() ? "" : "; ") + std::string("clocks: ") +
                    od["clock_alignment"].get<std::string>();
    }
  }
  const double label_w = 190, right = 12, top = 26, row_h = 18, axis_h = 36;
  const double pw = width - label_w - right;
  const double span = std::max(t1 - t0, 1.0);
  const double height = top + row_h * static_cast<double>(rows.size()) + axis_h;
  auto px = [&](double ts) { return label_w + (ts - t0) / span * pw; };
  std::string& svg = chart.svg;
  svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
        "\" height=\"" + fmt(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " +
        fmt(height) + "\" class=\"chart\">";
  svg += "<text x=\"" + fmt(width / 2.0) +
         "\" y=\"16\" text-anchor=\"middle\" class=\"title\">Timeline of the profiled steps "
         "(every rank)</text>";
  size_t drawn = 0;
  int r = 0;
  for (auto& [key, bars] : rows) {
    const double y = top + r * row_h;
    const auto pn = process_names.find(key.first);
    const auto tn = thread_names.find(key);
    const std::string label =
        (pn != process_names.end() ? pn->second : "rank " + std::to_string(key.first)) + " · " +
        (tn != thread_names.end() ? tn->second : "thread " + std::to_string(key.second));
    if (r % 2 == 0) {
      svg += "<rect x=\"0\" y=\"" + fmt(y) + "\" width=\"" + std::to_string(width) +
             "\" height=\"" + fmt(row_h) + "\" class=\"band\"/>";
    }
    svg += "<text x=\"4\" y=\"" + fmt(y + row_h / 2) +
           "\" dominant-baseline=\"middle\" class=\"rowlabel\">" + xml_escape(label) + "</text>";
    std::sort(bars.begin(), bars.end(), [](const Bar& a, const Bar& b) { return a.ts < b.ts; });
    for (const Bar& b : bars) {
      if (drawn++ >= kMaxBars) break;
      const double w = std::max(b.dur / span * pw, 0.5);
      svg += "<rect x=\"" + fmt(px(b.ts)) + "\" y=\"" + fmt(y + 2) + "\" width=\"" + fmt(w) +
             "\" height=\"" + fmt(row_h - 4) + "\" fill=\"" + color_of(b.name, b.category) +
             "\"><title>" + xml_escape(b.name + b.detail) + " — " + fmt(b.dur / 1000.0) +
             " ms</title></rect>";
    }
    ++r;
  }
  const double ay = top + row_h * static_cast<double>(rows.size());
  for (double t : nice_ticks(0, span / 1000.0, 8)) {
    const double x = px(t0 + t * 1000.0);
    svg += "<line x1=\"" + fmt(x) + "\" y1=\"" + fmt(top) + "\" x2=\"" + fmt(x) + "\" y2=\"" +
           fmt(ay) + "\" class=\"grid\"/><text x=\"" + fmt(x) + "\" y=\"" + fmt(ay + 14) +
           "\" text-anchor=\"middle\" class=\"axis\">" + short_number(t) + " ms</text>";
  }
  // The legend: what the colours mean.
  double lx = label_w;
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
  svg += "</svg>";
  return chart;
}

}  // namespace

}  // namespace trainctl::report
