#pragma once
// Lowers one rank's part of a plan into the flat instruction list every step replays.
//
// The work and its order come from the rank's sequence (ir/rank_sequence.h): each op of a
// job's program a kernel instruction on its stream, each send/recv job one transfer per var
// it moves, and the work the executor adds (gradient accumulation and the loss fetch after
// the op they follow, the gradient sums' dp all-reduce and scaling before the optimizer).
// Var names resolve to slots here, events to backend events, kernels through the backend,
// so nothing is looked up while a step runs.
//
// Ordering: a stream runs its instructions in order; across streams only events order
// work. Every cross-stream read-after-write, write-after-read and write-after-write that
// the plan's events do not imply (ir/stream_order.h) gets an event of the executor's own:
// counted in `auto_events` when both sides are the plan's work (ops, transfers and what is
// attached to an op), an error with `strict_events`; in `internal_events` when one side is
// the step-level gradient work, which the plan cannot name.

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
#include "ops/loss_scale_state.h"

namespace pw {

struct LoweringOptions {
  std::vector<std::string> feeds;  // vars fed from outside for every micro-batch
  std::string loss;                // scalar var fetched per micro-batch; empty: none
  bool strict_events = false;      // a dependency the plan's events miss is an error
};

struct LoweredPlan {
  int rank = 0;
  int num_micro_batches = 0;
  std::vector<Instr> instrs;           // in host order
  std::vector<std::string> job_names;  // by Instr::job, as the plan prints them ("0F2")
  std::deque<ValueSlot> slots;
  std::deque<Op> synthetic_ops;
  std::vector<std::unique_ptr<Event>> events;
  std::vector<ValueSlot*> accumulators;  // gradient sums, zeroed every step
  // dp buckets of gradient sums (accumulators too): each bucket's sums are views, end to
  // end in bucket order, of one zeroed allocation per step (RankSequence::grad_buckets).
  std::vector<std::vector<ValueSlot*>> accumulator_buckets;
  // The deferred parameter all-gathers (kParamGather), as indices into instrs: they run at
  // every step's start, and alone to make the parameters whole between steps.
  std::vector<int> param_gathers;
  // The deferred all-gathers of parameters no step reads whole (RankSequence::sync_gathers):
  // run only to make the parameters whole between steps.
  std::deque<Instr> sync_gathers;
  // Post-validated loss scaling (ir/post_validation.h): its reduction of the last step's
  // flags, issued first in every step, as an index into instrs (-1: none); run alone to
  // validate the last step between steps. And the state its copies keep, as (var, copy).
  int last_overflow_reduction = -1;
  std::vector<std::pair<ValueSlot*, ValueSlot*>> backups;
  // What puts the state of the last step's start back, run alone between steps (compute
  // stream, no events): copy_unless from the copies into the state, its Skip this rank's
  // own last flag (zeroed first), then the optimizer's casts of the masters into amp's
  // 16-bit copies, of which no copy is kept.
  std::deque<Instr> undo;
  ops::LossScaleRule loss_scale_rule;            // this rank's update_loss_scaling's
  std::map<std::string, ValueSlot*> persistent;  // parameters and optimizer state
  std::map<std::string, Var> persistent_decls;   // their declarations (initializers)
  std::vector<ValueSlot*> held_in_rows;          // parameters held in shards between syncs
  std::vector<double> losses;                    // fetched per micro-batch
  bool computes_loss = false;
  std::set<StreamType> streams;  // in use
  int plan_events = 0;           // distinct (name, micro-batch) events the plan records
  int auto_events = 0;           // events the lowering added between pieces of the plan's work
  int internal_events = 0;       // events it added around the step-level gradient work
};

// `rank` is a global rank of module.mesh; the module must have a plan and outlive the
// result (instructions point at its ops).
StatusOr<std::unique_ptr<LoweredPlan>> LowerRankPlan(const Module& module, int rank,
                                                     Backend& backend, MemoryTracker& memory,
                                                     const LoweringOptions& options);

}  // namespace pw
