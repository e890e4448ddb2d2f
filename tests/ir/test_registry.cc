#include "tests/ir/test_registry.h"

namespace pw::testing {

const OpRegistry& TestRegistry() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry;
    OpDef ew;
    ew.type = "ew";
    ew.inputs = {{"X"}, {"Y"}};
    ew.outputs = {{"Out"}};
    ew.attrs = {{"alpha", AttrType::kFloat, Attribute(1.0)}};
    ew.infer = [](InferContext& ctx) -> Status {
      if (ctx.Input("X").shape != ctx.Input("Y").shape)
        return InvalidArgument("X ", ShapeToString(ctx.Input("X").shape), " and Y ",
                               ShapeToString(ctx.Input("Y").shape), " differ");
      ctx.SetOutput("Out", ctx.Input("X"));
      return OkStatus();
    };
    r->Register(ew);
    OpDef unary;
    unary.type = "unary";
    unary.inputs = {{"X"}};
    unary.outputs = {{"Out"}};
    unary.infer = [](InferContext& ctx) {
      ctx.SetOutput("Out", ctx.Input("X"));
      return OkStatus();
    };
    r->Register(unary);
    OpDef gen;
    gen.type = "gen";
    gen.outputs = {{"Out"}};
    gen.attrs = {{"shape", AttrType::kInts, std::nullopt}};
    gen.infer = [](InferContext& ctx) {
      ctx.SetOutput("Out", TensorType{DataType::kFloat32, ctx.attrs().GetInts("shape")});
      return OkStatus();
    };
    r->Register(gen);
    OpDef update;
    update.type = "update";
    update.inputs = {{"P"}, {"G"}};
    update.outputs = {{"POut"}};
    update.inplace = {{"POut", "P"}};
    update.infer = [](InferContext& ctx) {
      ctx.SetOutput("POut", ctx.Input("P"));
      return OkStatus();
    };
    r->Register(update);
    return r;
  }();
  return *registry;
}

}  // namespace pw::testing
