#include "cost_model/sim_svg.h"

#include <algorithm>

#include "cost_model/schedule_svg.h"
#include "ir/plan_actions.h"
#include "ir/rank_layout.h"

namespace pw::cost {
namespace {

// How many leaf jobs a job flattens into (as the simulator lowers fused jobs).
int Leaves(const Job& job) {
  if (!RunsSubJobs(job)) return 1;
  int n = 0;
  for (const Job& sub : job.sub_jobs) n += Leaves(sub);
  return n;
}

}  // namespace

StatusOr<std::string> SimScheduleSvg(const Module& module, const SimGraph& graph,
                                     const SimResult& result, const std::string& title) {
  if (result.timeline.size() != graph.instrs.size())
    return FailedPrecondition("the simulation kept no timeline to draw");
  PW_ASSIGN_OR_RETURN(ActionSchedule schedule, PlanToActionSchedule(module.plan));
  // Seconds in microseconds, so that the drawing's time axis reads in µs.
  std::vector<std::vector<ActionTime>> timeline(schedule.ranks.size());
  for (const RankPlan& rp : module.plan.ranks) {
    if (rp.rank < 0 || rp.rank >= static_cast<int>(schedule.ranks.size())) continue;
    RankCoord coord;
    coord.pp = rp.rank;
    int global = RankLayout(module.mesh).Rank(coord);
    if (global >= graph.world_size) continue;
    // Span of every flattened job of the representative rank.
    size_t jobs = graph.job_names[global].size();
    std::vector<ActionTime> span(jobs, ActionTime{1e300, -1e300});
    for (int i : graph.rank_order[global]) {
      const SimInstr& in = graph.instrs[i];
      if (in.job < 0) continue;
      const InstrTime& t = result.timeline[i];
      double begin = t.active >= 0 ? t.active : t.start;
      span[in.job].start = std::min(span[in.job].start, begin * 1e6);
      span[in.job].end = std::max(span[in.job].end, t.end * 1e6);
    }
    size_t leaf = 0;
    for (const Job& job : rp.jobs) {
      int n = Leaves(job);
      if (job.kind != JobKind::kOptimizer) {
        ActionTime at{1e300, -1e300};
        for (int k = 0; k < n && leaf + k < jobs; ++k) {
          at.start = std::min(at.start, span[leaf + k].start);
          at.end = std::max(at.end, span[leaf + k].end);
        }
        if (at.end < at.start) at = ActionTime{0, 0};
        timeline[rp.rank].push_back(at);
      }
      leaf += n;
    }
  }
  for (size_t r = 0; r < schedule.ranks.size(); ++r)
    if (timeline[r].size() != schedule.ranks[r].size())
      return Internal("job timeline of pipeline rank ", r, " does not match its actions");
  SvgOptions options;
  options.title = title;
  options.comm_arrows = true;
  return ScheduleToSvg(schedule, timeline, options);
}

}  // namespace pw::cost
