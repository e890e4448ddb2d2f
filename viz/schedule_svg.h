#pragma once
// Draws a simulated schedule the way the pipeline papers do: one row per rank, time on
// the x axis, F / B / I / W blocks colour-coded with their micro-batch number inside, a
// lighter shade for a rank's later chunks, fused OVERLAP_F_B blocks split in two, and
// optionally an arrow for every cross-rank send -> recv.

#include <string>
#include <vector>

#include "ir/action.h"
#include "simulator/action_simulator.h"

namespace pw {

struct SvgOptions {
  std::string title;
  bool comm_arrows = false;
  double px_per_unit = 0;  // 0: fit the makespan into about 1400 px
};

// `timeline` is TimedResult::timeline for `schedule` (SimulationOptions::record_timeline).
std::string ScheduleToSvg(const ActionSchedule& schedule,
                          const std::vector<std::vector<ActionTime>>& timeline,
                          const SvgOptions& options = {});

}  // namespace pw
