// layer_norm over the last axis. The backward is split into the input grad
// (layer_norm_grad) and the Scale/Bias grads (layer_norm_param_grad, a weight grad).

#include "ops/defs/def_util.h"
#include "ops/defs/defaults.h"
#include "ops/defs/register.h"

namespace pw::ops {
namespace {

// Rows = product of X's leading dims; Mean and Rstd have one value per row.
Shape RowShape(const Shape& x) { return {NumElements(Shape(x.begin(), x.end() - 1))}; }

// Scale and Bias: [d] in X's dtype.
Status CheckVector(const InferContext& ctx, std::string_view slot, int64_t d) {
  PW_RETURN_IF_ERROR(CheckDtype(ctx, slot, ctx.Input("X").dtype));
  const Shape& s = ctx.Input(slot).shape;
  if (s != Shape{d}) {
    return Mismatch(ctx, slot, s, "X", ctx.Input("X").shape, StrCat(slot, " must be [", d, "]"));
  }
  return OkStatus();
}

// Mean and Rstd are f32 whatever X's dtype: statistics accumulate in f32.
Status CheckStats(const InferContext& ctx) {
  Shape rows = RowShape(ctx.Input("X").shape);
  for (const char* slot : {"Mean", "Rstd"}) {
    PW_RETURN_IF_ERROR(CheckDtype(ctx, slot, DataType::kFloat32));
    if (ctx.Input(slot).shape != rows) {
      return Mismatch(ctx, slot, ctx.Input(slot).shape, "X", ctx.Input("X").shape,
                      "statistics need one value per row of X");
    }
  }
  return OkStatus();
}

Status CheckDy(const InferContext& ctx) {
  const std::string dy = GradVarName("Y");
  PW_RETURN_IF_ERROR(CheckDtype(ctx, dy, ctx.Input("X").dtype));
  return CheckSameType(ctx, dy, "X");
}

Status InferLayerNorm(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "X"));
  PW_RETURN_IF_ERROR(CheckRankAtLeast(ctx, "X", dtype, 1));
  const Shape& x = ctx.Input("X").shape;
  PW_RETURN_IF_ERROR(CheckVector(ctx, "Scale", x.back()));
  PW_RETURN_IF_ERROR(CheckVector(ctx, "Bias", x.back()));
  if (ctx.attrs().GetFloat("epsilon", kLayerNormEpsilon) <= 0) {
    return InvalidArgument(ctx.op().type, ": epsilon must be > 0");
  }
  ctx.SetOutput("Y", ctx.Input("X"));
  ctx.SetOutput("Mean", {DataType::kFloat32, RowShape(x)});
  ctx.SetOutput("Rstd", {DataType::kFloat32, RowShape(x)});
  return OkStatus();
}

Status LayerNormGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& x = fwd.Input("X");
  const std::string dy = ctx.Grad(fwd.Output("Y"));
  if (ctx.NeedsGrad(x)) {
    Op& op = ctx.Emit("layer_norm_grad");
    op.SetInput("X", {x}).SetInput("Scale", {fwd.Input("Scale")});
    op.SetInput("Mean", {fwd.Output("Mean")}).SetInput("Rstd", {fwd.Output("Rstd")});
    op.SetInput(GradVarName("Y"), {dy}).SetOutput(GradVarName("X"), {ctx.Grad(x)});
    MarkWeightGrad(ctx, op);
  }
  bool scale = ctx.NeedsGrad(fwd.Input("Scale"));
  bool bias = ctx.NeedsGrad(fwd.Input("Bias"));
  if (const int64_t per_lead = ShardPartialGroups(ctx, x); (scale || bias) && per_lead > 0) {
    // On a sequence shard holding whole row groups: its groups' partial sums, gathered.
    std::vector<std::pair<std::string, std::string>> outputs;  // (slot, gradient)
    for (const char* param : {"Scale", "Bias"})
      if (ctx.NeedsGrad(fwd.Input(param)))
        outputs.emplace_back(GradVarName(param), ctx.Grad(fwd.Input(param)));
    Op& op = ctx.Emit("layer_norm_param_grad");
    op.SetInput("X", {x}).SetInput("Mean", {fwd.Output("Mean")});
    op.SetInput("Rstd", {fwd.Output("Rstd")}).SetInput(GradVarName("Y"), {dy});
    EmitShardPartials(ctx, op, x, per_lead, outputs);
  } else if (scale || bias) {
    // On a sequence shard cutting a group: the same kernel over the whole sequence, gathered.
    std::string px = x, mean = fwd.Output("Mean"), rstd = fwd.Output("Rstd"), pdy = dy;
    if (SeqParallel(fwd)) {
      PW_ASSIGN_OR_RETURN(px, GatherSequence(ctx, x, x));
      PW_ASSIGN_OR_RETURN(mean, GatherSequence(ctx, mean, x, /*per_row=*/true));
      PW_ASSIGN_OR_RETURN(rstd, GatherSequence(ctx, rstd, x, /*per_row=*/true));
      PW_ASSIGN_OR_RETURN(pdy, GatherSequence(ctx, dy, x));
    }
    Op& op = ctx.Emit("layer_norm_param_grad");
    op.SetInput("X", {px}).SetInput("Mean", {mean});
    op.SetInput("Rstd", {rstd}).SetInput(GradVarName("Y"), {pdy});
    if (scale) op.SetOutput(GradVarName("Scale"), {ctx.Grad(fwd.Input("Scale"))});
    if (bias) op.SetOutput(GradVarName("Bias"), {ctx.Grad(fwd.Input("Bias"))});
    MarkWeightGrad(ctx, op);
  }
  return OkStatus();
}

Status InferLayerNormGrad(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "X"));
  PW_RETURN_IF_ERROR(CheckRankAtLeast(ctx, "X", dtype, 1));
  PW_RETURN_IF_ERROR(CheckVector(ctx, "Scale", ctx.Input("X").shape.back()));
  PW_RETURN_IF_ERROR(CheckStats(ctx));
  PW_RETURN_IF_ERROR(CheckDy(ctx));
  ctx.SetOutput(GradVarName("X"), ctx.Input("X"));
  return OkStatus();
}

Status InferLayerNormParamGrad(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "X"));
  PW_RETURN_IF_ERROR(CheckRankAtLeast(ctx, "X", dtype, 1));
  PW_RETURN_IF_ERROR(CheckStats(ctx));
  PW_RETURN_IF_ERROR(CheckDy(ctx));
  const Shape& x = ctx.Input("X").shape;
  PW_ASSIGN_OR_RETURN(TensorType param,
                      RowSumType(ctx, Shape(x.begin(), x.end() - 1), {x.back()}, dtype));
  ctx.SetOutput(GradVarName("Scale"), param);
  ctx.SetOutput(GradVarName("Bias"), param);
  return OkStatus();
}

}  // namespace

void RegisterNormOps(OpRegistry& registry) {
  registry.Register(OpDef{
      .type = "layer_norm",
      .summary = "Y = (X - mean) · rstd · Scale + Bias over the last axis; saves Mean, Rstd",
      .inputs = {{"X"}, {"Scale"}, {"Bias"}},
      .outputs = {{"Y"}, {"Mean"}, {"Rstd"}},
      .attrs = WithSeqParallel({DefaultAttr("epsilon", kLayerNormEpsilon)}),
      .infer = InferLayerNorm,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 8, "Y"); },
      .grad = LayerNormGrad,
  });
  registry.Register(OpDef{
      .type = "layer_norm_grad",
      .summary = "X@GRAD of layer_norm",
      .inputs = {{"X"}, {"Scale"}, {"Mean"}, {"Rstd"}, {GradVarName("Y")}},
      .outputs = {{GradVarName("X")}},
      .f32_inputs = {"Mean", "Rstd"},
      .infer = InferLayerNormGrad,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 10, GradVarName("X")); },
  });
  registry.Register(OpDef{
      .type = "layer_norm_param_grad",
      .summary = "Scale@GRAD = sum(Y@GRAD · x̂), Bias@GRAD = sum(Y@GRAD) over rows, in row "
                 "groups; with partial_groups, each group's f32 partial sum",
      .inputs = {{"X"}, {"Mean"}, {"Rstd"}, {GradVarName("Y")}},
      .outputs = {{GradVarName("Scale"), false, /*optional=*/true},
                  {GradVarName("Bias"), false, /*optional=*/true}},
      .attrs = {PartialGroupsAttr()},
      .f32_inputs = {"Mean", "Rstd"},
      .infer = InferLayerNormParamGrad,
      .cost =
          [](const InferContext& ctx) {
            return OpCost{4.0 * NumElements(ctx.Input("X").shape), IoBytes(ctx)};
          },
  });
}

}  // namespace pw::ops
