// softmax over the last axis (optionally causal) and the fused softmax + cross-entropy
// loss. Their grads read the saved softmax instead of recomputing it.

#include <algorithm>

#include "ops/defs/def_util.h"
#include "ops/defs/defaults.h"
#include "ops/defs/register.h"

namespace pw::ops {
namespace {

Status InferSoftmax(InferContext& ctx) {
  bool causal = ctx.attrs().GetBool("causal");
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "X"));
  PW_RETURN_IF_ERROR(CheckRankAtLeast(ctx, "X", dtype, causal ? 2 : 1));
  ctx.SetOutput("Out", ctx.Input("X"));
  return OkStatus();
}

Status SoftmaxGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& x = fwd.Input("X");
  if (!ctx.NeedsGrad(x)) return OkStatus();
  Op& op = ctx.Emit("softmax_grad");
  op.SetInput("Out", {fwd.Output("Out")})
      .SetInput(GradVarName("Out"), {ctx.Grad(fwd.Output("Out"))});
  op.SetOutput(GradVarName("X"), {ctx.Grad(x)});
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

Status InferSoftmaxGrad(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "Out"));
  PW_RETURN_IF_ERROR(CheckRankAtLeast(ctx, "Out", dtype, 1));
  PW_RETURN_IF_ERROR(CheckDtype(ctx, GradVarName("Out"), dtype));
  PW_RETURN_IF_ERROR(CheckSameType(ctx, GradVarName("Out"), "Out"));
  ctx.SetOutput(GradVarName("X"), ctx.Input("Out"));
  return OkStatus();
}

// Label must be Logits' shape without the class axis.
Status CheckLabel(const InferContext& ctx, std::string_view probs_slot) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, probs_slot));
  PW_RETURN_IF_ERROR(CheckRankAtLeast(ctx, probs_slot, dtype, 1));
  PW_RETURN_IF_ERROR(CheckDtype(ctx, "Label", DataType::kInt64));
  const Shape& p = ctx.Input(probs_slot).shape;
  const Shape& l = ctx.Input("Label").shape;
  if (l != Shape(p.begin(), p.end() - 1)) {
    return Mismatch(ctx, probs_slot, p, "Label", l,
                    StrCat("Label must be ", probs_slot, "'s shape without the last dim"));
  }
  return OkStatus();
}

Status InferSce(InferContext& ctx) {
  PW_RETURN_IF_ERROR(CheckLabel(ctx, "Logits"));
  ctx.SetOutput("Loss", {ctx.Input("Logits").dtype, ctx.Input("Label").shape});
  ctx.SetOutput("Softmax", ctx.Input("Logits"));
  return OkStatus();
}

Status SceGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& logits = fwd.Input("Logits");
  if (!ctx.NeedsGrad(logits)) return OkStatus();
  Op& op = ctx.Emit("softmax_cross_entropy_grad");
  op.SetInput("Softmax", {fwd.Output("Softmax")}).SetInput("Label", {fwd.Input("Label")});
  op.SetInput(GradVarName("Loss"), {ctx.Grad(fwd.Output("Loss"))});
  op.SetOutput(GradVarName("Logits"), {ctx.Grad(logits)});
  op.SetAttr("ignore_index", fwd.attrs.GetInt("ignore_index", kIgnoreIndex));
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

Status InferSceGrad(InferContext& ctx) {
  PW_RETURN_IF_ERROR(CheckLabel(ctx, "Softmax"));
  const std::string dloss = GradVarName("Loss");
  PW_RETURN_IF_ERROR(CheckDtype(ctx, dloss, ctx.Input("Softmax").dtype));
  if (ctx.Input(dloss).shape != ctx.Input("Label").shape) {
    return Mismatch(ctx, dloss, ctx.Input(dloss).shape, "Label", ctx.Input("Label").shape,
                    "shapes differ");
  }
  ctx.SetOutput(GradVarName("Logits"), ctx.Input("Softmax"));
  return OkStatus();
}

}  // namespace

void RegisterSoftmaxOps(OpRegistry& registry) {
  registry.Register(OpDef{
      .type = "softmax",
      .summary = "softmax over the last axis; causal masks j > i on the last two dims",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .attrs = {DefaultAttr("causal", false)},
      .infer = InferSoftmax,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 5); },
      .grad = SoftmaxGrad,
  });
  registry.Register(OpDef{
      .type = "softmax_grad",
      .summary = "X@GRAD = Out · (Out@GRAD - sum(Out@GRAD · Out))",
      .inputs = {{"Out"}, {GradVarName("Out")}},
      .outputs = {{GradVarName("X")}},
      .infer = InferSoftmaxGrad,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 4, GradVarName("X")); },
  });
  registry.Register(OpDef{
      .type = "softmax_cross_entropy",
      .summary = "per-token Loss = logsumexp(Logits) - Logits[Label]; also saves Softmax. "
                 "Tokens labelled ignore_index get loss 0",
      .inputs = {{"Logits"}, {"Label"}},
      .outputs = {{"Loss"}, {"Softmax"}},
      .attrs = {DefaultAttr("ignore_index", kIgnoreIndex)},
      .amp = AmpPolicy::kF32,
      .infer = InferSce,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 5, "Softmax"); },
      .grad = SceGrad,
  });
  registry.Register(OpDef{
      .type = "softmax_cross_entropy_grad",
      .summary = "Logits@GRAD = (Softmax - onehot(Label)) · Loss@GRAD",
      .inputs = {{"Softmax"}, {"Label"}, {GradVarName("Loss")}},
      .outputs = {{GradVarName("Logits")}},
      .attrs = {DefaultAttr("ignore_index", kIgnoreIndex)},
      .amp = AmpPolicy::kF32,
      .infer = InferSceGrad,
      .cost =
          [](const InferContext& ctx) { return ElementwiseCost(ctx, 2, GradVarName("Logits")); },
  });
}

}  // namespace pw::ops
