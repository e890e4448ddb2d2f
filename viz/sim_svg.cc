#include "viz/sim_svg.h"

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/rank_layout.h"
#include "viz/svg_util.h"

namespace pw::cost {
namespace {

using svg::Escape;
using svg::Num;
using svg::TickStep;

constexpr double kLeft = 184;  // the rank headings and the stream labels
constexpr double kPlotWidth = 1400, kRight = 24;
constexpr double kTop = 58;  // the title and the legend
constexpr double kLane = 14, kLaneGap = 3, kRankGap = 12, kAxis = 44;
// Consecutive instructions of a job on a lane merge while the box and the next one are
// both narrower than kMinBoxPx and at most kMergeGapPx apart: apart they could not be seen.
// A lane so holds at most one box per kMinBoxPx of its width, whatever the plan's size.
constexpr double kMinBoxPx = 2, kMergeGapPx = 1;
constexpr const char* kStepWork = "#bab0ac";  // instructions outside every job

const char* JobColour(JobKind kind) {
  switch (kind) {
    case JobKind::kForward:
      return "#4e79a7";
    case JobKind::kBackward:
      return "#f28e2b";
    case JobKind::kBackwardInput:
      return "#59a14f";
    case JobKind::kBackwardWeight:
      return "#b07aa1";
    case JobKind::kOptimizer:
      return "#76b7b2";
    default:
      return kStepWork;
  }
}

const char* CommColour(CommClass c) {
  switch (c) {
    case CommClass::kMpForward:
      return "#e15759";
    case CommClass::kMpBackward:
      return "#ff9da7";
    case CommClass::kPpSend:
      return "#edc948";
    case CommClass::kPpRecv:
      return "#9c755f";
    case CommClass::kDp:
      return "#499894";
    case CommClass::kSpForward:
      return "#b07aa1";
    case CommClass::kSpBackward:
      return "#d4a6c8";
    default:
      return kStepWork;
  }
}

// The unit a time axis running to `seconds` reads best in.
struct TimeUnit {
  double per_second;
  const char* name;
};
TimeUnit UnitFor(double seconds) {
  if (seconds >= 1) return {1, "s"};
  if (seconds >= 1e-3) return {1e3, "ms"};
  return {1e6, "µs"};
}

// The kinds of global rank `rank`'s jobs, indexed as SimInstr::job (the plan's jobs of its
// pipeline rank, fused ones flattened, as the simulator lowers them).
std::vector<JobKind> JobKinds(const Module& module, int rank) {
  const int pp = RankLayout(module.mesh).Coord(rank).pp;
  const RankPlan* mine = nullptr;
  for (const RankPlan& r : module.plan.ranks)
    if (r.rank == pp) mine = &r;
  if (!mine && module.plan.ranks.size() == 1 && module.mesh.pp == 1)
    mine = &module.plan.ranks.front();
  std::vector<JobKind> kinds;
  if (!mine) return kinds;
  std::vector<const Job*> jobs;
  FlattenJobs(mine->jobs, jobs);
  for (const Job* job : jobs) kinds.push_back(job->kind);
  return kinds;
}

// Consecutive instructions of one job on one lane drawn as one box.
struct Box {
  double start = 0, end = 0;
  int job = -1;
  int first = -1;  // its first instruction
  int ops = 0;
  std::vector<std::pair<const char*, double>> seconds_by_colour;

  void Add(const char* colour, double seconds) {
    for (auto& [c, s] : seconds_by_colour)
      if (std::string_view(c) == colour) {
        s += seconds;
        return;
      }
    seconds_by_colour.push_back({colour, seconds});
  }
  // What takes most of its time.
  const char* Colour() const {
    return std::max_element(seconds_by_colour.begin(), seconds_by_colour.end(),
                            [](const auto& a, const auto& b) { return a.second < b.second; })
        ->first;
  }
};

class LaneDrawing {
 public:
  LaneDrawing(const Module& module, const SimGraph& graph, const SimResult& result, double end)
      : module_(module),
        g_(graph),
        r_(result),
        end_(std::max(end, 1e-12)),
        px_(kPlotWidth / end_),
        unit_(UnitFor(end_)) {}

  // Appends one lane per stream global rank `rank` uses, under `heading`.
  void AddRank(int rank, const std::string& heading);
  std::string Svg(const std::string& title) const;

 private:
  double X(double seconds) const { return kLeft + seconds * px_; }
  std::string Time(double seconds) const { return Num(seconds * unit_.per_second); }
  const char* Colour(const SimInstr& in, const std::vector<JobKind>& kinds) const;
  void AddLane(int rank, StreamType stream, const std::vector<JobKind>& kinds);
  void DrawBox(const Box& box, int rank, double y);
  std::string Legend() const;
  std::string Axis() const;

  const Module& module_;
  const SimGraph& g_;
  const SimResult& r_;
  const double end_;  // seconds at the right edge of the time axis
  const double px_;   // pixels per second
  const TimeUnit unit_;
  double y_ = kTop;  // where the next lane goes
  std::string lanes_;
};

const char* LaneDrawing::Colour(const SimInstr& in, const std::vector<JobKind>& kinds) const {
  if (in.kind != InstrKind::kCompute && in.comm_class != CommClass::kNone)
    return CommColour(in.comm_class);
  if (in.job >= 0 && in.job < static_cast<int>(kinds.size())) return JobColour(kinds[in.job]);
  return kStepWork;
}

void LaneDrawing::AddRank(int rank, const std::string& heading) {
  std::array<bool, kNumStreamTypes> used{};
  for (int i : g_.rank_order[rank]) used[static_cast<int>(g_.instrs[i].stream)] = true;
  lanes_ += "<text x=\"8\" y=\"" + Num(y_ + kLane - 3) + "\" font-weight=\"bold\">" +
            Escape(heading) + "</text>\n";
  const std::vector<JobKind> kinds = JobKinds(module_, rank);
  for (StreamType stream : kAllStreamTypes)
    if (used[static_cast<int>(stream)]) AddLane(rank, stream, kinds);
  y_ += kRankGap;
}

void LaneDrawing::AddLane(int rank, StreamType stream, const std::vector<JobKind>& kinds) {
  const char* name = StreamTypeName(stream);
  lanes_ += "<g class=\"lane\" data-rank=\"" + std::to_string(rank) + "\" data-stream=\"" + name +
            "\">\n<text x=\"" + Num(kLeft - 6) + "\" y=\"" + Num(y_ + kLane - 3) +
            "\" text-anchor=\"end\">" + name + "</text><rect x=\"" + Num(kLeft) + "\" y=\"" +
            Num(y_) + "\" width=\"" + Num(kPlotWidth) + "\" height=\"" + Num(kLane) +
            "\" fill=\"#f4f4f4\"/>\n";
  Box box;
  for (int i : g_.rank_order[rank]) {
    const SimInstr& in = g_.instrs[i];
    if (in.stream != stream) continue;
    const InstrTime& t = r_.timeline[i];
    const double begin = t.active >= 0 ? t.active : t.start;
    if (t.end < begin) continue;
    const bool joins = box.ops > 0 && in.job == box.job &&
                       (box.end - box.start) * px_ < kMinBoxPx &&
                       (t.end - begin) * px_ < kMinBoxPx && (begin - box.end) * px_ <= kMergeGapPx;
    if (!joins) {
      if (box.ops > 0) DrawBox(box, rank, y_);
      box = Box{begin, t.end, in.job, i, 0, {}};
    }
    box.end = std::max(box.end, t.end);
    ++box.ops;
    box.Add(Colour(in, kinds), t.end - begin);
  }
  if (box.ops > 0) DrawBox(box, rank, y_);
  lanes_ += "</g>\n";
  y_ += kLane + kLaneGap;
}

void LaneDrawing::DrawBox(const Box& box, int rank, double y) {
  const std::string job = box.job >= 0 ? g_.job_names[rank][box.job] : "step";
  const std::string span = " [" + Time(box.start) + ", " + Time(box.end) + "] " + unit_.name;
  const std::string tip = box.ops == 1 ? g_.instrs[box.first].name + " (" + job + ")" + span
                                       : job + ": " + std::to_string(box.ops) + " ops" + span;
  const double w = (box.end - box.start) * px_;
  lanes_ += "<g><title>" + Escape(tip) + "</title><rect class=\"op\" x=\"" + Num(X(box.start)) +
            "\" y=\"" + Num(y) + "\" width=\"" + Num(std::max(w, 0.5)) + "\" height=\"" +
            Num(kLane) + "\" fill=\"" + box.Colour() + "\" stroke=\"white\" stroke-width=\"" +
            (w > 4 ? "0.6" : "0") + "\"/>";
  if (w >= 6 + 5.5 * job.size())
    lanes_ += "<text x=\"" + Num(X(box.start) + w / 2) + "\" y=\"" + Num(y + kLane - 3.5) +
              "\" text-anchor=\"middle\" fill=\"white\" font-size=\"9\">" + Escape(job) + "</text>";
  lanes_ += "</g>\n";
}

std::string LaneDrawing::Legend() const {
  std::vector<std::pair<const char*, std::string>> entries = {
      {JobColour(JobKind::kForward), "F forward"},
      {JobColour(JobKind::kBackward), "B backward"},
      {JobColour(JobKind::kBackwardInput), "I input grad"},
      {JobColour(JobKind::kBackwardWeight), "W weight grad"},
      {JobColour(JobKind::kOptimizer), "optimizer"}};
  for (int c = 1; c < kNumCommClasses; ++c)
    entries.push_back(
        {CommColour(static_cast<CommClass>(c)), CommClassName(static_cast<CommClass>(c))});
  std::string out;
  double x = kLeft;
  for (const auto& [colour, label] : entries) {
    out += "<rect x=\"" + Num(x) + "\" y=\"28\" width=\"12\" height=\"12\" fill=\"" + colour +
           "\"/><text x=\"" + Num(x + 16) + "\" y=\"38\">" + label + "</text>\n";
    x += 24 + 6.5 * label.size();
  }
  return out;
}

std::string LaneDrawing::Axis() const {
  std::string out;
  const double y = y_ + 2;
  const double span = end_ * unit_.per_second, step = TickStep(span);
  for (double t = 0; t <= span * (1 + 1e-9); t += step) {
    const double x = kLeft + t / unit_.per_second * px_;
    out += "<line x1=\"" + Num(x) + "\" y1=\"" + Num(y) + "\" x2=\"" + Num(x) + "\" y2=\"" +
           Num(y + 4) + "\" stroke=\"#333\"/><text x=\"" + Num(x) + "\" y=\"" + Num(y + 16) +
           "\" text-anchor=\"middle\" fill=\"#333\">" + Num(t) + "</text>\n";
  }
  out += "<text x=\"" + Num(kLeft + kPlotWidth) + "\" y=\"" + Num(y + 30) +
         "\" text-anchor=\"end\" fill=\"#333\">time (" + unit_.name + ")</text>\n";
  return out;
}

std::string LaneDrawing::Svg(const std::string& title) const {
  const double width = kLeft + kPlotWidth + kRight, height = y_ + kAxis;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Num(width) +
                    "\" height=\"" + Num(height) +
                    "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"11\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (!title.empty())
    svg += "<text x=\"8\" y=\"18\" font-size=\"14\" font-weight=\"bold\">" + Escape(title) +
           "</text>\n";
  svg += Legend() + lanes_ + Axis() + "</svg>\n";
  return svg;
}

Status CheckTimeline(const SimGraph& graph, const SimResult& result) {
  if (result.timeline.size() != graph.instrs.size())
    return FailedPrecondition("the simulation kept no timeline to draw");
  return OkStatus();
}

}  // namespace

StatusOr<std::string> SimScheduleSvg(const Module& module, const SimGraph& graph,
                                     const SimResult& result, const std::string& title) {
  PW_RETURN_IF_ERROR(CheckTimeline(graph, result));
  LaneDrawing drawing(module, graph, result, result.step_time);
  const RankLayout layout(module.mesh);
  const bool replicas = module.mesh.mp * module.mesh.dp > 1;
  for (int pp = 0; pp < std::max(1, module.mesh.pp); ++pp) {
    RankCoord coord;
    coord.pp = pp;
    const int rank = layout.Rank(coord);
    if (rank >= graph.world_size) continue;
    drawing.AddRank(rank,
                    replicas ? StrCat("pp ", pp, " (rank ", rank, ")") : StrCat("rank ", rank));
  }
  return drawing.Svg(title);
}

StatusOr<std::string> SimRankLanesSvg(const Module& module, const SimGraph& graph,
                                      const SimResult& result, int rank, const std::string& title,
                                      double time_scale_end) {
  PW_RETURN_IF_ERROR(CheckTimeline(graph, result));
  if (rank < 0 || rank >= graph.world_size)
    return InvalidArgument("rank ", rank, " is not one of the plan's ", graph.world_size, " ranks");
  LaneDrawing drawing(module, graph, result,
                      time_scale_end > 0 ? time_scale_end : result.step_time);
  drawing.AddRank(rank, StrCat("rank ", rank));
  return drawing.Svg(title);
}

}  // namespace pw::cost
