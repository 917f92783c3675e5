#include "report/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

#include "comm/rank_coords.h"
#include "report/downsample.h"
#include "report/gantt.h"
#include "report/svg_plot.h"

namespace trainctl::report {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double no_value(const RunData&, size_t) { return kNaN; }

constexpr const char* kStyle = R"(
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.muted{color:#777;fill:#777} table{border-collapse:collapse;font-size:13px;margin:6px 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right} th{background:#f4f4f4}
td:first-child,th:first-child{text-align:left} .grid-2{display:flex;flex-wrap:wrap;gap:12px}
svg.chart{background:#fff;border:1px solid #e4e4e4;font-size:11px}
svg .title{font-size:13px;font-weight:600} svg .grid{stroke:#eee} svg .frame{fill:none;stroke:#999}
svg .legend{font-size:11px} svg .band{fill:#f7f7f7} svg .rowlabel{font-size:11px}
svg text{fill:#333} .note{font-size:12px;color:#777}
)";

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

bool any_run_has(const std::vector<RunData>& runs, const std::string& key) {
  for (const RunData& r : runs) {
    if (r.metrics.has(key)) return true;
  }
  return false;
}

class Page {
 public:
  Page(const std::vector<RunData>& runs, const ReportOptions& o) : runs_(runs), o_(o) {}

  double x_of(const RunData& r, size_t row) const {
    const int64_t step = r.metrics.steps[row];
    if (!o_.x_tokens) return static_cast<double>(step);
    return r.tokens_per_step > 0 ? static_cast<double>(step * r.tokens_per_step) : kNaN;
  }
  std::string x_label() const { return o_.x_tokens ? "tokens" : "step"; }

  // One run's curve of `value(run, row)` over the rows (non-finite values are skipped),
  // thinned to what a chart can show (downsample_for_plot).
  template <typename F>
  Series series(size_t run, const std::string& name, bool dashed, size_t color, F value) const {
    Series s;
    s.name = name;
    s.color = palette(color);
    s.dashed = dashed;
    const RunData& r = runs_[run];
    for (size_t row = 0; row < r.metrics.size(); ++row) {
      const double v = value(r, row);
      if (!std::isfinite(v)) continue;
      s.x.push_back(x_of(r, row));
      s.y.push_back(v);
    }
    downsample_for_plot(s);
    return s;
  }
  Series key_series(size_t run, const std::string& key, const std::string& name, bool dashed,
                    size_t color) const {
    const auto it = runs_[run].metrics.columns.find(key);
    if (it == runs_[run].metrics.columns.end()) return series(run, name, dashed, color, no_value);
    const std::vector<double>& column = it->second;
    return series(run, name, dashed, color,
                  [&](const RunData&, size_t row) { return column[row]; });
  }
  std::string run_label(size_t i, const std::string& what) const {
    return runs_.size() > 1 ? runs_[i].name + " " + what : what;
  }

  std::string plot(const std::vector<Series>& s, const std::string& title, const std::string& y,
                   bool log_y = false) const {
    return line_plot_svg(s, {title, x_label(), y, log_y, 600, 320});
  }

  std::string render() const {
    std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>";
    std::string names;
    for (const RunData& r : runs_) names += (names.empty() ? "" : ", ") + r.name;
    h += "trainctl report: " + xml_escape(names) + "</title><style>" + kStyle +
         "</style></head><body>\n<h1>trainctl report: " + xml_escape(names) + "</h1>\n";
    h += summary_table();
    h += "<h2>Loss</h2><div class=\"grid-2\">" + loss_plot() + replicas_plot() + "</div>\n";
    h += membership_changes();
    h += "<h2>Throughput</h2><div class=\"grid-2\">" + throughput_plots() + "</div>\n";
    h += breakdown();
    h += memory_and_scale();
    h += moe_plots();
    h += rank_maps();
    h += gantts();
    h += notes();
    h += "</body></html>\n";
    return h;
  }

 private:
  std::string summary_table() const {
    std::string t =
        "<table><tr><th>run</th><th>directory</th><th>layout (dp×tp×pp)</th><th>device</th>"
        "<th>steps logged</th><th>last step</th><th>final loss</th><th>best val loss</th>"
        "<th>tokens/s (median)</th></tr>";
    for (const RunData& r : runs_) {
      double best_val = kNaN;
      std::vector<double> tps;
      for (size_t row = 0; row < r.metrics.size(); ++row) {
        const double v = r.metrics.value("val_loss", row);
        if (std::isfinite(v) && !(best_val <= v)) best_val = v;
        const double s = r.metrics.value("tokens_per_s", row);
        if (std::isfinite(s)) tps.push_back(s);
      }
      std::sort(tps.begin(), tps.end());
      const size_t last = r.metrics.size() - 1;
      t += "<tr><td>" + xml_escape(r.name) + "</td><td>" + xml_escape(r.dir.string()) +
           "</td><td>" +
           (r.layout ? std::to_string(r.layout->dp) + "×" + std::to_string(r.layout->tp) + "×" +
                           std::to_string(r.layout->pp)
                     : "?") +
           "</td><td>" + xml_escape(r.device.empty() ? "?" : r.device) + "</td><td>" +
           std::to_string(r.metrics.size()) + "</td><td>" + std::to_string(r.metrics.steps[last]) +
           "</td><td>" + fmt("%.4f", r.metrics.value("loss", last)) + "</td><td>" +
           (std::isfinite(best_val) ? fmt("%.4f", best_val) : "–") + "</td><td>" +
           (tps.empty() ? "–" : short_number(tps[tps.size() / 2])) + "</td></tr>";
    }
    return t + "</table>\n";
  }

  // runtime.fault_tolerance: the live replicas each step trained with.
  std::string replicas_plot() const {
    if (!any_run_has(runs_, "replicas")) return "";
    std::vector<Series> s;
    for (size_t i = 0; i < runs_.size(); ++i) {
      s.push_back(key_series(i, "replicas", run_label(i, "live replicas"), false, i));
    }
    return plot(s, "Live replicas (fault tolerance)", "replicas");
  }
  // Each step whose live replicas differ from the previous logged step's.
  std::string membership_changes() const {
    std::string rows;
    for (size_t i = 0; i < runs_.size(); ++i) {
      const MetricsTable& m = runs_[i].metrics;
      if (!m.has("replicas")) continue;
      double before = kNaN;
      for (size_t row = 0; row < m.size(); ++row) {
        const double v = m.value("replicas", row);
        if (!std::isfinite(v)) continue;
        if (std::isfinite(before) && v != before) {
          rows += "<tr><td>" + xml_escape(runs_[i].name) + "</td><td>" +
                  std::to_string(m.steps[row]) + "</td><td>" + fmt("%.0f", before) + " → " +
                  fmt("%.0f", v) + "</td></tr>";
        }
        before = v;
      }
    }
    if (rows.empty()) return "";
    return "<h2>Membership changes</h2><table class=\"membership\"><tr><th>run</th><th>step</th>"
           "<th>live replicas</th></tr>" +
           rows + "</table>\n";
  }

  std::string loss_plot() const {
    std::vector<Series> s;
    for (size_t i = 0; i < runs_.size(); ++i) {
      s.push_back(key_series(i, "loss", run_label(i, "loss"), false, i));
      s.push_back(key_series(i, "val_loss", run_label(i, "val loss"), true, i));
    }
    return plot(s, "Training and validation loss", "loss (nats/token)");
  }

  std::string throughput_plots() const {
    std::vector<Series> tps, flops, mfu;
    for (size_t i = 0; i < runs_.size(); ++i) {
      tps.push_back(key_series(i, "tokens_per_s", run_label(i, "tokens/s"), false, i));
      if (runs_[i].flops_per_token <= 0) continue;
      flops.push_back(
          series(i, run_label(i, "model TFLOP/s"), false, i, [](const RunData& r, size_t row) {
            return r.metrics.value("tokens_per_s", row) * r.flops_per_token / 1e12;
          }));
      if (o_.peak_tflops > 0 && runs_[i].layout) {
        mfu.push_back(series(i, run_label(i, "MFU %"), false, i, [&](const RunData& r, size_t row) {
          return 100.0 * r.metrics.value("tokens_per_s", row) * r.flops_per_token / 1e12 /
                 (o_.peak_tflops * r.layout->world_size());
        }));
      }
    }
    std::string out = plot(tps, "Throughput", "tokens/s");
    if (!flops.empty()) {
      out += plot(flops, "Model FLOP/s (6N + 12·L·d·T per token)", "TFLOP/s, all workers");
    }
    if (!mfu.empty()) {
      out += plot(mfu, "MFU at " + fmt("%g", o_.peak_tflops) + " TFLOP/s peak per worker",
                  "% of peak");
    } else {
      out +=
          "<p class=\"note\">MFU: give each worker's peak with --peak-tflops (e.g. 989 for an "
          "H100's bf16 dense peak) to plot model FLOP/s as a share of it.</p>";
    }
    return out;
  }

  std::string breakdown() const {
    std::string out;
    for (size_t i = 0; i < runs_.size(); ++i) {
      std::vector<Series> s;
      s.push_back(key_series(i, "step_ms", "step", false, 0));
      s.push_back(series(i, "compute", false, 2, [](const RunData& r, size_t row) {
        const double step = r.metrics.value("step_ms", row);
        double exposed = r.metrics.value("exposed_comm_ms", row);
        double bubble = r.metrics.value("pipeline_bubble", row) * step;
        if (!std::isfinite(exposed)) exposed = 0;
        if (!std::isfinite(bubble)) bubble = 0;
        return step - exposed - bubble;
      }));
      s.push_back(key_series(i, "exposed_comm_ms", "exposed comm", false, 1));
      s.push_back(key_series(i, "comm_ms", "comm (all)", true, 1));
      s.push_back(series(i, "pipeline bubble", false, 4, [](const RunData& r, size_t row) {
        return r.metrics.value("pipeline_bubble", row) * r.metrics.value("step_ms", row);
      }));
      s.push_back(key_series(i, "dp_wait_max_ms", "DP wait (max)", true, 3));
      s.push_back(key_series(i, "data_wait_ms", "data wait", false, 5));
      out += plot(s, run_label(i, "step-time breakdown"), "ms per step");
    }
    if (!out.empty()) {
      out +=
          "<p class=\"note\">compute = step time - exposed communication - pipeline bubble "
          "(bubble = pipeline_bubble x step time).</p>";
    }
    return "<h2>Step time</h2><div class=\"grid-2\">" + out + "</div>\n";
  }

  std::string memory_and_scale() const {
    std::set<std::string> mem_keys;
    for (const RunData& r : runs_) {
      for (const auto& [k, column] : r.metrics.columns) {
        if (k.size() > 3 && k.compare(k.size() - 3, 3, "_mb") == 0) mem_keys.insert(k);
      }
    }
    std::string out;
    if (!mem_keys.empty()) {
      std::vector<Series> s;
      size_t c = 0;
      for (size_t i = 0; i < runs_.size(); ++i) {
        for (const std::string& k : mem_keys)
          s.push_back(key_series(i, k, run_label(i, k), false, c++));
      }
      out += plot(s, "Memory", "MiB");
    }
    if (any_run_has(runs_, "loss_scale")) {
      std::vector<Series> s;
      for (size_t i = 0; i < runs_.size(); ++i) {
        s.push_back(key_series(i, "loss_scale", run_label(i, "loss scale"), false, i));
      }
      out += plot(s, "fp16 loss scale", "scale", true);
    }
    if (any_run_has(runs_, "grad_norm") || any_run_has(runs_, "lr")) {
      std::vector<Series> g, l;
      for (size_t i = 0; i < runs_.size(); ++i) {
        g.push_back(key_series(i, "grad_norm", run_label(i, "grad norm"), false, i));
        l.push_back(key_series(i, "lr", run_label(i, "lr"), false, i));
      }
      out += plot(g, "Gradient norm", "global L2 norm") + plot(l, "Learning rate", "lr");
    }
    return out.empty()
               ? ""
               : "<h2>Memory, loss scale, optimizer</h2><div class=\"grid-2\">" + out + "</div>\n";
  }

  // Mixture-of-experts runs: each MoE layer's load imbalance, and each expert's share of
  // its layer's routed tokens over the steps (metrics.jsonl's moe_* keys).
  std::string moe_plots() const {
    std::string out;
    for (size_t i = 0; i < runs_.size(); ++i) {
      const auto& columns = runs_[i].metrics.columns;
      std::vector<Series> imbalance;
      std::string per_layer;
      for (const auto& [key, column] : columns) {
        const std::string prefix = "moe_load_imbalance/";
        if (key.compare(0, prefix.size(), prefix) != 0) continue;
        const std::string layer = key.substr(prefix.size());
        imbalance.push_back(key_series(i, key, "layer " + layer, false, imbalance.size()));
        std::vector<Series> load;
        for (size_t e = 0; columns.count("moe_expert_load/" + layer + "/" + std::to_string(e));
             ++e) {
          load.push_back(key_series(i, "moe_expert_load/" + layer + "/" + std::to_string(e),
                                    "expert " + std::to_string(e), false, e));
        }
        per_layer += plot(load, run_label(i, "expert load, layer " + layer),
                          "share of the layer's routed tokens");
      }
      if (imbalance.empty()) continue;
      out += plot(imbalance, run_label(i, "MoE load imbalance"), "max tokens per expert / mean");
      std::vector<Series> other;
      other.push_back(key_series(i, "moe_aux_loss", "aux loss", false, 0));
      other.push_back(key_series(i, "moe_dropped_fraction", "dropped fraction", false, 1));
      out += plot(other, run_label(i, "MoE aux loss and dropped tokens"), "value") + per_layer;
    }
    return out.empty() ? ""
                       : "<h2>Mixture of experts</h2><div class=\"grid-2\">" + out + "</div>\n";
  }

  std::string rank_maps() const {
    std::string out;
    for (const RunData& r : runs_) {
      if (!r.layout) continue;
      const Layout& l = *r.layout;
      out +=
          "<p>" + xml_escape(r.name) + ": world " + std::to_string(l.world_size()) + " = dp " +
          std::to_string(l.dp) + " × tp " + std::to_string(l.tp) + " × pp " + std::to_string(l.pp) +
          " (rank = (pp·dp + dp)·tp + tp: TP peers adjacent)</p><table><tr><th>pipeline stage</th>";
      for (int d = 0; d < l.dp; ++d) out += "<th>dp " + std::to_string(d) + "</th>";
      out += "</tr>";
      for (int p = 0; p < l.pp; ++p) {
        out += "<tr><td>pp " + std::to_string(p) + "</td>";
        for (int d = 0; d < l.dp; ++d) {
          std::string cell;
          for (int t = 0; t < l.tp; ++t) {
            const int rank = comm::rank_of(l, comm::Coord{d, t, p});
            cell += (t ? ", " : "") + std::string("rank ") + std::to_string(rank) +
                    (l.tp > 1 ? " (tp " + std::to_string(t) + ")" : "");
          }
          out += "<td>" + cell + "</td>";
        }
        out += "</tr>";
      }
      out += "</table>";
    }
    return out.empty() ? "" : "<h2>Rank map</h2>\n" + out + "\n";
  }

  std::string gantts() const {
    std::string out;
    for (const RunData& r : runs_) {
      if (!r.trace) continue;
      GanttChart g;
      try {
        g = gantt_from_trace(*r.trace);
      } catch (const std::exception& e) {  // a damaged trace costs its chart, not the page
        out += "<p class=\"note\">" + xml_escape(r.name) +
               ": no timeline: " + xml_escape(e.what()) + "</p>";
        continue;
      }
      out += "<p>" + xml_escape(r.name) + ": " + xml_escape(r.trace->string()) +
             " (open it in Perfetto UI or chrome://tracing for details)</p>";
      out += g.svg.empty() ? "<p class=\"note\">the trace has no events</p>" : g.svg;
      if (!g.note.empty()) out += "<p class=\"note\">" + xml_escape(g.note) + "</p>";
    }
    return out.empty() ? "" : "<h2>Timeline (trace.json)</h2>\n" + out + "\n";
  }

  std::string notes() const {
    std::string out;
    for (const RunData& r : runs_) {
      if (o_.x_tokens && r.tokens_per_step <= 0) {
        out += "<li>" + xml_escape(r.name) +
               ": tokens per step unknown (no readable config.resolved.yaml), so its curves are "
               "left out with --x tokens</li>";
      }
      for (const std::string& n : r.notes) out += "<li>" + xml_escape(n) + "</li>";
    }
    return out.empty() ? "" : "<h2>Notes</h2><ul class=\"note\">" + out + "</ul>\n";
  }

  const std::vector<RunData>& runs_;
  const ReportOptions& o_;
};

}  // namespace

std::string render_report(std::vector<RunData> runs, const ReportOptions& options) {
  // Runs of one spec share its name: tell them apart by their directories.
  std::multiset<std::string> names;
  for (const RunData& r : runs) names.insert(r.name);
  for (RunData& r : runs) {
    if (names.count(r.name) > 1) r.name += " (" + r.dir.filename().string() + ")";
  }
  return Page(runs, options).render();
}

}  // namespace trainctl::report
