// Megatron's f and g: c_identity (identity forward, all-reduce backward) and
// c_allreduce_sum (all-reduce forward, identity backward); c_allreduce_max, the shared
// shift of a vocabulary-parallel softmax and the overflow flag of loss scaling.

#include "ops/defs/def_util.h"
#include "ops/defs/defaults.h"
#include "ops/defs/register.h"

namespace pw::ops {
namespace {

Status InferCollective(InferContext& ctx) {
  PW_RETURN_IF_ERROR(FloatDtype(ctx, "X").status());
  std::string group = ctx.attrs().GetString("group", kDefaultGroup);
  if (group.empty()) return InvalidArgument(ctx.op().type, ": group must not be empty");
  ctx.SetOutput("Out", ctx.Input("X"));
  return OkStatus();
}

Status CIdentityGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& x = fwd.Input("X");
  if (!ctx.NeedsGrad(x)) return OkStatus();
  Op& op = ctx.Emit("c_allreduce_sum");
  op.role = OpRole::kCommunication;
  op.SetInput("X", {ctx.Grad(fwd.Output("Out"))}).SetOutput("Out", {ctx.Grad(x)});
  op.SetAttr("group", fwd.attrs.GetString("group", kDefaultGroup));
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

Status AllReduceGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  if (ctx.NeedsGrad(fwd.Input("X"))) ctx.Alias(fwd.Input("X"), fwd.Output("Out"));
  return OkStatus();
}

}  // namespace

void RegisterCollectiveOps(OpRegistry& registry) {
  std::vector<AttrDef> attrs = {DefaultAttr("group", std::string(kDefaultGroup))};
  registry.Register(OpDef{
      .type = "c_identity",
      .summary = "Out = X; its gradient is all-reduced over group (Megatron's f)",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .attrs = attrs,
      .is_communication = true,
      .amp = AmpPolicy::kAsIs,  // communicates in its input's dtype
      .infer = InferCollective,
      .cost =
          [](const InferContext& ctx) {
            return OpCost{0, IoBytes(ctx)};
          },
      .grad = CIdentityGrad,
  });
  registry.Register(OpDef{
      .type = "c_allreduce_sum",
      .summary = "Out = sum of X over the ranks of group; identity backward (Megatron's g)",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .attrs = attrs,
      .is_communication = true,
      .collective = true,
      .amp = AmpPolicy::kAsIs,  // sums in its input's dtype: bf16 activations, f32 statistics
      .infer = InferCollective,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 1); },
      .grad = AllReduceGrad,
  });
  registry.Register(OpDef{
      .type = "c_allreduce_max",
      .summary = "Out = element-wise max of X over the ranks of group (not differentiated: "
                 "its users' gradients do not depend on it)",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .attrs = attrs,
      .is_communication = true,
      .collective = true,
      .amp = AmpPolicy::kAsIs,
      .infer = InferCollective,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 1); },
  });
}

}  // namespace pw::ops
