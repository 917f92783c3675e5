#include "report/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

namespace trainctl::report {

namespace {

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
};

}  // namespace

const char* palette(size_t n) {
  static constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                            "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
  return kColors[n % (sizeof kColors / sizeof kColors[0])];
}

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string short_number(double v) {
  char b[32];
  const double a = std::fabs(v);
  if (a == 0) return "0";
  if (a >= 1e9) {
    std::snprintf(b, sizeof b, "%gG", v / 1e9);
  } else if (a >= 1e6) {
    std::snprintf(b, sizeof b, "%gM", v / 1e6);
  } else if (a >= 1e4) {
    std::snprintf(b, sizeof b, "%gk", v / 1e3);
  } else {
    std::snprintf(b, sizeof b, "%.4g", v);
  }
  return b;
}

std::vector<double> nice_ticks(double lo, double hi, int count) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / std::max(1, count);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

std::string line_plot_svg(const std::vector<Series>& series, const PlotOptions& o) {
  const double left = 64, right = 16, top = 30, bottom = 44;
  const double pw = o.width - left - right, ph = o.height - top - bottom;
  Range xr, yr;
  bool log_y = o.log_y;
  for (const Series& s : series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      xr.add(s.x[i]);
      yr.add(s.y[i]);
    }
  }
  if (log_y && !yr.empty() && yr.lo <= 0) log_y = false;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(o.width) +
                    "\" height=\"" + std::to_string(o.height) + "\" viewBox=\"0 0 " +
                    std::to_string(o.width) + " " + std::to_string(o.height) +
                    "\" class=\"chart\">";
  svg += "<text x=\"" + fmt(o.width / 2.0) + "\" y=\"18\" text-anchor=\"middle\" class=\"title\">" +
         xml_escape(o.title) + "</text>";
  if (xr.empty()) {
    svg += "<text x=\"" + fmt(o.width / 2.0) + "\" y=\"" + fmt(o.height / 2.0) +
           "\" text-anchor=\"middle\" class=\"muted\">no data</text></svg>";
    return svg;
  }
  auto ty = [&](double v) { return log_y ? std::log10(v) : v; };
  double y0 = ty(yr.lo), y1 = ty(yr.hi);
  if (y1 - y0 < 1e-12 * std::max(1.0, std::fabs(y1))) {
    const double pad = std::max(std::fabs(y0) * 0.05, log_y ? 0.1 : 1e-3);
    y0 -= pad;
    y1 += pad;
  } else {
    const double pad = (y1 - y0) * 0.05;
    y0 -= pad;
    y1 += pad;
  }
  double x0 = xr.lo, x1 = xr.hi;
  if (x1 <= x0) {
    x0 -= 1;
    x1 += 1;
  }
  auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return top + (1.0 - (ty(y) - y0) / (y1 - y0)) * ph; };
  // Grid and ticks.
  svg += "<g class=\"axis\">";
  for (double t : nice_ticks(x0, x1, 6)) {
    const std::string x = fmt(px(t));
    svg += "<line x1=\"" + x + "\" y1=\"" + fmt(top) + "\" x2=\"" + x + "\" y2=\"" + fmt(top + ph) +
           "\" class=\"grid\"/>";
    svg += "<text x=\"" + x + "\" y=\"" + fmt(top + ph + 16) + "\" text-anchor=\"middle\">" +
           short_number(t) + "</text>";
  }
  std::vector<double> yticks;
  if (log_y) {
    for (double e = std::floor(y0); e <= std::ceil(y1); e += 1) {
      if (e >= y0 && e <= y1) yticks.push_back(std::pow(10.0, e));
    }
    if (yticks.size() < 2) {
      yticks.clear();
      for (double t : nice_ticks(std::pow(10.0, y0), std::pow(10.0, y1), 5)) {
        if (t > 0) yticks.push_back(t);
      }
    }
  } else {
    yticks = nice_ticks(y0, y1, 5);
  }
  for (double t : yticks) {
    const std::string y = fmt(py(t));
    svg += "<line x1=\"" + fmt(left) + "\" y1=\"" + y + "\" x2=\"" + fmt(left + pw) + "\" y2=\"" +
           y + "\" class=\"grid\"/>";
    svg += "<text x=\"" + fmt(left - 6) + "\" y=\"" + y +
           "\" text-anchor=\"end\" dominant-baseline=\"middle\">" + short_number(t) + "</text>";
  }
  svg += "<rect x=\"" + fmt(left) + "\" y=\"" + fmt(top) + "\" width=\"" + fmt(pw) +
         "\" height=\"" + fmt(ph) + "\" class=\"frame\"/>";
  svg += "<text x=\"" + fmt(left + pw / 2) + "\" y=\"" + fmt(o.height - 6.0) +
         "\" text-anchor=\"middle\">" + xml_escape(o.x_label) + "</text>";
  svg += "<text transform=\"translate(14 " + fmt(top + ph / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + xml_escape(o.y_label) +
         (log_y ? " (log)" : "") + "</text></g>";
  // Series, then the legend, in the top right corner, as wide as its longest name.
  size_t longest = 0;
  for (const Series& s : series) longest = std::max(longest, s.name.size());
  const double legend_x = left + pw - 26 - 6.2 * static_cast<double>(std::min<size_t>(longest, 40));
  int legend_row = 0;
  for (const Series& s : series) {
    std::vector<std::pair<double, double>> pts;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i]) || (log_y && s.y[i] <= 0)) continue;
      pts.emplace_back(px(s.x[i]), py(s.y[i]));
    }
    if (pts.empty()) continue;
    if (pts.size() == 1) {  // a lone point would be an invisible polyline
      svg += "<circle cx=\"" + fmt(pts[0].first) + "\" cy=\"" + fmt(pts[0].second) +
             "\" r=\"3\" fill=\"" + s.color + "\"/>";
    } else {
      std::string points;
      for (const auto& [x, y] : pts) points += fmt(x) + "," + fmt(y) + " ";
      points.pop_back();
      svg += "<polyline fill=\"none\" stroke=\"" + s.color + "\" stroke-width=\"1.5\"" +
             (s.dashed ? " stroke-dasharray=\"5 3\"" : "") + " points=\"" + points + "\"/>";
    }
    const double ly = top + 8 + legend_row * 15;
    svg += "<line x1=\"" + fmt(legend_x) + "\" y1=\"" + fmt(ly) + "\" x2=\"" + fmt(legend_x + 18) +
           "\" y2=\"" + fmt(ly) + "\" stroke=\"" + s.color + "\" stroke-width=\"2\"" +
           (s.dashed ? " stroke-dasharray=\"5 3\"" : "") + "/>";
    svg += "<text x=\"" + fmt(legend_x + 22) + "\" y=\"" + fmt(ly) +
           "\" dominant-baseline=\"middle\" class=\"legend\">" + xml_escape(s.name) + "</text>";
    ++legend_row;
  }
  svg += "</svg>";
  return svg;
}

}  // namespace trainctl::report
