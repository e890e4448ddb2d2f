// GPipe's fill-drain order. With several stages per rank (loop or v placement) a rank
// runs its stages breadth-first: every micro-batch of its earliest stage, then the next;
// backwards in the reverse stage order.

#include "passes/pipeline/schedule_generators.h"

namespace pw::pipeline {

ActionSchedule GenerateFThenB(const ScheduleSpec& spec) {
  ActionSchedule schedule = EmptySchedule(spec);
  const int M = spec.num_micro_batches;
  std::vector<std::vector<int>> stages_of(spec.num_ranks);
  for (int s = 0; s < spec.num_stages; ++s) stages_of[schedule.stage_to_rank[s]].push_back(s);
  for (int r = 0; r < spec.num_ranks; ++r) {
    auto& out = schedule.ranks[r];
    out.resize(2 * stages_of[r].size() * static_cast<size_t>(M));
    Action* a = out.data();
    for (int s : stages_of[r])
      for (int m = 0; m < M; ++m) *a++ = MakeAction(ActionType::kForward, s, m);
    for (auto it = stages_of[r].rbegin(); it != stages_of[r].rend(); ++it)
      for (int m = 0; m < M; ++m) *a++ = MakeAction(ActionType::kBackward, *it, m);
  }
  return schedule;
}

}  // namespace pw::pipeline
