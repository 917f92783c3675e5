#pragma once
// Line charts as inline SVG (no scripts, no external files): axes with round-number ticks,
// one polyline per series, a legend. For `trainctl report`.
#include <string>
#include <string_view>
#include <vector>

namespace trainctl::report {

struct Series {
  std::string name;
  std::string color;  // any CSS colour
  bool dashed = false;
  std::vector<double> x, y;  // same length; non-finite points are left out
};

struct PlotOptions {
  std::string title, x_label, y_label;
  bool log_y = false;  // falls back to linear when a value is <= 0
  int width = 600, height = 320;
};

// An <svg> element. Empty series are skipped; with no points at all the chart says so.
std::string line_plot_svg(const std::vector<Series>& series, const PlotOptions& options);

// About `count` round tick values covering [lo, hi] (1, 2 or 5 times a power of ten apart).
std::vector<double> nice_ticks(double lo, double hi, int count);

// A number as a short label: 1.5k, 2M, 0.003, 1e-05.
std::string short_number(double v);

// Text safe inside XML/HTML elements and attributes.
std::string xml_escape(std::string_view text);

// The n-th colour of the palette every chart uses (runs, ranks, series).
const char* palette(size_t n);

}  // namespace trainctl::report
