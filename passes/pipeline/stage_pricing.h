#pragma once
// The action-level simulator's costs of a split module, priced by the cost model: what
// the passes that search schedules with that simulator (order-comm) plan with when
// `opt --device/--costs` attaches a cost model.

#include "cost_model/estimator.h"
#include "ir/module.h"
#include "ir/op_def.h"
#include "passes/pipeline/module_stages.h"
#include "simulator/action_simulator.h"

namespace pw::pipeline {

// F, B (the input gradient, or the whole backward when it is not split) and W as the
// means over stages of their programs' priced time, each stage's total against the mean
// total as its scale, and comm the send/recv time of the largest activation a stage
// hands on. Milliseconds. Each stage is priced on the first rank of its pipeline rank.
StatusOr<ActionCosts> PriceStages(const Module& module, const ModuleStages& stages,
                                  const cost::Estimator& estimator, const OpRegistry& ops);

}  // namespace pw::pipeline
