#include "viz/sim_trace.h"

#include "viz/chrome_trace.h"

namespace pw::cost {
namespace {

const char* Category(const SimInstr& in) {
  switch (in.kind) {
    case InstrKind::kCompute:
      return "compute";
    case InstrKind::kCollective:
      return "collective";
    case InstrKind::kSend:
      return "send";
    case InstrKind::kRecv:
      return "recv";
  }
  return "?";
}

}  // namespace

std::string SimTraceJson(const SimGraph& g, const SimResult& r) {
  ChromeTraceWriter trace;
  for (int rank = 0; rank < g.world_size; ++rank) {
    trace.SetProcessName(rank, StrCat("rank ", rank));
    std::array<bool, kNumStreamTypes> used{};
    for (int i : g.rank_order[rank]) used[static_cast<int>(g.instrs[i].stream)] = true;
    for (int s = 0; s < kNumStreamTypes; ++s) {
      if (!used[s]) continue;
      trace.SetThreadName(rank, s, StreamTypeName(static_cast<StreamType>(s)));
      trace.SetThreadSortIndex(rank, s, s);
    }
  }
  if (r.timeline.size() != g.instrs.size()) return trace.Finish();
  const double us = 1e6;
  const std::vector<int> previous_on_stream = StreamPredecessors(g);
  for (size_t i = 0; i < g.instrs.size(); ++i) {
    const SimInstr& in = g.instrs[i];
    const InstrTime& t = r.timeline[i];
    double begin = t.active >= 0 ? t.active : t.start;
    std::string args = "{\"job\": ";
    AppendJsonString(args, in.job >= 0 ? g.job_names[in.rank][in.job] : "step");
    args += StrCat(", \"micro_batch\": ", in.micro_batch, ", \"estimate\": ");
    AppendJsonString(args, EstimatePathName(in.path));
    args += ", \"estimate_us\": ";
    AppendJsonNumber(args, in.seconds * us);
    if (in.bytes > 0) {
      args += ", \"bytes\": ";
      AppendJsonNumber(args, in.bytes);
    }
    // A hand-off: the instruction of another stream of its rank it waited for (one that
    // ended after its stream's previous instruction), from that one's end to its start.
    const int previous = previous_on_stream[i];
    const double free_at = previous >= 0 ? r.timeline[previous].end : 0;
    int released_by = -1;
    for (int d : in.deps)
      if (g.instrs[d].stream != in.stream && r.timeline[d].end > free_at &&
          (released_by < 0 || r.timeline[d].end > r.timeline[released_by].end))
        released_by = d;
    if (released_by >= 0 && t.start >= r.timeline[released_by].end) {
      args += StrCat(", \"handoff_from\": \"", StreamTypeName(g.instrs[released_by].stream),
                     "\", \"handoff_us\": ");
      AppendJsonNumber(args, (t.start - r.timeline[released_by].end) * us);
    }
    args += "}";
    trace.AddComplete(in.name, Category(in), in.rank, static_cast<int>(in.stream), begin * us,
                      (t.end - begin) * us, args);
    if (in.kind == InstrKind::kSend && in.partner >= 0) {
      const SimInstr& recv = g.instrs[in.partner];
      trace.AddFlow(in.name, i, in.rank, static_cast<int>(in.stream), begin * us, recv.rank,
                    static_cast<int>(recv.stream), r.timeline[in.partner].end * us);
    }
  }
  return trace.Finish();
}

}  // namespace pw::cost
