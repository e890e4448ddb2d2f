// dropout and its grad: inverted dropout (kept elements scaled by 1 / (1 - p)) whose mask is
// drawn from the micro-batch's Seed and each element's index in the unsharded tensor
// (ops/dropout_mask.h). The grad draws the same mask again from Seed instead of reading a
// stored one: no mask is held from forward to backward, and both directions move the bytes
// of an element-wise op (read one tensor, write one).

#include "ops/defs/def_util.h"
#include "ops/defs/dropout_attrs.h"
#include "ops/defs/register.h"

namespace pw::ops {

std::vector<AttrDef> DropoutAttrs() {
  return {RequiredAttr("p", AttrType::kFloat),
          // Tells one dropout site of a micro-batch from another.
          DefaultAttr("salt", int64_t{0}),
          // The tensor is this rank's slice `shard_count` of the whole along `shard_axis`
          // (heads sharded over mp, a sequence shard): the mask is the whole tensor's.
          DefaultAttr("shard_axis", int64_t{-1}), DefaultAttr("shard_count", int64_t{1}),
          DefaultAttr("group", std::string("mp")),
          // The tensor is row block `block` of `block_count` equal blocks of that slice along
          // the same axis (overlap-row-split's blocks): the mask is still the whole tensor's.
          DefaultAttr("block_count", int64_t{1}), DefaultAttr("block", int64_t{0})};
}

void CopyDropoutAttrs(const Op& from, Op& to) {
  for (const char* attr :
       {"p", "salt", "shard_axis", "shard_count", "group", "block_count", "block"})
    if (const Attribute* a = from.attrs.Find(attr)) to.attrs.Set(attr, *a);
}

Status CheckDropout(const InferContext& ctx, std::string_view slot, bool allow_zero) {
  const double p = ctx.attrs().GetFloat("p");
  if (allow_zero ? !(p >= 0.0 && p < 1.0) : !(p > 0.0 && p < 1.0))
    return InvalidArgument(ctx.op().type, ": p must be in ", allow_zero ? "[0, 1)" : "(0, 1)",
                           ", got ", p, allow_zero ? "" : " (for p = 0 leave the op out)");
  if (p > 0.0 || ctx.InputCount("Seed") > 0)
    PW_RETURN_IF_ERROR(CheckOneElement(ctx, "Seed", DataType::kInt64));
  PW_RETURN_IF_ERROR(FloatDtype(ctx, slot).status());
  const int64_t count = ctx.attrs().GetInt("shard_count", 1);
  const int64_t axis = ctx.attrs().GetInt("shard_axis", -1);
  const int rank = static_cast<int>(ctx.Input(slot).shape.size());
  const int64_t blocks = ctx.attrs().GetInt("block_count", 1);
  const int64_t block = ctx.attrs().GetInt("block", 0);
  if (count < 1) return InvalidArgument(ctx.op().type, ": shard_count must be >= 1, got ", count);
  if (blocks < 1 || block < 0 || block >= blocks)
    return InvalidArgument(ctx.op().type, ": block ", block, " of block_count ", blocks,
                           " is not a block (block_count >= 1, 0 <= block < block_count)");
  if ((count > 1 || blocks > 1) && (axis < 0 || axis >= rank))
    return InvalidArgument(ctx.op().type, ": shard_axis ", axis, " is not an axis of ",
                           WhereVar(ctx, slot), " ", ShapeToString(ctx.Input(slot).shape), " (",
                           count > 1 ? "shard_count " : "block_count ", count > 1 ? count : blocks,
                           " needs one)");
  return OkStatus();
}

namespace {

Status InferDropout(InferContext& ctx) {
  PW_RETURN_IF_ERROR(CheckDropout(ctx, "X"));
  ctx.SetOutput("Out", ctx.Input("X"));
  return OkStatus();
}

Status DropoutGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& x = fwd.Input("X");
  if (!ctx.NeedsGrad(x)) return OkStatus();
  Op& op = ctx.Emit("dropout_grad");
  op.SetInput("Seed", {fwd.Input("Seed")})
      .SetInput(GradVarName("Out"), {ctx.Grad(fwd.Output("Out"))});
  op.SetOutput(GradVarName("X"), {ctx.Grad(x)});
  CopyDropoutAttrs(fwd, op);
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

Status InferDropoutGrad(InferContext& ctx) {
  PW_RETURN_IF_ERROR(CheckDropout(ctx, GradVarName("Out")));
  ctx.SetOutput(GradVarName("X"), ctx.Input(GradVarName("Out")));
  return OkStatus();
}

}  // namespace

void RegisterDropoutOps(OpRegistry& registry) {
  registry.Register(OpDef{
      .type = "dropout",
      .summary = "Out = X · keep / (1 - p), keep a Philox draw of (Seed, salt, the element's "
                 "index in the unsharded tensor) >= p",
      .inputs = {{"X"}, {"Seed"}},
      .outputs = {{"Out"}},
      .attrs = DropoutAttrs(),
      .infer = InferDropout,
      // Bandwidth-bound: one Philox call per four elements and a multiply.
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 2); },
      .grad = DropoutGrad,
  });
  registry.Register(OpDef{
      .type = "dropout_grad",
      .summary = "X@GRAD = Out@GRAD · keep / (1 - p), the forward's mask drawn again from Seed",
      .inputs = {{"Seed"}, {GradVarName("Out")}},
      .outputs = {{GradVarName("X")}},
      .attrs = DropoutAttrs(),
      .infer = InferDropoutGrad,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 2, GradVarName("X")); },
  });
}

}  // namespace pw::ops
