#include "passes/cost_inputs.h"

#include "ir/proto_io.h"
#include "ops/registry.h"
#include "passes/pass_manager.h"
#include "simulator/simulator.h"

namespace pw {
namespace {

bool HasBackward(const Module& module) {
  for (const Program& p : module.programs())
    for (const Op& op : p.ops())
      if (op.role == OpRole::kBackward) return true;
  return false;
}

}  // namespace

StatusOr<Module> LoadTrainingModule(const std::string& path, const std::string& pipeline,
                                    std::shared_ptr<cost::Estimator> estimator) {
  PW_ASSIGN_OR_RETURN(Module module, LoadModule(path));
  std::string passes = pipeline;
  if (passes.empty() && module.plan.empty() && !HasBackward(module)) passes = "append-backward";
  if (!passes.empty()) {
    PassManager pm;
    PW_RETURN_IF_ERROR(pm.AddPipeline(passes));
    PassContext context(ops::Registry());
    if (estimator) AttachCostModel(std::move(estimator), context);
    Status s = pm.Run(module, context).status();
    if (!s.ok()) return s.WithContext(path);
  }
  return module;
}

StatusOr<std::shared_ptr<cost::Estimator>> MakeEstimator(const std::string& device,
                                                         const std::string& costs) {
  PW_ASSIGN_OR_RETURN(cost::DeviceSpec spec, cost::ResolveDeviceSpec(device));
  cost::OpCostTable table;
  if (!costs.empty()) {
    PW_ASSIGN_OR_RETURN(table, cost::OpCostTable::Load(costs));
  }
  return cost::Estimator::Create(std::move(spec), std::move(table));
}

void AttachCostModel(std::shared_ptr<cost::Estimator> estimator, PassContext& context) {
  // Passes price step times: no per-instruction timeline, so the simulator folds identical
  // dp replicas into one (a 1024-rank plan simulates as its 64 distinct ranks).
  cost::SimOptions options;
  options.record_timeline = false;
  context.Attach(std::make_shared<cost::Simulator>(estimator, ops::Registry(), options));
  context.Attach(std::move(estimator));
}

StatusOr<cost::SimResult> SimulatePlan(const Module& module, PassContext& context) {
  if (const cost::Simulator* simulator = context.Find<cost::Simulator>())
    return simulator->Run(module);
  cost::Simulator own(std::shared_ptr<const cost::Estimator>(context.Find<cost::Estimator>(),
                                                             [](const cost::Estimator*) {}),
                      context.ops());
  return own.Run(module);
}

StatusOr<double> SimulatedStep(const Module& module, PassContext& context) {
  PW_ASSIGN_OR_RETURN(cost::SimResult result, SimulatePlan(module, context));
  return result.step_time;
}

}  // namespace pw
