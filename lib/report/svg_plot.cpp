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

namespace {

// The plot area inside the margins and the data-to-pixel mapping: the data's range padded
// by 5% (a flat series gets a small band), the y axis log10 when asked and possible.
struct Frame {
  static constexpr double left = 64, right = 16, top = 30, bottom = 44;
  double pw = 0, ph = 0;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  bool log_y = false;

  double ty(double v) const { return log_y ? std::log10(v) : v; }
  double px(double x) const { return left + (x - x0) / (x1 - x0) * pw; }
  double py(double y) const { return top + (1.0 - (ty(y) - y0) / (y1 - y0)) * ph; }
};

Frame frame_of(const Range& xr, const Range& yr, const PlotOptions& o, bool log_y) {
  Frame f;
  f.pw = o.width - Frame::left - Frame::right;
  f.ph = o.height - Frame::top - Frame::bottom;
  f.log_y = log_y;
  f.y0 = f.ty(yr.lo);
  f.y1 = f.ty(yr.hi);
  const double pad = f.y1 - f.y0 < 1e-12 * std::max(1.0, std::fabs(f.y1))
                         ? std::max(std::fabs(f.y0) * 0.05, log_y ? 0.1 : 1e-3)
                         : (f.y1 - f.y0) * 0.05;
  f.y0 -= pad;
  f.y1 += pad;
  f.x0 = xr.lo;
  f.x1 = xr.hi;
  if (f.x1 <= f.x0) {
    f.x0 -= 1;
    f.x1 += 1;
  }
  return f;
}

// The <svg> element's opening tag and the chart's title.
std::string svg_open(const PlotOptions& o) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(o.width) +
         "\" height=\"" + std::to_string(o.height) + "\" viewBox=\"0 0 " + std::to_string(o.width) +
         " " + std::to_string(o.height) + "\" class=\"chart\">" + "<text x=\"" +
         fmt(o.width / 2.0) + "\" y=\"18\" text-anchor=\"middle\" class=\"title\">" +
         xml_escape(o.title) + "</text>";
}

// Decades on a log axis (round ticks when it spans less than two), else round numbers.
std::vector<double> y_ticks(const Frame& f) {
  if (!f.log_y) return nice_ticks(f.y0, f.y1, 5);
  std::vector<double> ticks;
  for (double e = std::floor(f.y0); e <= std::ceil(f.y1); e += 1) {
    if (e >= f.y0 && e <= f.y1) ticks.push_back(std::pow(10.0, e));
  }
  if (ticks.size() >= 2) return ticks;
  ticks.clear();
  for (double t : nice_ticks(std::pow(10.0, f.y0), std::pow(10.0, f.y1), 5)) {
    if (t > 0) ticks.push_back(t);
  }
  return ticks;
}

// Grid lines with their tick labels, the frame and the axis labels.
std::string axes_svg(const Frame& f, const PlotOptions& o) {
  const double left = Frame::left, top = Frame::top;
  std::string svg = "<g class=\"axis\">";
  for (double t : nice_ticks(f.x0, f.x1, 6)) {
    const std::string x = fmt(f.px(t));
    svg += "<line x1=\"" + x + "\" y1=\"" + fmt(top) + "\" x2=\"" + x + "\" y2=\"" +
           fmt(top + f.ph) + "\" class=\"grid\"/>";
    svg += "<text x=\"" + x + "\" y=\"" + fmt(top + f.ph + 16) + "\" text-anchor=\"middle\">" +
           short_number(t) + "</text>";
  }
  for (double t : y_ticks(f)) {
    const std::string y = fmt(f.py(t));
    svg += "<line x1=\"" + fmt(left) + "\" y1=\"" + y + "\" x2=\"" + fmt(left + f.pw) + "\" y2=\"" +
           y + "\" class=\"grid\"/>";
    svg += "<text x=\"" + fmt(left - 6) + "\" y=\"" + y +
           "\" text-anchor=\"end\" dominant-baseline=\"middle\">" + short_number(t) + "</text>";
  }
  svg += "<rect x=\"" + fmt(left) + "\" y=\"" + fmt(top) + "\" width=\"" + fmt(f.pw) +
         "\" height=\"" + fmt(f.ph) + "\" class=\"frame\"/>";
  svg += "<text x=\"" + fmt(left + f.pw / 2) + "\" y=\"" + fmt(o.height - 6.0) +
         "\" text-anchor=\"middle\">" + xml_escape(o.x_label) + "</text>";
  svg += "<text transform=\"translate(14 " + fmt(top + f.ph / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + xml_escape(o.y_label) +
         (f.log_y ? " (log)" : "") + "</text></g>";
  return svg;
}

// One series as a polyline (a lone point as a dot: a one-point polyline is invisible);
// "" when it has no point to draw.
std::string series_svg(const Series& s, const Frame& f) {
  std::vector<std::pair<double, double>> pts;
  for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
    if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i]) || (f.log_y && s.y[i] <= 0)) continue;
    pts.emplace_back(f.px(s.x[i]), f.py(s.y[i]));
  }
  if (pts.empty()) return "";
  if (pts.size() == 1) {
    return "<circle cx=\"" + fmt(pts[0].first) + "\" cy=\"" + fmt(pts[0].second) +
           "\" r=\"3\" fill=\"" + s.color + "\"/>";
  }
  std::string points;
  for (const auto& [x, y] : pts) points += fmt(x) + "," + fmt(y) + " ";
  points.pop_back();
  return "<polyline fill=\"none\" stroke=\"" + s.color + "\" stroke-width=\"1.5\"" +
         (s.dashed ? " stroke-dasharray=\"5 3\"" : "") + " points=\"" + points + "\"/>";
}

// The legend's `row`-th line (a stroke sample and the name) at `x`, from the top right.
std::string legend_entry(const Series& s, double x, int row) {
  const double ly = Frame::top + 8 + row * 15;
  return "<line x1=\"" + fmt(x) + "\" y1=\"" + fmt(ly) + "\" x2=\"" + fmt(x + 18) + "\" y2=\"" +
         fmt(ly) + "\" stroke=\"" + s.color + "\" stroke-width=\"2\"" +
         (s.dashed ? " stroke-dasharray=\"5 3\"" : "") + "/>" + "<text x=\"" + fmt(x + 22) +
         "\" y=\"" + fmt(ly) + "\" dominant-baseline=\"middle\" class=\"legend\">" +
         xml_escape(s.name) + "</text>";
}

}  // namespace

std::string line_plot_svg(const std::vector<Series>& series, const PlotOptions& o) {
  Range xr, yr;
  for (const Series& s : series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      xr.add(s.x[i]);
      yr.add(s.y[i]);
    }
  }
  std::string svg = svg_open(o);
  if (xr.empty()) {
    return svg + "<text x=\"" + fmt(o.width / 2.0) + "\" y=\"" + fmt(o.height / 2.0) +
           "\" text-anchor=\"middle\" class=\"muted\">no data</text></svg>";
  }
  const Frame f = frame_of(xr, yr, o, o.log_y && yr.lo > 0);
  svg += axes_svg(f, o);
  // Each series, with its legend line in the top right corner, as wide as the longest name.
  size_t longest = 0;
  for (const Series& s : series) longest = std::max(longest, s.name.size());
  const double legend_x =
      Frame::left + f.pw - 26 - 6.2 * static_cast<double>(std::min<size_t>(longest, 40));
  int legend_row = 0;
  for (const Series& s : series) {
    const std::string drawn = series_svg(s, f);
    if (drawn.empty()) continue;
    svg += drawn + legend_entry(s, legend_x, legend_row++);
  }
  return svg + "</svg>";
}

}  // namespace trainctl::report
