#include "cost_model/stage_flops.h"

#include <algorithm>

namespace pw {

StatusOr<double> OpFlops(const Program& program, const Op& op, const OpRegistry& registry) {
  const OpDef* def = registry.Find(op.type);
  if (!def) return InvalidArgument("unknown op type '", op.type, "'");
  if (!def->cost) return 0.0;
  auto ctx = InferOpTypes(*def, op, [&](const std::string& n) { return program.FindVar(n); });
  if (!ctx.ok()) return ctx.status().WithContext(op.type);
  return def->cost(*ctx).flops;
}

StatusOr<std::vector<StageFlops>> StageFlopsOf(const Module& module, const OpRegistry& registry) {
  std::vector<StageFlops> stages;
  bool any_backward = false;
  for (const Program& program : module.programs()) {
    for (const Op& op : program.ops()) {
      if (op.role == OpRole::kOptimize) continue;
      int stage = std::max(op.stage, 0);
      if (stages.size() <= static_cast<size_t>(stage)) stages.resize(stage + 1);
      PW_ASSIGN_OR_RETURN(double flops, OpFlops(program, op, registry));
      StageFlops& s = stages[stage];
      if (op.role == OpRole::kBackward) {
        any_backward = true;
        (op.weight_grad ? s.backward_weight : s.backward_input) += flops;
      } else {
        s.forward += flops;
      }
    }
  }
  for (size_t i = 0; i < stages.size(); ++i) {
    stages[i].stage = static_cast<int>(i);
    if (!any_backward) {
      stages[i].backward_input = stages[i].backward_weight = stages[i].forward;
      stages[i].estimated_backward = true;
    }
  }
  if (stages.empty()) return InvalidArgument("module has no ops to price");
  return stages;
}

}  // namespace pw
