// Optimizer updates, all in place: each *Out slot names the same var as its input.

#include "ops/defs/def_util.h"
#include "ops/defs/defaults.h"
#include "ops/defs/register.h"

namespace pw::ops {
namespace {

Status CheckLike(const InferContext& ctx, std::string_view slot) {
  PW_RETURN_IF_ERROR(CheckDtype(ctx, slot, ctx.Input("Param").dtype));
  return CheckSameType(ctx, slot, "Param");
}

// SkipUpdate (optional): a scalar; when > 0 the op leaves its state as it is (a step
// skipped by loss scaling).
Status CheckSkip(const InferContext& ctx) {
  if (!ctx.HasInput("SkipUpdate")) return OkStatus();
  return CheckOneElement(ctx, "SkipUpdate", DataType::kFloat32);
}

Status InferSgd(InferContext& ctx) {
  PW_RETURN_IF_ERROR(FloatDtype(ctx, "Param").status());
  PW_RETURN_IF_ERROR(CheckSkip(ctx));
  PW_RETURN_IF_ERROR(CheckLike(ctx, "Grad"));
  ctx.SetOutput("ParamOut", ctx.Input("Param"));
  return OkStatus();
}

Status InferAdam(InferContext& ctx) {
  PW_RETURN_IF_ERROR(FloatDtype(ctx, "Param").status());
  PW_RETURN_IF_ERROR(CheckSkip(ctx));
  for (const char* slot : {"Grad", "Moment1", "Moment2"}) PW_RETURN_IF_ERROR(CheckLike(ctx, slot));
  for (const char* slot : {"Beta1Pow", "Beta2Pow"})
    PW_RETURN_IF_ERROR(CheckOneElement(ctx, slot, DataType::kFloat32));
  for (auto [name, fallback] : {std::pair{"beta1", kAdamBeta1}, std::pair{"beta2", kAdamBeta2}}) {
    double v = ctx.attrs().GetFloat(name, fallback);
    if (!(v >= 0 && v < 1)) {
      return InvalidArgument(ctx.op().type, ": ", name, " = ", v, " must be in [0, 1)");
    }
  }
  ctx.SetOutput("ParamOut", ctx.Input("Param"));
  ctx.SetOutput("Moment1Out", ctx.Input("Moment1"));
  ctx.SetOutput("Moment2Out", ctx.Input("Moment2"));
  ctx.SetOutput("Beta1PowOut", ctx.Input("Beta1Pow"));
  ctx.SetOutput("Beta2PowOut", ctx.Input("Beta2Pow"));
  return OkStatus();
}

}  // namespace

void RegisterOptimizerOps(OpRegistry& registry) {
  registry.Register(OpDef{
      .type = "sgd",
      .summary = "ParamOut = Param - lr · Grad (unchanged when SkipUpdate > 0)",
      .inputs = {{"Param"}, {"Grad"}, {"SkipUpdate", false, /*optional=*/true}},
      .outputs = {{"ParamOut"}},
      .attrs = {RequiredAttr("lr", AttrType::kFloat)},
      .inplace = {{"ParamOut", "Param"}},
      .amp = AmpPolicy::kF32,
      .infer = InferSgd,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 2, "ParamOut"); },
  });
  registry.Register(OpDef{
      .type = "adam",
      .summary = "Adam; Beta{1,2}Pow hold beta^t and are multiplied by beta after the update, "
                 "which uses lr · sqrt(1 - beta2^t) / (1 - beta1^t); nothing changes when "
                 "SkipUpdate > 0",
      .inputs = {{"Param"},
                 {"Grad"},
                 {"Moment1"},
                 {"Moment2"},
                 {"Beta1Pow"},
                 {"Beta2Pow"},
                 {"SkipUpdate", false, /*optional=*/true}},
      .outputs = {{"ParamOut"}, {"Moment1Out"}, {"Moment2Out"}, {"Beta1PowOut"}, {"Beta2PowOut"}},
      .attrs = {DefaultAttr("lr", kAdamLr), DefaultAttr("beta1", kAdamBeta1),
                DefaultAttr("beta2", kAdamBeta2), DefaultAttr("epsilon", kAdamEpsilon)},
      .inplace = {{"ParamOut", "Param"},
                  {"Moment1Out", "Moment1"},
                  {"Moment2Out", "Moment2"},
                  {"Beta1PowOut", "Beta1Pow"},
                  {"Beta2PowOut", "Beta2Pow"}},
      .amp = AmpPolicy::kF32,
      .infer = InferAdam,
      .cost = [](const InferContext& ctx) { return ElementwiseCost(ctx, 12, "ParamOut"); },
  });
}

}  // namespace pw::ops
