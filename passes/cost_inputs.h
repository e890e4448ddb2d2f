#pragma once
// What `pipeweave profile`, `sim` and `opt` share: loading a module ready to train (the
// --pipeline passes, or append-backward on a forward-only module), the estimator from
// --device and --costs, and handing it to passes.

#include <memory>
#include <string>

#include "cost_model/estimator.h"
#include "ir/module.h"
#include "passes/pass_context.h"
#include "simulator/simulator.h"

namespace pw {

// Loads `path`; runs `pipeline` when given, else append-backward (its defaults) when the
// module has no backward ops yet. With an estimator, the passes that price their choices
// (balance-stages, recompute{policy=auto}, the overlap passes) price them with it.
StatusOr<Module> LoadTrainingModule(const std::string& path, const std::string& pipeline,
                                    std::shared_ptr<cost::Estimator> estimator = nullptr);

// `device`: cpu, h100, a100 or a DeviceSpec file; `costs`: a cost table file or empty.
StatusOr<std::shared_ptr<cost::Estimator>> MakeEstimator(const std::string& device,
                                                         const std::string& costs);

// Attaches the estimator and a simulator over it to `context`, so that passes can price a
// candidate rewrite (context.Find<cost::Estimator>(), context.Find<cost::Simulator>()).
void AttachCostModel(std::shared_ptr<cost::Estimator> estimator, PassContext& context);

// The module's plan simulated with the context's simulator, else one over its estimator (a
// pass that keeps a rewrite only where the step gets shorter, or the plan still fits).
StatusOr<cost::SimResult> SimulatePlan(const Module& module, PassContext& context);
// Its step, in seconds.
StatusOr<double> SimulatedStep(const Module& module, PassContext& context);

}  // namespace pw
