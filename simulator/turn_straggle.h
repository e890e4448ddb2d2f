#pragma once
// DeviceSpec.turn_straggle from measured runs. Where a node's rank threads outnumber its
// cores, the simulator shares the cores evenly among them, and a collective on a compute
// stream waits for no straggler: the member that waits gives its core to the late one.
// Measured runs sit between that and waiting for the whole measured straggle (the small
// GPT's mp 2 x pp 2 plans on 4 processes sharing 2 cores: 4-14 % slower than even sharing,
// 10-16 % faster than the whole straggle): a woken member waits for a core another rank
// holds, and every hand-off costs the caches a switch of process. How much depends on the
// machine and its scheduler, so profile measures it: the share of the straggle with which
// the simulated steps of the plans it ran (`profile --comm`'s measuring runs) are the
// steps those runs measured.

#include <vector>

#include "cost_model/op_cost_table.h"
#include "ir/module.h"
#include "ir/op_def.h"
#include "ir/status.h"

namespace pw::cost {

// A plan and the step a run of it measured (the median of its steps after the first).
struct MeasuredStep {
  const Module* plan = nullptr;
  double seconds = 0;
};

struct TurnStraggleFit {
  // Whether some plan's simulated step depends on the share (it has collectives on compute
  // streams of a node whose rank threads outnumber its cores); else share is 0.
  bool fitted = false;
  double share = 0;
  // Over the plans that depend on it, summed: the measured steps, and the simulated ones
  // with none of the straggle, all of it and the fitted share.
  double measured = 0, without = 0, with_all = 0, with_share = 0;
  int plans = 0;
};

// The share in [0, 1] whose simulated steady steps (`steps` back to back, priced with
// `table`) come nearest the measured ones: least squares of their relative errors over the
// plans whose step it moves (one plan: its step as measured, or the nearer end).
StatusOr<TurnStraggleFit> FitTurnStraggle(const std::vector<MeasuredStep>& runs,
                                          const OpCostTable& table, const OpRegistry& registry,
                                          int steps = 3);

}  // namespace pw::cost
