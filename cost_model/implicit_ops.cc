#include "cost_model/implicit_ops.h"

namespace pw::cost {

std::set<std::string> OptimizerGradients(
    const std::vector<const Op*>& optimizer_ops, const std::vector<const Op*>& other_ops,
    const std::function<bool(const std::string&)>& is_persistable) {
  std::set<std::string> written, grads;
  for (const Op* op : other_ops)
    op->ForEachOutput([&](const std::string& v) { written.insert(v); });
  for (const Op* op : optimizer_ops)
    op->ForEachInput([&](const std::string& v) {
      if (written.count(v) && !is_persistable(v)) grads.insert(v);
    });
  return grads;
}

Op GradAccumulateOp(const std::string& grad) {
  Op add;
  add.type = "add";
  add.role = OpRole::kBackward;
  add.SetInput("X", {grad}).SetInput("Y", {grad}).SetOutput("Out", {grad});
  return add;
}

Op GradScaleOp(const std::string& grad, double scale) {
  Op op;
  op.type = "scale";
  op.role = OpRole::kOptimize;
  op.SetInput("X", {grad}).SetOutput("Out", {grad});
  op.SetAttr("scale", scale).SetAttr("bias", 0.0);
  return op;
}

Op DpAllReduceOp(const std::string& grad) {
  Op op;
  op.type = "c_allreduce_sum";
  op.role = OpRole::kCommunication;
  op.SetInput("X", {grad}).SetOutput("Out", {grad}).SetAttr("group", std::string("dp"));
  return op;
}

}  // namespace pw::cost
