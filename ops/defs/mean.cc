// mean: the scalar average of every element (the usual final loss reduction).

#include "ops/defs/def_util.h"
#include "ops/defs/register.h"

namespace pw::ops {
namespace {

Status InferMean(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "X"));
  if (NumElements(ctx.Input("X").shape) == 0) {
    return InvalidArgument(Where(ctx, "X"), " ", ShapeToString(ctx.Input("X").shape),
                           " is empty; its mean is undefined");
  }
  ctx.SetOutput("Out", {dtype, {}});
  return OkStatus();
}

Status MeanGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& x = fwd.Input("X");
  if (!ctx.NeedsGrad(x)) return OkStatus();
  const Var* xv = ctx.FindVar(x);
  if (!xv) return NotFound("mean grad: var '", x, "' is not declared");
  Op& op = ctx.Emit("mean_grad");
  op.SetInput(GradVarName("Out"), {ctx.Grad(fwd.Output("Out"))});
  op.SetOutput(GradVarName("X"), {ctx.Grad(x)});
  op.SetAttr("shape", xv->shape);
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

Status InferMeanGrad(InferContext& ctx) {
  const std::string dout = GradVarName("Out");
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, dout));
  PW_RETURN_IF_ERROR(CheckRank(ctx, dout, dtype, 0));
  Shape shape = ctx.attrs().GetInts("shape");
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument(ctx.op().type, ": bad shape ", ShapeToString(shape));
  }
  if (NumElements(shape) == 0) {
    return InvalidArgument(ctx.op().type, ": shape ", ShapeToString(shape), " is empty");
  }
  ctx.SetOutput(GradVarName("X"), {dtype, shape});
  return OkStatus();
}

}  // namespace

void RegisterMeanOps(OpRegistry& registry) {
  registry.Register(OpDef{
      .type = "mean",
      .summary = "Out [] = the mean of every element of X",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .amp = AmpPolicy::kF32,
      .infer = InferMean,
      .cost =
          [](const InferContext& ctx) {
            return OpCost{double(NumElements(ctx.Input("X").shape)), IoBytes(ctx)};
          },
      .grad = MeanGrad,
  });
  registry.Register(OpDef{
      .type = "mean_grad",
      .summary = "X@GRAD [shape] = Out@GRAD / numel(shape) everywhere",
      .inputs = {{GradVarName("Out")}},
      .outputs = {{GradVarName("X")}},
      .attrs = {RequiredAttr("shape", AttrType::kInts)},
      .amp = AmpPolicy::kF32,
      .infer = InferMeanGrad,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 1, GradVarName("X")); },
  });
}

}  // namespace pw::ops
