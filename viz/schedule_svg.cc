#include "viz/schedule_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "ir/action_edges.h"
#include "viz/svg_util.h"

namespace pw {

namespace {

using svg::Escape;
using svg::Num;
using svg::TickStep;

constexpr double kLeft = 72, kTop = 58, kRow = 30, kBlock = 24, kRight = 24;

const char* BaseColor(ActionType t) {
  switch (t) {
    case ActionType::kForward:
      return "#4e79a7";  // blue
    case ActionType::kBackward:
      return "#f28e2b";  // orange: full backward
    case ActionType::kBackwardInput:
      return "#59a14f";  // green: input gradient
    case ActionType::kBackwardWeight:
      return "#b07aa1";  // purple: weight gradient
    default:
      return "#bab0ac";
  }
}

// Mixes a #rrggbb colour with white: later chunks of a rank get lighter.
std::string Shade(const char* hex, int chunk) {
  unsigned r, g, b;
  std::sscanf(hex + 1, "%02x%02x%02x", &r, &g, &b);
  double keep = std::pow(0.62, chunk);
  auto mix = [&](unsigned c) { return static_cast<unsigned>(255 - (255 - c) * keep + 0.5); };
  char buf[8];
  std::snprintf(buf, sizeof(buf), "#%02x%02x%02x", mix(r), mix(g), mix(b));
  return buf;
}

}  // namespace

std::string ScheduleToSvg(const ActionSchedule& schedule,
                          const std::vector<std::vector<ActionTime>>& timeline,
                          const SvgOptions& options) {
  const int R = schedule.num_ranks();
  double makespan = 0;
  for (const auto& rank : timeline)
    for (const ActionTime& t : rank) makespan = std::max(makespan, t.end);
  makespan = std::max(makespan, 1e-9);
  const double px =
      options.px_per_unit > 0 ? options.px_per_unit : std::clamp(1400 / makespan, 0.05, 48.0);
  const double width = kLeft + makespan * px + kRight;
  const double height = kTop + R * kRow + 40;
  // Chunk of a stage on its rank: its position among the rank's stages.
  std::vector<int> chunk(schedule.num_stages, 0);
  std::vector<int> seen(R, 0);
  for (int s = 0; s < schedule.num_stages; ++s) chunk[s] = seen[schedule.stage_to_rank[s]]++;

  std::string svg;
  svg.reserve(256 + schedule.num_actions() * 120);
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Num(width) + "\" height=\"" +
         Num(height) + "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"11\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg +=
      "<defs><marker id=\"arrow\" markerWidth=\"6\" markerHeight=\"6\" refX=\"5\" refY=\"3\" "
      "orient=\"auto\"><path d=\"M0,0 L6,3 L0,6 z\" fill=\"#555\"/></marker></defs>\n";
  if (!options.title.empty())
    svg += "<text x=\"" + Num(kLeft) + "\" y=\"18\" font-size=\"14\" font-weight=\"bold\">" +
           Escape(options.title) + "</text>\n";
  // Legend.
  double lx = kLeft;
  for (auto [type, label] : {std::pair{ActionType::kForward, "F forward"},
                             std::pair{ActionType::kBackward, "B full backward"},
                             std::pair{ActionType::kBackwardInput, "I input grad"},
                             std::pair{ActionType::kBackwardWeight, "W weight grad"}}) {
    svg += "<rect x=\"" + Num(lx) + "\" y=\"28\" width=\"12\" height=\"12\" fill=\"" +
           BaseColor(type) + "\"/><text x=\"" + Num(lx + 16) + "\" y=\"38\">" + label + "</text>\n";
    lx += 118;
  }
  // Rows and the time axis.
  for (int r = 0; r < R; ++r) {
    double y = kTop + r * kRow;
    svg += "<text x=\"8\" y=\"" + Num(y + kBlock / 2 + 4) + "\">rank " + std::to_string(r) +
           "</text>\n";
    svg += "<rect x=\"" + Num(kLeft) + "\" y=\"" + Num(y) + "\" width=\"" + Num(makespan * px) +
           "\" height=\"" + Num(kBlock) + "\" fill=\"#f4f4f4\"/>\n";
  }
  const double axis_y = kTop + R * kRow + 4;
  const double step = TickStep(makespan);
  for (double t = 0; t <= makespan + 1e-9; t += step) {
    double x = kLeft + t * px;
    svg += "<line x1=\"" + Num(x) + "\" y1=\"" + Num(axis_y) + "\" x2=\"" + Num(x) + "\" y2=\"" +
           Num(axis_y + 4) + "\" stroke=\"#333\"/><text x=\"" + Num(x) + "\" y=\"" +
           Num(axis_y + 16) + "\" text-anchor=\"middle\" fill=\"#333\">" + Num(t) + "</text>\n";
  }
  svg += "<text x=\"" + Num(kLeft + makespan * px) + "\" y=\"" + Num(axis_y + 30) +
         "\" text-anchor=\"end\" fill=\"#333\">time</text>\n";

  auto block = [&](double x, double y, double w, double h, const std::string& fill,
                   const std::string& label, const std::string& tip) {
    svg += "<g><title>" + Escape(tip) + "</title><rect x=\"" + Num(x) + "\" y=\"" + Num(y) +
           "\" width=\"" + Num(std::max(w, 0.5)) + "\" height=\"" + Num(h) + "\" fill=\"" + fill +
           "\" stroke=\"white\" stroke-width=\"" + (w > 4 ? "0.8" : "0") + "\"/>";
    if (w >= 7 + 4.5 * label.size() && h >= 10)
      svg += "<text x=\"" + Num(x + w / 2) + "\" y=\"" + Num(y + h / 2 + 3.5) +
             "\" text-anchor=\"middle\" fill=\"white\">" + label + "</text>";
    svg += "</g>\n";
  };
  for (int r = 0; r < R; ++r) {
    const double y = kTop + r * kRow;
    for (size_t i = 0; i < schedule.ranks[r].size() && i < timeline[r].size(); ++i) {
      const Action& a = schedule.ranks[r][i];
      if (IsComm(a.type) || a.type == ActionType::kBatchP2P || a.type == ActionType::kIdle)
        continue;
      const ActionTime& t = timeline[r][i];
      const double x = kLeft + t.start * px, w = (t.end - t.start) * px;
      auto parts = schedule.Parts(a);
      const double h = kBlock / parts.size();
      for (size_t k = 0; k < parts.size(); ++k) {
        const Action& p = parts[k];
        block(x, y + k * h, w, h, Shade(BaseColor(p.type), chunk[p.stage]),
              std::to_string(p.micro_batch),
              ActionToString(a, schedule) + " [" + Num(t.start) + ", " + Num(t.end) + "]");
      }
    }
  }
  if (options.comm_arrows) {
    // Arrow from each send to its recv, keyed by (edge, micro-batch, direction).
    EdgeIndex edges(schedule);
    std::map<std::tuple<int, int, bool>, std::pair<double, int>> sends;
    for (int r = 0; r < R; ++r)
      for (size_t i = 0; i < schedule.ranks[r].size() && i < timeline[r].size(); ++i)
        for (const Action& p : schedule.Parts(schedule.ranks[r][i]))
          if (p.type == ActionType::kSendF || p.type == ActionType::kSendB)
            sends[{edges.OfComm(p), p.micro_batch, p.type == ActionType::kSendB}] = {
                timeline[r][i].start, r};
    for (int r = 0; r < R; ++r)
      for (size_t i = 0; i < schedule.ranks[r].size() && i < timeline[r].size(); ++i)
        for (const Action& p : schedule.Parts(schedule.ranks[r][i])) {
          if (p.type != ActionType::kRecvF && p.type != ActionType::kRecvB) continue;
          auto it = sends.find({edges.OfComm(p), p.micro_batch, p.type == ActionType::kRecvB});
          if (it == sends.end()) continue;
          auto [ts, from] = it->second;
          double x1 = kLeft + ts * px, y1 = kTop + from * kRow + kBlock / 2;
          double x2 = kLeft + timeline[r][i].end * px, y2 = kTop + r * kRow + kBlock / 2;
          svg += "<line x1=\"" + Num(x1) + "\" y1=\"" + Num(y1) + "\" x2=\"" + Num(x2) +
                 "\" y2=\"" + Num(y2) +
                 "\" stroke=\"#555\" stroke-width=\"0.8\" marker-end=\"url(#arrow)\"/>\n";
        }
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace pw
