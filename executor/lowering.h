#pragma once
// Lowers one rank's part of a plan into the flat instruction list every step replays.
//
// Walking the rank's jobs in plan order, each op of a job's program becomes a kernel
// instruction on its stream, each SEND/RECV job one transfer per var that crosses, and the
// executor adds what the plan leaves implicit: gradient accumulation after the job that
// produces a micro-batch's gradient (summed in job order, then scaled by 1/(M·dp) before
// the optimizer, after a dp all-reduce unless the optimizer program has one), and a fetch
// of the loss. Var names resolve to slots here, events to backend events, kernels through
// the backend, so nothing is looked up while a step runs.
//
// Ordering: a stream runs its instructions in order; across streams only events order
// work. The lowering replays the schedule with vector clocks (one entry per stream) and
// checks every cross-stream read-after-write, write-after-read and write-after-write. A
// dependency that the plan's events do not cover gets an internal event (or is an error
// with `strict_events`); instructions the executor adds always get them.

#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/instr.h"
#include "executor/memory_tracker.h"
#include "executor/value_slot.h"
#include "ir/module.h"
#include "ir/status.h"

namespace pw {

struct LoweringOptions {
  std::vector<std::string> feeds;  // vars fed from outside for every micro-batch
  std::string loss;                // scalar var fetched per micro-batch; empty: none
  bool strict_events = false;      // a dependency the plan's events miss is an error
};

struct LoweredPlan {
  int rank = 0;
  int num_micro_batches = 0;
  std::vector<Instr> instrs;  // in host order
  std::deque<ValueSlot> slots;
  std::deque<Op> synthetic_ops;
  std::vector<std::unique_ptr<Event>> events;
  std::vector<ValueSlot*> accumulators;          // gradient sums, zeroed every step
  std::map<std::string, ValueSlot*> persistent;  // parameters and optimizer state
  std::map<std::string, Var> persistent_decls;   // their declarations (initializers)
  std::vector<double> losses;                    // fetched per micro-batch
  bool computes_loss = false;
  std::set<StreamType> streams;  // in use
  int plan_events = 0;           // distinct (name, micro-batch) events the plan records
  int auto_events = 0;           // events the lowering added
};

// `rank` is a global rank of module.mesh; the module must have a plan and outlive the
// result (instructions point at its ops).
StatusOr<std::unique_ptr<LoweredPlan>> LowerRankPlan(const Module& module, int rank,
                                                     Backend& backend, MemoryTracker& memory,
                                                     const LoweringOptions& options);

}  // namespace pw
