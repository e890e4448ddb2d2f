// Fused grouped-query attention: num_heads query heads share kv_heads key/value heads,
// query head i reading kv head i / (num_heads / kv_heads) (kv_heads = num_heads is plain
// multi-head attention, kv_heads = 1 multi-query). Q, K and V come from separate
// projections, each [B, S, heads · d] with head h in columns [h·d, (h+1)·d), so a
// contiguous column shard of a projection holds whole heads.

#include "ops/defs/def_util.h"
#include "ops/defs/defaults.h"
#include "ops/defs/register.h"

namespace pw::ops {
namespace {

struct GqaDims {
  int64_t b, s, h, g, d;
};

// Validates Q [B, S, h·d] and K, V [B, S, g·d] against num_heads = h and kv_heads = g.
StatusOr<GqaDims> CheckQkv(const InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "Q"));
  PW_RETURN_IF_ERROR(CheckRank(ctx, "Q", dtype, 3));
  PW_RETURN_IF_ERROR(CheckRank(ctx, "K", dtype, 3));
  PW_RETURN_IF_ERROR(CheckSameType(ctx, "K", "V"));
  const int64_t h = ctx.attrs().GetInt("num_heads");
  const int64_t g = ctx.attrs().GetInt("kv_heads");
  if (h <= 0 || g <= 0 || h % g != 0)
    return InvalidArgument(ctx.op().type, ": kv_heads ", g, " must divide num_heads ", h,
                           " (both > 0)");
  const Shape& q = ctx.Input("Q").shape;
  const Shape& k = ctx.Input("K").shape;
  if (q[2] == 0 || q[2] % h != 0)
    return InvalidArgument(Where(ctx, "Q"), " ", ShapeToString(q),
                           ": last dim must be a positive multiple of num_heads (", h, ")");
  const int64_t d = q[2] / h;
  if (k[0] != q[0] || k[1] != q[1] || k[2] != g * d)
    return Mismatch(ctx, "K", k, "Q", q, StrCat("K and V must be [B, S, kv_heads · ", d, "]"));
  return GqaDims{q[0], q[1], h, g, d};
}

Shape ProbsShape(const GqaDims& a) { return {a.b, a.h, a.s, a.s}; }

Status InferGqaAttention(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(GqaDims a, CheckQkv(ctx));
  const DataType dtype = ctx.Input("Q").dtype;
  ctx.SetOutput("Out", {dtype, {a.b, a.s, a.h * a.d}});
  ctx.SetOutput("Probs", {dtype, ProbsShape(a)});
  return OkStatus();
}

// As attention's: two [S, d] x [d, S]-sized GEMMs per query head forward, four backward,
// plus the softmax.
OpCost GqaCost(const InferContext& ctx, double gemms) {
  OpCost cost;
  auto a = CheckQkv(ctx);
  if (a.ok()) {
    const double bhss = double(a->b) * a->h * a->s * a->s;
    cost.flops = gemms * 2.0 * bhss * a->d + 5.0 * bhss;
  }
  cost.bytes = IoBytes(ctx);
  return cost;
}

Status GqaAttentionGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const char* slots[] = {"Q", "K", "V"};
  bool any = false;
  for (const char* slot : slots) any = any || ctx.NeedsGrad(fwd.Input(slot));
  if (!any) return OkStatus();
  Op& op = ctx.Emit("gqa_attention_grad");
  for (const char* slot : slots) op.SetInput(slot, {fwd.Input(slot)});
  op.SetInput("Probs", {fwd.Output("Probs")});
  op.SetInput(GradVarName("Out"), {ctx.Grad(fwd.Output("Out"))});
  for (const char* slot : slots)
    if (ctx.NeedsGrad(fwd.Input(slot)))
      op.SetOutput(GradVarName(slot), {ctx.Grad(fwd.Input(slot))});
  op.SetAttr("num_heads", fwd.attrs.GetInt("num_heads"));
  op.SetAttr("kv_heads", fwd.attrs.GetInt("kv_heads"));
  op.SetAttr("causal", fwd.attrs.GetBool("causal", kAttentionCausal));
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

Status InferGqaAttentionGrad(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(GqaDims a, CheckQkv(ctx));
  const DataType dtype = ctx.Input("Q").dtype;
  PW_RETURN_IF_ERROR(CheckDtype(ctx, "Probs", dtype));
  if (ctx.Input("Probs").shape != ProbsShape(a))
    return Mismatch(ctx, "Probs", ctx.Input("Probs").shape, "Q", ctx.Input("Q").shape,
                    "Probs must be [B, num_heads, S, S]");
  const std::string dout = GradVarName("Out");
  PW_RETURN_IF_ERROR(CheckDtype(ctx, dout, dtype));
  PW_RETURN_IF_ERROR(CheckSameType(ctx, dout, "Q"));
  for (const char* slot : {"Q", "K", "V"}) ctx.SetOutput(GradVarName(slot), ctx.Input(slot));
  return OkStatus();
}

}  // namespace

void RegisterGqaAttentionOps(OpRegistry& registry) {
  std::vector<AttrDef> attrs = {RequiredAttr("num_heads", AttrType::kInt),
                                RequiredAttr("kv_heads", AttrType::kInt),
                                DefaultAttr("causal", kAttentionCausal)};
  registry.Register(OpDef{
      .type = "gqa_attention",
      .summary = "softmax(Q·K^T / sqrt(d), causal) · V per query head, query head i on kv head "
                 "i / (num_heads / kv_heads); Q [B, S, num_heads·d], K and V "
                 "[B, S, kv_heads·d] -> Out [B, S, num_heads·d], Probs [B, num_heads, S, S]",
      .inputs = {{"Q"}, {"K"}, {"V"}},
      .outputs = {{"Out"}, {"Probs"}},
      .attrs = attrs,
      .infer = InferGqaAttention,
      .cost = [](const InferContext& ctx) { return GqaCost(ctx, 2); },
      .grad = GqaAttentionGrad,
  });
  registry.Register(OpDef{
      .type = "gqa_attention_grad",
      .summary = "Q@GRAD, K@GRAD and V@GRAD of gqa_attention from the saved Probs (a kv head's "
                 "gradients summed over its query heads in head order); each may be absent",
      .inputs = {{"Q"}, {"K"}, {"V"}, {"Probs"}, {GradVarName("Out")}},
      .outputs = {{GradVarName("Q"), false, /*optional=*/true},
                  {GradVarName("K"), false, /*optional=*/true},
                  {GradVarName("V"), false, /*optional=*/true}},
      .attrs = attrs,
      .infer = InferGqaAttentionGrad,
      .cost = [](const InferContext& ctx) { return GqaCost(ctx, 4); },
  });
}

}  // namespace pw::ops
