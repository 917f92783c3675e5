#include "observe/trace_json.h"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace trainctl::observe {

namespace {

std::string microseconds(int64_t ns) {
  char b[40];
  std::snprintf(b, sizeof b, "%.3f", static_cast<double>(ns) / 1000.0);
  return b;
}

}  // namespace

std::string rank_trace_events(const std::vector<TraceEvent>& events,
                              const std::vector<std::string>& thread_names, int rank,
                              const std::string& process_name, int64_t offset_ns) {
  std::string out;
  auto append = [&](const nlohmann::json& j) {
    if (!out.empty()) out += ",\n";
    out += j.dump();
  };
  append(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"args", {{"name", process_name}}}});
  append({{"name", "process_sort_index"},
          {"ph", "M"},
          {"pid", rank},
          {"args", {{"sort_index", rank}}}});
  for (size_t t = 0; t < thread_names.size(); ++t) {
    append({{"name", "thread_name"},
            {"ph", "M"},
            {"pid", rank},
            {"tid", t},
            {"args", {{"name", thread_names[t]}}}});
  }
  for (const TraceEvent& e : events) {
    nlohmann::json args = {{"step", e.step}};
    if (e.layer >= 0) args["layer"] = e.layer;
    if (e.micro_batch >= 0) args["mb"] = e.micro_batch;
    if (e.chunk >= 0) args["chunk"] = e.chunk;
    if (!e.group.empty()) args["group"] = e.group;
    if (e.bytes >= 0) args["bytes"] = e.bytes;
    if (e.peer >= 0) args["peer"] = e.peer;
    // ts/dur as exact decimal microseconds (nlohmann would print doubles at full precision).
    std::string line = nlohmann::json{{"name", e.name}, {"cat", e.category}, {"ph", "X"},
                                      {"pid", rank},    {"tid", e.thread},   {"args", args}}
                           .dump();
    line.pop_back();  // the closing brace
    line += ",\"ts\":" + microseconds(e.begin_ns - offset_ns) +
            ",\"dur\":" + microseconds(e.end_ns - e.begin_ns) + "}";
    if (!out.empty()) out += ",\n";
    out += line;
  }
  return out;
}

std::string trace_document(const std::vector<std::string>& rank_fragments,
                           const std::string& clock_note, int64_t first_step, int64_t last_step) {
  std::string doc = "{\"traceEvents\":[\n";
  bool first = true;
  for (const std::string& f : rank_fragments) {
    if (f.empty()) continue;
    if (!first) doc += ",\n";
    doc += f;
    first = false;
  }
  const nlohmann::json other = {{"clock_alignment", clock_note},
                                {"profile_steps", {first_step, last_step}},
                                {"producer", "trainctl"}};
  doc += "\n],\"displayTimeUnit\":\"ms\",\"otherData\":" + other.dump() + "}\n";
  return doc;
}

}  // namespace trainctl::observe
