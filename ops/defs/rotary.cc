// rotary_embedding: rotary position embeddings (RoPE) on queries or keys laid out as
// [B, S, heads · head_dim]. In every head, the pair (i, i + head_dim/2) of the token at
// position s turns by the angle s · theta^(-2i / head_dim) (the half-split pairing of
// Megatron and Hugging Face Llama). A rotation's transpose is its inverse, so the gradient
// is the same op turning the other way (inverse = true).

#include "ops/defs/def_util.h"
#include "ops/defs/defaults.h"
#include "ops/defs/register.h"

namespace pw::ops {
namespace {

Status InferRotary(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(DataType dtype, FloatDtype(ctx, "X"));
  PW_RETURN_IF_ERROR(CheckRank(ctx, "X", dtype, 3));
  const int64_t d = ctx.attrs().GetInt("head_dim");
  const int64_t width = ctx.Input("X").shape[2];
  if (d <= 0 || d % 2 != 0)
    return InvalidArgument(ctx.op().type, ": head_dim must be a positive even number, got ", d);
  if (width % d != 0)
    return InvalidArgument(Where(ctx, "X"), " ", ShapeToString(ctx.Input("X").shape),
                           ": last dim is not a multiple of head_dim ", d);
  if (!(ctx.attrs().GetFloat("theta", kRopeTheta) > 1))
    return InvalidArgument(ctx.op().type, ": theta must be > 1");
  ctx.SetOutput("Out", ctx.Input("X"));
  return OkStatus();
}

Status RotaryGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& x = fwd.Input("X");
  if (!ctx.NeedsGrad(x)) return OkStatus();
  Op& op = ctx.Emit("rotary_embedding");
  op.SetInput("X", {ctx.Grad(fwd.Output("Out"))}).SetOutput("Out", {ctx.Grad(x)});
  op.SetAttr("head_dim", fwd.attrs.GetInt("head_dim"));
  op.SetAttr("theta", fwd.attrs.GetFloat("theta", kRopeTheta));
  op.SetAttr("inverse", !fwd.attrs.GetBool("inverse", false));
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

}  // namespace

void RegisterRotaryOps(OpRegistry& registry) {
  registry.Register(OpDef{
      .type = "rotary_embedding",
      .summary = "rotates each head's pairs (i, i + head_dim/2) of X [B, S, heads · head_dim] "
                 "by s · theta^(-2i/head_dim) at position s (by minus that with inverse)",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .attrs = {RequiredAttr("head_dim", AttrType::kInt), DefaultAttr("theta", kRopeTheta),
                DefaultAttr("inverse", false)},
      .infer = InferRotary,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 3); },
      .grad = RotaryGrad,
  });
}

}  // namespace pw::ops
