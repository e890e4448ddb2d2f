#pragma once
// The optimal zero-bubble schedule of a small pipeline, by branch and bound, to measure
// how far zb-auto's heuristic is from the best possible.
//
// The problem is zb-auto's: one stage per rank, each rank runs its F, I and W actions in
// an order of its choosing (F and I of a stage in micro-batch order, W(m) after I(m)),
// every action as early as its rank and its inputs allow, the activations held within the
// memory limit (F holds 1 M_B, I releases 1 - w_mem, W the rest); the cost is the longest
// per-rank span, the Zero Bubble paper's. The search enumerates every rank's order once:
// at each node the free rank with the earliest clock picks its next action (an action
// whose input is not computed yet waits, committed, until it is), and a node is cut when
// a lower bound (each rank's remaining work, and the chain the last micro-batch still has
// to travel down and back up the stages) reaches the best cost found.

#include <cstdint>

#include "ir/action.h"
#include "ir/status.h"
#include "passes/pipeline/schedule_spec.h"

namespace pw::pipeline {

struct ExactResult {
  ActionSchedule schedule;  // the best found; the start's when nothing beats it
  double cost = 0;
  double start_cost = 0;  // the cost of the schedule the search starts from
  bool optimal = false;   // the search finished within the node limit
  int64_t nodes = 0;
};

// spec: stages == ranks, loop placement, mem_limit as zb-auto's; its kind (zb-auto to
// measure the heuristic) gives the schedule whose cost is the search's first bound.
StatusOr<ExactResult> SolveExactSchedule(const ScheduleSpec& spec, int64_t node_limit);

}  // namespace pw::pipeline
