// Megatron's fused bias epilogues: a linear layer's bias added in the same pass over memory
// as what follows it, instead of an op of its own whose output goes through memory.
//
//   bias_gelu(X, Bias)                        = gelu(X + Bias)          (after fc1)
//   bias_dropout_add(X, Bias, Residual, Seed) = Residual + dropout(X + Bias)
//                                               (after the attention projection and fc2)
//
// Each computes X + Bias in f32 and goes on from that value exactly as the unfused ops do
// from their stored f32 sum, so in f32 a model built with them trains bit for bit as one
// built from bias_add, gelu, dropout and add. Their grads sum the bias gradient over the
// rows of the input gradient they compute, in the row groups bias_add_grad sums in
// (ops/defs/row_groups.h): the same bits again. bias_dropout_add runs on sequence shards
// (sequence parallelism); its bias gradient then takes the shards' partial sums as
// bias_add_grad's does.

#include "ops/defs/def_util.h"
#include "ops/defs/dropout_attrs.h"
#include "ops/defs/register.h"

namespace pw::ops {
namespace {

// A grad that writes the input gradient and sums the bias gradient over it reads it once
// more (the CUDA backend's column sum is a kernel of its own, as Megatron's is).
double ReadBackBytes(const InferContext& ctx) {
  const bool both =
      !ctx.op().Output(GradVarName("X")).empty() && !ctx.op().Output(GradVarName("Bias")).empty();
  return both ? BytesOf(ctx.Output(GradVarName("X"))) : 0.0;
}

// ---- bias_gelu ----

Status InferBiasGelu(InferContext& ctx) {
  PW_RETURN_IF_ERROR(CheckBias(ctx, "X", "Bias"));
  ctx.SetOutput("Out", ctx.Input("X"));
  return OkStatus();
}

Status BiasGeluGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& x = fwd.Input("X");
  const std::string& bias = fwd.Input("Bias");
  const bool dx = ctx.NeedsGrad(x), dbias = ctx.NeedsGrad(bias);
  if (!dx && !dbias) return OkStatus();
  Op& op = ctx.Emit("bias_gelu_grad");
  op.SetInput("X", {x}).SetInput("Bias", {bias});
  op.SetInput(GradVarName("Out"), {ctx.Grad(fwd.Output("Out"))});
  if (dx) op.SetOutput(GradVarName("X"), {ctx.Grad(x)});
  if (dbias) op.SetOutput(GradVarName("Bias"), {ctx.Grad(bias)});
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

Status InferBiasGeluGrad(InferContext& ctx) {
  PW_RETURN_IF_ERROR(CheckBias(ctx, "X", "Bias"));
  PW_RETURN_IF_ERROR(CheckSameType(ctx, "X", GradVarName("Out")));
  ctx.SetOutput(GradVarName("X"), ctx.Input("X"));
  ctx.SetOutput(GradVarName("Bias"), ctx.Input("Bias"));
  return OkStatus();
}

// ---- bias_dropout_add ----

Status InferBiasDropoutAdd(InferContext& ctx) {
  PW_RETURN_IF_ERROR(CheckDropout(ctx, "X", /*allow_zero=*/true));
  PW_RETURN_IF_ERROR(CheckBias(ctx, "X", "Bias"));
  PW_RETURN_IF_ERROR(CheckSameType(ctx, "X", "Residual"));
  ctx.SetOutput("Out", ctx.Input("X"));
  return OkStatus();
}

// Residual@GRAD is Out@GRAD; X@GRAD is Out@GRAD through the mask, and Bias@GRAD its sum
// over the rows. On a sequence shard the sum takes the shard's row groups' partial sums
// (gathered and added in row order); where the shard cuts a group, a second grad op masks
// the gathered whole sequence's Out@GRAD and sums that.
Status BiasDropoutAddGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& x = fwd.Input("X");
  const std::string& bias = fwd.Input("Bias");
  const std::string& residual = fwd.Input("Residual");
  const std::string dout = ctx.Grad(fwd.Output("Out"));
  if (ctx.NeedsGrad(residual)) ctx.Alias(residual, fwd.Output("Out"));
  const bool dx = ctx.NeedsGrad(x), dbias = ctx.NeedsGrad(bias);
  if (!dx && !dbias) return OkStatus();
  const Var* bias_var = ctx.FindVar(bias);
  if (!bias_var) return NotFound("bias_dropout_add grad: var '", bias, "' is not declared");
  const int64_t per_lead = dbias ? ShardPartialGroups(ctx, x) : 0;
  const bool gather_for_bias = dbias && per_lead == 0 && SeqParallel(fwd);
  auto emit = [&](const std::string& grad_out) -> Op& {
    Op& op = ctx.Emit("bias_dropout_add_grad");
    if (!fwd.Input("Seed").empty()) op.SetInput("Seed", {fwd.Input("Seed")});
    op.SetInput(GradVarName("Out"), {grad_out});
    CopyDropoutAttrs(fwd, op);
    op.SetAttr("bias_shape", bias_var->shape);
    return op;
  };
  if (dx || (dbias && !gather_for_bias)) {
    Op& op = emit(dout);
    if (dx) op.SetOutput(GradVarName("X"), {ctx.Grad(x)});
    if (dbias && per_lead > 0) {
      const size_t index = ctx.emitted().size() - 1;
      EmitShardPartials(ctx, op, x, per_lead, {{GradVarName("Bias"), ctx.Grad(bias)}});
      // The partial sums are weight-gradient work; the input gradient beside them is not.
      if (dx) ctx.emitted()[index].weight_grad = false;
    } else {
      if (dbias && !gather_for_bias) op.SetOutput(GradVarName("Bias"), {ctx.Grad(bias)});
      MarkWeightGrad(ctx, op);
    }
  }
  if (gather_for_bias) {
    PW_ASSIGN_OR_RETURN(std::string whole, GatherSequence(ctx, dout, x));
    Op& op = emit(whole);
    op.SetAttr("shard_axis", int64_t{-1}).SetAttr("shard_count", int64_t{1});
    op.SetOutput(GradVarName("Bias"), {ctx.Grad(bias)});
    MarkWeightGrad(ctx, op);
  }
  return OkStatus();
}

Status InferBiasDropoutAddGrad(InferContext& ctx) {
  const std::string dout = GradVarName("Out");
  PW_RETURN_IF_ERROR(CheckDropout(ctx, dout, /*allow_zero=*/true));
  PW_ASSIGN_OR_RETURN(TensorType dbias, BiasGradType(ctx, dout));
  ctx.SetOutput(GradVarName("X"), ctx.Input(dout));
  ctx.SetOutput(GradVarName("Bias"), dbias);
  return OkStatus();
}

}  // namespace

void RegisterBiasFusionOps(OpRegistry& registry) {
  registry.Register(OpDef{
      .type = "bias_gelu",
      .summary = "Out = gelu(X + Bias), Bias broadcast over X's leading dims (one pass)",
      .inputs = {{"X"}, {"Bias"}},
      .outputs = {{"Out"}},
      .infer = InferBiasGelu,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 9); },
      .grad = BiasGeluGrad,
  });
  registry.Register(OpDef{
      .type = "bias_gelu_grad",
      .summary = "X@GRAD = Out@GRAD · gelu'(X + Bias), Bias@GRAD = X@GRAD summed over its "
                 "leading dims; either output may be absent",
      .inputs = {{"X"}, {"Bias"}, {GradVarName("Out")}},
      .outputs = {{GradVarName("X"), false, /*optional=*/true},
                  {GradVarName("Bias"), false, /*optional=*/true}},
      .infer = InferBiasGeluGrad,
      .cost =
          [](const InferContext& ctx) {
            const double n = static_cast<double>(NumElements(ctx.Input("X").shape));
            return OpCost{16.0 * n, IoBytes(ctx) + ReadBackBytes(ctx)};
          },
  });
  registry.Register(OpDef{
      .type = "bias_dropout_add",
      .summary = "Out = Residual + dropout(X + Bias), the dropout as dropout's (p may be 0, "
                 "then Seed may be absent)",
      .inputs = {{"X"}, {"Bias"}, {"Residual"}, {"Seed", false, /*optional=*/true}},
      .outputs = {{"Out"}},
      .attrs = WithSeqParallel(DropoutAttrs()),
      .infer = InferBiasDropoutAdd,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 4); },
      .grad = BiasDropoutAddGrad,
  });
  std::vector<AttrDef> grad_attrs = DropoutAttrs();
  grad_attrs.push_back(RequiredAttr("bias_shape", AttrType::kInts));
  grad_attrs.push_back(PartialGroupsAttr());
  registry.Register(OpDef{
      .type = "bias_dropout_add_grad",
      .summary = "X@GRAD = Out@GRAD through bias_dropout_add's mask (drawn again from Seed), "
                 "Bias@GRAD = X@GRAD summed over its leading dims; either output may be absent",
      .inputs = {{"Seed", false, /*optional=*/true}, {GradVarName("Out")}},
      .outputs = {{GradVarName("X"), false, /*optional=*/true},
                  {GradVarName("Bias"), false, /*optional=*/true}},
      .attrs = std::move(grad_attrs),
      .infer = InferBiasDropoutAddGrad,
      .cost =
          [](const InferContext& ctx) {
            const double n = static_cast<double>(NumElements(ctx.Input(GradVarName("Out")).shape));
            return OpCost{3.0 * n, IoBytes(ctx) + ReadBackBytes(ctx)};
          },
  });
}

}  // namespace pw::ops
