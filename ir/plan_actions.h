#pragma once
// Conversions between the compact ActionSchedule planning works on and the module's Plan
// (the form passes store and the executor runs).

#include <functional>
#include <string>

#include "ir/action.h"
#include "ir/plan.h"
#include "ir/status.h"

namespace pw {

JobKind JobKindOf(ActionType type);
ActionType ActionTypeOf(JobKind kind);  // kIdle for kinds without an action (optimizer)

struct PlanNaming {
  // The program a compute job of `kind` on `stage` runs; empty (or no function) leaves
  // Job::program empty.
  std::function<std::string(JobKind kind, int stage)> program;
  // Appends one optimizer job per stage at the end of its rank's list, for the stages
  // whose optimizer program `program` names.
  bool optimizer_jobs = false;
};

// Idle actions are dropped. Send/recv jobs get their peer rank (and peer stage when it
// is not the adjacent one).
Plan ActionScheduleToPlan(const ActionSchedule& schedule, const std::string& kind,
                          const PlanNaming& naming = {});
// Optimizer jobs are dropped. An empty stage_to_rank is inferred from the jobs.
StatusOr<ActionSchedule> PlanToActionSchedule(const Plan& plan);

// "0F1", "1RECV_F0", "(0F7;7B3)OVERLAP_F_B", "0OPT".
std::string JobToString(const Job& job);

}  // namespace pw
