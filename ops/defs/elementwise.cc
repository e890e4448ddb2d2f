// Element-wise ops: bias_add, add, gelu, scale, sum and their grads.

#include <algorithm>

#include "ops/defs/def_util.h"
#include "ops/defs/register.h"

namespace pw::ops {
namespace {

Status InferBiasAdd(InferContext& ctx) {
  PW_RETURN_IF_ERROR(CheckBias(ctx, "X", "Bias"));
  ctx.SetOutput("Out", ctx.Input("X"));
  return OkStatus();
}

Status BiasAddGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& bias = fwd.Input("Bias");
  if (ctx.NeedsGrad(fwd.Input("X"))) ctx.Alias(fwd.Input("X"), fwd.Output("Out"));
  if (!ctx.NeedsGrad(bias)) return OkStatus();
  const Var* bv = ctx.FindVar(bias);
  if (!bv) return NotFound("bias_add grad: var '", bias, "' is not declared");
  std::string dout = ctx.Grad(fwd.Output("Out"));
  if (int64_t per_lead = ShardPartialGroups(ctx, fwd.Input("X")); per_lead > 0) {
    // On a sequence shard holding whole row groups: its groups' partial sums, gathered.
    Op& op = ctx.Emit("bias_add_grad");
    op.SetInput(GradVarName("Out"), {dout}).SetAttr("bias_shape", bv->shape);
    EmitShardPartials(ctx, op, fwd.Input("X"), per_lead, {{GradVarName("Bias"), ctx.Grad(bias)}});
    return OkStatus();
  }
  // On a sequence shard cutting a group: the same sum over the whole sequence, gathered.
  if (SeqParallel(fwd)) {
    PW_ASSIGN_OR_RETURN(dout, GatherSequence(ctx, dout, fwd.Input("X")));
  }
  Op& op = ctx.Emit("bias_add_grad");
  op.SetInput(GradVarName("Out"), {dout});
  op.SetOutput(GradVarName("Bias"), {ctx.Grad(bias)});
  op.SetAttr("bias_shape", bv->shape);
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

Status InferBiasAddGrad(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(TensorType dbias, BiasGradType(ctx, GradVarName("Out")));
  ctx.SetOutput(GradVarName("Bias"), dbias);
  return OkStatus();
}

// X: f32 partial sums [.., H]; Out takes Param's type ([H]).
Status InferSumRowPartials(InferContext& ctx) {
  PW_RETURN_IF_ERROR(CheckRankAtLeast(ctx, "X", DataType::kFloat32, 1));
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "Param"));
  const Shape& x = ctx.Input("X").shape;
  const Shape& p = ctx.Input("Param").shape;
  if (NumElements(p) != x.back())
    return Mismatch(ctx, "X", x, "Param", p, "each row of X must have Param's elements");
  ctx.SetOutput("Out", {dtype, p});
  return OkStatus();
}

Status InferAdd(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "X"));
  PW_RETURN_IF_ERROR(CheckDtype(ctx, "Y", dtype));
  PW_RETURN_IF_ERROR(CheckSameType(ctx, "X", "Y"));
  ctx.SetOutput("Out", ctx.Input("X"));
  return OkStatus();
}

Status AddGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  for (const char* slot : {"X", "Y"}) {
    if (ctx.NeedsGrad(fwd.Input(slot))) ctx.Alias(fwd.Input(slot), fwd.Output("Out"));
  }
  return OkStatus();
}

// Out has X's type; used by every unary op.
Status InferUnary(InferContext& ctx) {
  PW_RETURN_IF_ERROR(FloatDtype(ctx, "X").status());
  ctx.SetOutput("Out", ctx.Input("X"));
  return OkStatus();
}

Status GeluGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& x = fwd.Input("X");
  if (!ctx.NeedsGrad(x)) return OkStatus();
  Op& op = ctx.Emit("gelu_grad");
  op.SetInput("X", {x}).SetInput(GradVarName("Out"), {ctx.Grad(fwd.Output("Out"))});
  op.SetOutput(GradVarName("X"), {ctx.Grad(x)});
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

Status InferGeluGrad(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "X"));
  PW_RETURN_IF_ERROR(CheckDtype(ctx, GradVarName("Out"), dtype));
  PW_RETURN_IF_ERROR(CheckSameType(ctx, "X", GradVarName("Out")));
  ctx.SetOutput(GradVarName("X"), ctx.Input("X"));
  return OkStatus();
}

// d(scale·x + bias)/dx = scale: the grad is another scale op.
Status ScaleGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& x = fwd.Input("X");
  if (!ctx.NeedsGrad(x)) return OkStatus();
  Op& op = ctx.Emit("scale");
  op.SetInput("X", {ctx.Grad(fwd.Output("Out"))}).SetOutput("Out", {ctx.Grad(x)});
  op.SetAttr("scale", fwd.attrs.GetFloat("scale", 1.0)).SetAttr("bias", 0.0);
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

Status InferSum(InferContext& ctx) {
  size_t n = ctx.InputCount("X");
  if (n == 0) return InvalidArgument(ctx.op().type, ": X needs at least one var");
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "X"));
  for (size_t i = 0; i < n; ++i) {
    PW_RETURN_IF_ERROR(CheckDtype(ctx, "X", dtype, i));
    if (ctx.Input("X", i).shape != ctx.Input("X", 0).shape) {
      return Mismatch(ctx, StrCat("X[", i, "]"), ctx.Input("X", i).shape, "X[0]",
                      ctx.Input("X", 0).shape, "shapes differ");
    }
  }
  ctx.SetOutput("Out", ctx.Input("X", 0));
  return OkStatus();
}

// Every summand receives the whole output gradient.
Status SumGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  for (const std::string& x : *fwd.FindInput("X")) {
    if (ctx.NeedsGrad(x)) ctx.Alias(x, fwd.Output("Out"));
  }
  return OkStatus();
}

}  // namespace

void RegisterElementwiseOps(OpRegistry& registry) {
  registry.Register(OpDef{
      .type = "bias_add",
      .summary = "Out = X + Bias, Bias broadcast over X's leading dims",
      .inputs = {{"X"}, {"Bias"}},
      .outputs = {{"Out"}},
      .attrs = SeqParallelAttrs(),
      .infer = InferBiasAdd,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 1); },
      .grad = BiasAddGrad,
  });
  registry.Register(OpDef{
      .type = "bias_add_grad",
      .summary = "Bias@GRAD = Out@GRAD summed over its leading dims",
      .inputs = {{GradVarName("Out")}},
      .outputs = {{GradVarName("Bias")}},
      .attrs = {RequiredAttr("bias_shape", AttrType::kInts), PartialGroupsAttr()},
      .infer = InferBiasAddGrad,
      .cost =
          [](const InferContext& ctx) {
            return OpCost{double(NumElements(ctx.Input(GradVarName("Out")).shape)), IoBytes(ctx)};
          },
  });
  registry.Register(OpDef{
      .type = "sum_row_partials",
      .summary = "Out = the rows of X (f32 partial sums, gathered from sequence shards) added in "
                 "row order, in Param's dtype and shape: a sharded parameter gradient's last step",
      .inputs = {{"X"}, {"Param"}},
      .outputs = {{"Out"}},
      .f32_inputs = {"X"},
      .infer = InferSumRowPartials,
      .cost =
          [](const InferContext& ctx) {
            return OpCost{double(NumElements(ctx.Input("X").shape)), IoBytes(ctx)};
          },
  });
  registry.Register(OpDef{
      .type = "add",
      .summary = "Out = X + Y (same shapes)",
      .inputs = {{"X"}, {"Y"}},
      .outputs = {{"Out"}},
      .infer = InferAdd,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 1); },
      .grad = AddGrad,
  });
  registry.Register(OpDef{
      .type = "gelu",
      .summary = "Out = X · Φ(X) (exact, erf form)",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .infer = InferUnary,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 8); },
      .grad = GeluGrad,
  });
  registry.Register(OpDef{
      .type = "gelu_grad",
      .summary = "X@GRAD = Out@GRAD · (Φ(X) + X·φ(X))",
      .inputs = {{"X"}, {GradVarName("Out")}},
      .outputs = {{GradVarName("X")}},
      .infer = InferGeluGrad,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 14, GradVarName("X")); },
  });
  registry.Register(OpDef{
      .type = "scale",
      .summary = "Out = scale · X + bias",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .attrs = {DefaultAttr("scale", 1.0), DefaultAttr("bias", 0.0)},
      .infer = InferUnary,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 2); },
      .grad = ScaleGrad,
  });
  registry.Register(OpDef{
      .type = "sum",
      .summary = "Out = X[0] + X[1] + ... in list order (gradient accumulation)",
      .inputs = {{"X", /*duplicable=*/true}},
      .outputs = {{"Out"}},
      .infer = InferSum,
      .cost =
          [](const InferContext& ctx) {
            double n = static_cast<double>(ctx.InputCount("X"));
            return ElementwiseCost(ctx, std::max(0.0, n - 1));
          },
      .grad = SumGrad,
  });
}

}  // namespace pw::ops
