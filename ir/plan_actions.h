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
  // The module's backward is split: a full backward B names no program and runs the
  // stage's I program then its W program as its sub_jobs (see RunsSubJobs in ir/plan.h).
  bool split_backward = false;
};

// The structure a job's sub_jobs must have: fused jobs (OVERLAP_F_B, BATCH_P2P) have
// them; a B with sub_jobs names no program and has exactly I then W of its own stage and
// micro-batch, without sub_jobs of their own; no other job has any.
Status CheckSubJobs(const Job& job);

// Idle actions are dropped. Send/recv jobs get their peer rank (and peer stage when it
// is not the adjacent one).
Plan ActionScheduleToPlan(const ActionSchedule& schedule, const std::string& kind,
                          const PlanNaming& naming = {});
// Optimizer jobs are dropped; a split B (I and W as sub_jobs) converts back to B. An empty
// stage_to_rank is inferred from the jobs.
StatusOr<ActionSchedule> PlanToActionSchedule(const Plan& plan);

// "0F1", "1RECV_F0", "(0F7;7B3)OVERLAP_F_B", "0OPT".
std::string JobToString(const Job& job);

}  // namespace pw
