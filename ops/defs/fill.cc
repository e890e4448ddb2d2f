// fill_constant: a tensor of one value, e.g. zero gradients or the loss seed 1.0.

#include "ops/defs/def_util.h"
#include "ops/defs/register.h"

namespace pw::ops {
namespace {

Status InferFillConstant(InferContext& ctx) {
  Shape shape = ctx.attrs().GetInts("shape");
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument(ctx.op().type, ": bad shape ", ShapeToString(shape));
  }
  std::string name = ctx.attrs().GetString("dtype", "f32");
  DataType dtype;
  if (!ParseDataType(name, &dtype) || (!IsFloatingType(dtype) && dtype != DataType::kInt64)) {
    return InvalidArgument(ctx.op().type, ": dtype '", name, "' is not f32, bf16, f16 or i64");
  }
  ctx.SetOutput("Out", {dtype, shape});
  return OkStatus();
}

}  // namespace

void RegisterFillOps(OpRegistry& registry) {
  registry.Register(OpDef{
      .type = "fill_constant",
      .summary = "Out [shape] of dtype (f32, bf16, f16 or i64) filled with value",
      .outputs = {{"Out"}},
      .attrs = {RequiredAttr("shape", AttrType::kInts), DefaultAttr("dtype", std::string("f32")),
                DefaultAttr("value", 0.0)},
      .amp = AmpPolicy::kAsIs,
      .infer = InferFillConstant,
      .cost =
          [](const InferContext& ctx) {
            return OpCost{0, IoBytes(ctx)};
          },
  });
}

}  // namespace pw::ops
