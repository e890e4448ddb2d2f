// swiglu: the gated activation of a Llama MLP, silu(Gate) · Up, fused into one op so that
// the SiLU's output is never stored. Gate and Up come from two column-parallel linears
// whose shards line up column for column, so the op is element-wise on every mp rank.

#include "ops/defs/def_util.h"
#include "ops/defs/register.h"

namespace pw::ops {
namespace {

Status InferSwiglu(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "Gate"));
  PW_RETURN_IF_ERROR(CheckDtype(ctx, "Up", dtype));
  PW_RETURN_IF_ERROR(CheckSameType(ctx, "Gate", "Up"));
  ctx.SetOutput("Out", ctx.Input("Gate"));
  return OkStatus();
}

Status SwigluGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& gate = fwd.Input("Gate");
  const std::string& up = fwd.Input("Up");
  const bool dgate = ctx.NeedsGrad(gate), dup = ctx.NeedsGrad(up);
  if (!dgate && !dup) return OkStatus();
  Op& op = ctx.Emit("swiglu_grad");
  op.SetInput("Gate", {gate}).SetInput("Up", {up});
  op.SetInput(GradVarName("Out"), {ctx.Grad(fwd.Output("Out"))});
  if (dgate) op.SetOutput(GradVarName("Gate"), {ctx.Grad(gate)});
  if (dup) op.SetOutput(GradVarName("Up"), {ctx.Grad(up)});
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

Status InferSwigluGrad(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "Gate"));
  PW_RETURN_IF_ERROR(CheckDtype(ctx, "Up", dtype));
  PW_RETURN_IF_ERROR(CheckSameType(ctx, "Gate", "Up"));
  PW_RETURN_IF_ERROR(CheckDtype(ctx, GradVarName("Out"), dtype));
  PW_RETURN_IF_ERROR(CheckSameType(ctx, GradVarName("Out"), "Gate"));
  ctx.SetOutput(GradVarName("Gate"), ctx.Input("Gate"));
  ctx.SetOutput(GradVarName("Up"), ctx.Input("Gate"));
  return OkStatus();
}

}  // namespace

void RegisterSwigluOps(OpRegistry& registry) {
  registry.Register(OpDef{
      .type = "swiglu",
      .summary = "Out = silu(Gate) · Up, silu(x) = x · sigmoid(x) (same shapes)",
      .inputs = {{"Gate"}, {"Up"}},
      .outputs = {{"Out"}},
      .infer = InferSwiglu,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 6); },
      .grad = SwigluGrad,
  });
  registry.Register(OpDef{
      .type = "swiglu_grad",
      .summary = "Gate@GRAD = Out@GRAD · Up · silu'(Gate), Up@GRAD = Out@GRAD · silu(Gate); "
                 "either output may be absent",
      .inputs = {{"Gate"}, {"Up"}, {GradVarName("Out")}},
      .outputs = {{GradVarName("Gate"), false, /*optional=*/true},
                  {GradVarName("Up"), false, /*optional=*/true}},
      .infer = InferSwigluGrad,
      .cost =
          [](const InferContext& ctx) {
            return OpCost{12.0 * NumElements(ctx.Input("Gate").shape), IoBytes(ctx)};
          },
  });
}

}  // namespace pw::ops
