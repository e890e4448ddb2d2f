#pragma once
// The action-level simulator's costs of a split module, priced by the cost model: what
// the passes that plan with that simulator (schedule's zb-h2 and zb-auto, order-comm) plan
// with when `opt --device/--costs` attaches a cost model.

#include <optional>
#include <string_view>

#include "cost_model/estimator.h"
#include "ir/module.h"
#include "ir/op_def.h"
#include "passes/pass.h"
#include "passes/pass_context.h"
#include "passes/pass_option.h"
#include "passes/pipeline/module_stages.h"
#include "simulator/action_simulator.h"

namespace pw::pipeline {

// F, B (the input gradient, or the whole backward when it is not split) and W as the
// means over stages of their programs' priced time, each stage's total against the mean
// total as its scale, and comm the send/recv time of the largest activation a stage
// hands on. Milliseconds. Each stage is priced on the first rank of its pipeline rank.
StatusOr<ActionCosts> PriceStages(const Module& module, const ModuleStages& stages,
                                  const cost::Estimator& estimator, const OpRegistry& ops);

// F, B, W and comm as the user gave them in a pass's options (F=, B=, W=, comm=).
struct GivenStageCosts {
  std::optional<double> forward, backward, weight, comm;
};

// The F=, B=, W= and comm= options of a pass that plans by stage costs. They have no
// defaults, so that the cost model prices what the user does not give; `otherwise` says in
// each description what applies without one ("" when the pass needs them then).
class StageCostOptions {
 public:
  StageCostOptions(Pass* pass, std::string_view otherwise_compute, std::string_view otherwise_comm);
  GivenStageCosts Given() const {
    return {forward_.optional(), backward_.optional(), weight_.optional(), comm_.optional()};
  }

 private:
  Option<double> forward_, backward_, weight_, comm_;
};

// The costs a pass plans with: the cost model's (PriceStages) when the context has one,
// each figure the user gave replacing its price. Without a cost model, what is not given
// comes from `defaults`; with no defaults that is an error naming `pass` and the option.
StatusOr<ActionCosts> PlanningCosts(const Module& module, const ModuleStages& stages,
                                    const PassContext& context, const GivenStageCosts& given,
                                    std::string_view pass, const ActionCosts* defaults);

}  // namespace pw::pipeline
