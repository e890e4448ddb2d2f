#pragma once
// The search behind `pipeweave tune`: the plan choices a user would otherwise try by hand
// on one module (its mesh, stages and micro-batch size as built), each written as a pass
// pipeline that `pipeweave opt` accepts verbatim and priced by the op-level simulator.
//
//   1. schedule kinds: every kind of the schedule pass except csv (zero-bubble kinds on a
//      split backward, zb-h2 and zb-auto given the cost model's F, B, W). Each is planned
//      once and priced by the action-level simulator (F, B, W and the activation
//      transfer from the cost model; its longest rank span, the step of steps back to
//      back), the cheap pruning: only the best few go on;
//   2. the kept kinds on the op-level simulator (two steps back to back: the steady step
//      a run measures), then for the best two every p2p order;
//   3. the best two of those and plain 1f1b with each ladder of overlap passes registered
//      (assign-streams; overlap-column-parallel-backward, overlap-1f1b, insert-events;
//      passes named in TuneOptions::extra_passes, e.g. order-comm, join when the registry
//      has them).
// Candidates a pass refuses (a kind the module's stages do not fit, an overlap that does
// not apply) are counted and skipped; plans over the memory limit are dropped.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cost_model/estimator.h"
#include "ir/module.h"

namespace pw::search {

struct TuneOptions {
  // The device and op costs plans are priced with (passes/cost_inputs.h: MakeEstimator).
  std::shared_ptr<const cost::Estimator> estimator;
  int micro_batches = 0;
  // Plans that do not fit are dropped (simulator/memory_fit.h): against this many bytes per
  // rank, or with 0 against the estimator's device (its capacity; no check without one).
  int64_t mem_limit_bytes = 0;
  int top = 5;            // plans reported
  int action_keep = 4;    // schedule kinds the action-level pruning keeps
  int order_kinds = 2;    // of those, the best (op-level) tried with every p2p order
  int overlap_bases = 2;  // plans (besides plain 1f1b) tried with the overlap ladders
  // Passes tried after insert-p2p when registered (searched like the overlap passes).
  std::vector<std::string> extra_passes = {"order-comm"};
  std::function<void(const std::string&)> progress;  // one line per stage; may be empty
};

struct TunedPlan {
  std::string pipeline;
  double step_ms = 0;
  double bubble_rate = 0;
  int64_t peak_bytes = 0;  // the largest rank's
  bool fits = true;        // every rank within the memory limit
  // The action-level simulator's longest rank span (TimedResult::cost), in its cost units.
  double action_makespan = -1;
};

struct TuneResult {
  // Plain 1f1b; absent where the module's stages do not run one per rank (vpp > 1).
  std::optional<TunedPlan> baseline;
  std::vector<TunedPlan> best;  // fastest first, at most TuneOptions::top, distinct
  int planned = 0;              // schedules priced by the action-level simulator
  int simulated = 0;            // pipelines priced by the op-level simulator
  int refused = 0;              // candidates a pass or the simulator refused
  int over_memory = 0;          // simulated, but over the memory limit
};

// `module` is a training module with no plan (a forward-only one gets append-backward).
// Step 1 alone: every schedule kind planned and priced by the action-level simulator, the
// fastest kept. Cheap (no op-level simulation): `tune` ranks the stagings and micro-batch
// sizes it rebuilds a model with by it, and searches only the best of them fully.
struct ActionLevelBest {
  std::string kind;
  double makespan_ms = 0;
  int planned = 0;  // schedule kinds priced
};
StatusOr<ActionLevelBest> BestActionLevelKind(const Module& module,
                                              std::shared_ptr<const cost::Estimator> estimator,
                                              int micro_batches);

// The whole search on `module`: its best plans, fastest first, each a pass pipeline.
StatusOr<TuneResult> Tune(const Module& module, const TuneOptions& options);

}  // namespace pw::search
