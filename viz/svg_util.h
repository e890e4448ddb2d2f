#pragma once
// What the SVG drawings (schedule_svg, sim_svg) share: numbers written short, text escaped
// for XML, and tick spacing for a time axis.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace pw::svg {

// `v` with at most two decimals and no trailing zeros: "12.5", "3", "0.25".
inline std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

inline std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

// A "nice" tick spacing (1, 2 or 5 times a power of ten) for an axis of `span` units.
inline double TickStep(double span) {
  double raw = span / 12;
  double mag = std::pow(10, std::floor(std::log10(std::max(raw, 1e-9))));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

}  // namespace pw::svg
