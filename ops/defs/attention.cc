// Fused causal self-attention over a Megatron-layout QKV: column (head, {q,k,v}, d), so a
// contiguous column shard of the QKV weight holds whole heads.

#include "ops/defs/def_util.h"
#include "ops/defs/defaults.h"
#include "ops/defs/register.h"

namespace pw::ops {
namespace {

struct AttnDims {
  int64_t b, s, h, d;
};

// Validates QKV [B, S, 3·h·d] against num_heads.
StatusOr<AttnDims> CheckQkv(const InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "QKV"));
  PW_RETURN_IF_ERROR(CheckRank(ctx, "QKV", dtype, 3));
  const Shape& q = ctx.Input("QKV").shape;
  int64_t h = ctx.attrs().GetInt("num_heads");
  if (h <= 0) return InvalidArgument(ctx.op().type, ": num_heads must be > 0, got ", h);
  if (q[2] % (3 * h) != 0 || q[2] == 0) {
    return InvalidArgument(Where(ctx, "QKV"), " ", ShapeToString(q),
                           ": last dim must be a positive multiple of 3 · num_heads (", 3 * h, ")");
  }
  return AttnDims{q[0], q[1], h, q[2] / (3 * h)};
}

Shape ProbsShape(const AttnDims& a) { return {a.b, a.h, a.s, a.s}; }

Status InferAttention(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(AttnDims a, CheckQkv(ctx));
  const DataType dtype = ctx.Input("QKV").dtype;
  ctx.SetOutput("Out", {dtype, {a.b, a.s, a.h * a.d}});
  ctx.SetOutput("Probs", {dtype, ProbsShape(a)});
  return OkStatus();
}

// Two [S, d] x [d, S]-sized GEMMs per head forward, four backward, plus the softmax.
OpCost AttentionCost(const InferContext& ctx, double gemms) {
  OpCost cost;
  auto a = CheckQkv(ctx);
  if (a.ok()) {
    double bhss = double(a->b) * a->h * a->s * a->s;
    cost.flops = gemms * 2.0 * bhss * a->d + 5.0 * bhss;
  }
  cost.bytes = IoBytes(ctx);
  return cost;
}

Status AttentionGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& qkv = fwd.Input("QKV");
  if (!ctx.NeedsGrad(qkv)) return OkStatus();
  Op& op = ctx.Emit("attention_grad");
  op.SetInput("QKV", {qkv}).SetInput("Probs", {fwd.Output("Probs")});
  op.SetInput(GradVarName("Out"), {ctx.Grad(fwd.Output("Out"))});
  op.SetOutput(GradVarName("QKV"), {ctx.Grad(qkv)});
  op.SetAttr("num_heads", fwd.attrs.GetInt("num_heads"));
  op.SetAttr("causal", fwd.attrs.GetBool("causal", kAttentionCausal));
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

Status InferAttentionGrad(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(AttnDims a, CheckQkv(ctx));
  const DataType dtype = ctx.Input("QKV").dtype;
  PW_RETURN_IF_ERROR(CheckDtype(ctx, "Probs", dtype));
  if (ctx.Input("Probs").shape != ProbsShape(a)) {
    return Mismatch(ctx, "Probs", ctx.Input("Probs").shape, "QKV", ctx.Input("QKV").shape,
                    "Probs must be [B, num_heads, S, S]");
  }
  const std::string dout = GradVarName("Out");
  PW_RETURN_IF_ERROR(CheckDtype(ctx, dout, dtype));
  if (ctx.Input(dout).shape != Shape{a.b, a.s, a.h * a.d}) {
    return Mismatch(ctx, dout, ctx.Input(dout).shape, "QKV", ctx.Input("QKV").shape,
                    "Out@GRAD must be [B, S, num_heads · d]");
  }
  ctx.SetOutput(GradVarName("QKV"), ctx.Input("QKV"));
  return OkStatus();
}

}  // namespace

void RegisterAttentionOps(OpRegistry& registry) {
  std::vector<AttrDef> attrs = {RequiredAttr("num_heads", AttrType::kInt),
                                DefaultAttr("causal", kAttentionCausal)};
  registry.Register(OpDef{
      .type = "attention",
      .summary = "softmax(Q·K^T / sqrt(d), causal) · V per head; QKV [B, S, 3·h·d] in "
                 "(head, {q,k,v}, d) layout -> Out [B, S, h·d], Probs [B, h, S, S]",
      .inputs = {{"QKV"}},
      .outputs = {{"Out"}, {"Probs"}},
      .attrs = attrs,
      .infer = InferAttention,
      .cost = [](const InferContext& ctx) { return AttentionCost(ctx, 2); },
      .grad = AttentionGrad,
  });
  registry.Register(OpDef{
      .type = "attention_grad",
      .summary = "QKV@GRAD of attention from the saved Probs",
      .inputs = {{"QKV"}, {"Probs"}, {GradVarName("Out")}},
      .outputs = {{GradVarName("QKV")}},
      .attrs = attrs,
      .infer = InferAttentionGrad,
      .cost = [](const InferContext& ctx) { return AttentionCost(ctx, 4); },
  });
}

}  // namespace pw::ops
