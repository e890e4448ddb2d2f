// rms_norm over the last axis (Llama's RMSNorm: no centring, no bias). As with layer_norm,
// the backward is split into the input grad (rms_norm_grad) and the Scale grad
// (rms_norm_param_grad, a weight grad that zero-bubble schedules may defer).

#include "ops/defs/def_util.h"
#include "ops/defs/defaults.h"
#include "ops/defs/register.h"

namespace pw::ops {
namespace {

// One statistic per row: the product of X's leading dims.
Shape RowShape(const Shape& x) { return {NumElements(Shape(x.begin(), x.end() - 1))}; }

Status CheckScale(const InferContext& ctx) {
  PW_RETURN_IF_ERROR(CheckDtype(ctx, "Scale", ctx.Input("X").dtype));
  const int64_t d = ctx.Input("X").shape.back();
  if (ctx.Input("Scale").shape != Shape{d})
    return Mismatch(ctx, "Scale", ctx.Input("Scale").shape, "X", ctx.Input("X").shape,
                    StrCat("Scale must be [", d, "]"));
  return OkStatus();
}

// Rstd is f32 whatever X's dtype: the sum of squares accumulates in f32 or wider.
Status CheckRstd(const InferContext& ctx) {
  PW_RETURN_IF_ERROR(CheckDtype(ctx, "Rstd", DataType::kFloat32));
  if (ctx.Input("Rstd").shape != RowShape(ctx.Input("X").shape))
    return Mismatch(ctx, "Rstd", ctx.Input("Rstd").shape, "X", ctx.Input("X").shape,
                    "Rstd needs one value per row of X");
  return OkStatus();
}

Status CheckDy(const InferContext& ctx) {
  const std::string dy = GradVarName("Y");
  PW_RETURN_IF_ERROR(CheckDtype(ctx, dy, ctx.Input("X").dtype));
  return CheckSameType(ctx, dy, "X");
}

Status InferRmsNorm(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "X"));
  PW_RETURN_IF_ERROR(CheckRankAtLeast(ctx, "X", dtype, 1));
  PW_RETURN_IF_ERROR(CheckScale(ctx));
  if (!(ctx.attrs().GetFloat("epsilon", kRmsNormEpsilon) > 0))
    return InvalidArgument(ctx.op().type, ": epsilon must be > 0");
  ctx.SetOutput("Y", ctx.Input("X"));
  ctx.SetOutput("Rstd", {DataType::kFloat32, RowShape(ctx.Input("X").shape)});
  return OkStatus();
}

Status RmsNormGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& x = fwd.Input("X");
  const std::string& scale = fwd.Input("Scale");
  const std::string dy = ctx.Grad(fwd.Output("Y"));
  if (ctx.NeedsGrad(x)) {
    Op& op = ctx.Emit("rms_norm_grad");
    op.SetInput("X", {x}).SetInput("Scale", {scale}).SetInput("Rstd", {fwd.Output("Rstd")});
    op.SetInput(GradVarName("Y"), {dy}).SetOutput(GradVarName("X"), {ctx.Grad(x)});
    MarkWeightGrad(ctx, op);
  }
  if (const int64_t per_lead = ShardPartialGroups(ctx, x); ctx.NeedsGrad(scale) && per_lead > 0) {
    // On a sequence shard holding whole row groups: its groups' partial sums, gathered.
    Op& op = ctx.Emit("rms_norm_param_grad");
    op.SetInput("X", {x}).SetInput("Rstd", {fwd.Output("Rstd")});
    op.SetInput(GradVarName("Y"), {dy});
    EmitShardPartials(ctx, op, x, per_lead, {{GradVarName("Scale"), ctx.Grad(scale)}});
  } else if (ctx.NeedsGrad(scale)) {
    // On a sequence shard cutting a group: the same kernel over the whole sequence, gathered.
    std::string px = x, rstd = fwd.Output("Rstd"), pdy = dy;
    if (SeqParallel(fwd)) {
      PW_ASSIGN_OR_RETURN(px, GatherSequence(ctx, x, x));
      PW_ASSIGN_OR_RETURN(rstd, GatherSequence(ctx, rstd, x, /*per_row=*/true));
      PW_ASSIGN_OR_RETURN(pdy, GatherSequence(ctx, dy, x));
    }
    Op& op = ctx.Emit("rms_norm_param_grad");
    op.SetInput("X", {px}).SetInput("Rstd", {rstd});
    op.SetInput(GradVarName("Y"), {pdy}).SetOutput(GradVarName("Scale"), {ctx.Grad(scale)});
    MarkWeightGrad(ctx, op);
  }
  return OkStatus();
}

Status InferRmsNormGrad(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "X"));
  PW_RETURN_IF_ERROR(CheckRankAtLeast(ctx, "X", dtype, 1));
  PW_RETURN_IF_ERROR(CheckScale(ctx));
  PW_RETURN_IF_ERROR(CheckRstd(ctx));
  PW_RETURN_IF_ERROR(CheckDy(ctx));
  ctx.SetOutput(GradVarName("X"), ctx.Input("X"));
  return OkStatus();
}

Status InferRmsNormParamGrad(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "X"));
  PW_RETURN_IF_ERROR(CheckRankAtLeast(ctx, "X", dtype, 1));
  PW_RETURN_IF_ERROR(CheckRstd(ctx));
  PW_RETURN_IF_ERROR(CheckDy(ctx));
  const Shape& x = ctx.Input("X").shape;
  PW_ASSIGN_OR_RETURN(TensorType scale,
                      RowSumType(ctx, Shape(x.begin(), x.end() - 1), {x.back()}, dtype));
  ctx.SetOutput(GradVarName("Scale"), scale);
  return OkStatus();
}

}  // namespace

void RegisterRmsNormOps(OpRegistry& registry) {
  registry.Register(OpDef{
      .type = "rms_norm",
      .summary = "Y = X · rstd · Scale over the last axis, rstd = 1 / sqrt(mean(X²) + epsilon); "
                 "saves Rstd",
      .inputs = {{"X"}, {"Scale"}},
      .outputs = {{"Y"}, {"Rstd"}},
      .attrs = WithSeqParallel({DefaultAttr("epsilon", kRmsNormEpsilon)}),
      .infer = InferRmsNorm,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 4, "Y"); },
      .grad = RmsNormGrad,
  });
  registry.Register(OpDef{
      .type = "rms_norm_grad",
      .summary = "X@GRAD of rms_norm: rstd · (g - x̂ · mean(g · x̂)), g = Y@GRAD · Scale",
      .inputs = {{"X"}, {"Scale"}, {"Rstd"}, {GradVarName("Y")}},
      .outputs = {{GradVarName("X")}},
      .f32_inputs = {"Rstd"},
      .infer = InferRmsNormGrad,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 7, GradVarName("X")); },
  });
  registry.Register(OpDef{
      .type = "rms_norm_param_grad",
      .summary = "Scale@GRAD = sum over rows of Y@GRAD · X · rstd, in row groups; with "
                 "partial_groups, each group's f32 partial sum",
      .inputs = {{"X"}, {"Rstd"}, {GradVarName("Y")}},
      .outputs = {{GradVarName("Scale")}},
      .attrs = {PartialGroupsAttr()},
      .f32_inputs = {"Rstd"},
      .infer = InferRmsNormParamGrad,
      .cost =
          [](const InferContext& ctx) {
            return OpCost{3.0 * NumElements(ctx.Input("X").shape), IoBytes(ctx)};
          },
  });
}

}  // namespace pw::ops
