// cast: a floating tensor converted to another floating dtype (rounding to nearest even
// when it narrows). The amp pass inserts it between f32 and the low dtype.

#include "ops/defs/def_util.h"
#include "ops/defs/register.h"

namespace pw::ops {
namespace {

StatusOr<DataType> TargetDtype(const InferContext& ctx) {
  std::string name = ctx.attrs().GetString("dtype");
  DataType dtype;
  if (!ParseDataType(name, &dtype) || !IsFloatingType(dtype))
    return InvalidArgument(ctx.op().type, ": dtype '", name, "' is not f32, bf16 or f16");
  return dtype;
}

Status InferCast(InferContext& ctx) {
  PW_RETURN_IF_ERROR(FloatDtype(ctx, "X").status());
  PW_ASSIGN_OR_RETURN(DataType dtype, TargetDtype(ctx));
  ctx.SetOutput("Out", {dtype, ctx.Input("X").shape});
  return OkStatus();
}

// The gradient is cast back to X's dtype.
Status CastGrad(GradContext& ctx) {
  const Op& fwd = ctx.forward();
  const std::string& x = fwd.Input("X");
  if (!ctx.NeedsGrad(x)) return OkStatus();
  const Var* xv = ctx.FindVar(x);
  if (!xv) return NotFound("cast grad: var '", x, "' is not declared");
  Op& op = ctx.Emit("cast");
  op.SetInput("X", {ctx.Grad(fwd.Output("Out"))}).SetOutput("Out", {ctx.Grad(x)});
  op.SetAttr("dtype", std::string(DataTypeName(xv->dtype)));
  MarkWeightGrad(ctx, op);
  return OkStatus();
}

}  // namespace

void RegisterCastOps(OpRegistry& registry) {
  registry.Register(OpDef{
      .type = "cast",
      .summary = "Out = X converted to dtype (f32, bf16 or f16), rounded to nearest even",
      .inputs = {{"X"}},
      .outputs = {{"Out"}},
      .attrs = {RequiredAttr("dtype", AttrType::kString)},
      .amp = AmpPolicy::kAsIs,
      .infer = InferCast,
      .cost =
          [](const InferContext& ctx) {
            return OpCost{0, IoBytes(ctx)};
          },
      .grad = CastGrad,
  });
}

}  // namespace pw::ops
