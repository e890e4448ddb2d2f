// Dynamic loss scaling (fp16 training): check_finite_and_unscale divides the gradients by
// the loss scale and flags any inf or NaN among them; update_loss_scaling lowers the scale
// after an overflow and raises it after growth_interval good steps in a row. The optimizer
// ops skip the step (SkipUpdate > 0) when any rank found an overflow. copy_unless keeps the
// state an update is about to change, for post-validated loss scaling (passes/loss_scaling.h)
// to put back when the pipeline's flag, known only in the next step, says the step overflowed.

#include "ops/defs/def_util.h"
#include "ops/defs/register.h"

namespace pw::ops {
namespace {

Status CheckScalar(const InferContext& ctx, std::string_view slot) {
  return CheckOneElement(ctx, slot, DataType::kFloat32);
}

// Out[i] is X[i]'s type, for at least one X.
StatusOr<size_t> OneOutPerX(InferContext& ctx) {
  const size_t n = ctx.InputCount("X");
  if (n == 0) return InvalidArgument(ctx.op().type, ": X needs at least one var");
  const std::vector<std::string>* outs = ctx.op().FindOutput("Out");
  if (!outs || outs->size() != n)
    return InvalidArgument(ctx.op().type, ": Out needs one var per X var (", n, ")");
  for (size_t i = 0; i < n; ++i) ctx.SetOutput("Out", ctx.Input("X", i), i);
  return n;
}

Status InferCheckFiniteAndUnscale(InferContext& ctx) {
  PW_ASSIGN_OR_RETURN(const size_t n, OneOutPerX(ctx));
  for (size_t i = 0; i < n; ++i) {
    PW_RETURN_IF_ERROR(CheckDtype(ctx, "X", DataType::kFloat32, i));
  }
  PW_RETURN_IF_ERROR(CheckScalar(ctx, "Scale"));
  ctx.SetOutput("FoundInfinite", {DataType::kFloat32, {}});
  return OkStatus();
}

Status InferUpdateLossScaling(InferContext& ctx) {
  for (const char* slot : {"FoundInfinite", "LossScale", "GoodSteps", "SkippedSteps"})
    PW_RETURN_IF_ERROR(CheckScalar(ctx, slot));
  if (ctx.attrs().GetInt("growth_interval") < 1)
    return InvalidArgument(ctx.op().type, ": growth_interval must be >= 1");
  if (!(ctx.attrs().GetFloat("growth_factor") > 1) ||
      !(ctx.attrs().GetFloat("backoff_factor") > 0 && ctx.attrs().GetFloat("backoff_factor") < 1))
    return InvalidArgument(ctx.op().type,
                           ": growth_factor must be > 1 and backoff_factor in (0, 1)");
  ctx.SetOutput("LossScaleOut", ctx.Input("LossScale"));
  ctx.SetOutput("GoodStepsOut", ctx.Input("GoodSteps"));
  ctx.SetOutput("SkippedStepsOut", ctx.Input("SkippedSteps"));
  return OkStatus();
}

Status InferCopyUnless(InferContext& ctx) {
  PW_RETURN_IF_ERROR(OneOutPerX(ctx).status());
  return CheckScalar(ctx, "Skip");
}

}  // namespace

void RegisterLossScalingOps(OpRegistry& registry) {
  registry.Register(OpDef{
      .type = "check_finite_and_unscale",
      .summary = "Out[i] = X[i] / Scale; FoundInfinite [] = 1 when any X holds an inf or NaN, "
                 "else 0",
      .inputs = {{"X", /*duplicable=*/true}, {"Scale"}},
      .outputs = {{"Out", /*duplicable=*/true}, {"FoundInfinite"}},
      .amp = AmpPolicy::kAsIs,
      .infer = InferCheckFiniteAndUnscale,
      .cost =
          [](const InferContext& ctx) {
            double n = 0;
            for (size_t i = 0; i < ctx.InputCount("X"); ++i)
              n += double(NumElements(ctx.Input("X", i).shape));
            return OpCost{2 * n, IoBytes(ctx)};
          },
  });
  registry.Register(OpDef{
      .type = "update_loss_scaling",
      .summary = "after an overflow (FoundInfinite > 0): LossScale *= backoff_factor, "
                 "GoodSteps = 0, SkippedSteps += 1; else GoodSteps += 1 and, once it reaches "
                 "growth_interval, LossScale *= growth_factor and GoodSteps = 0",
      .inputs = {{"FoundInfinite"}, {"LossScale"}, {"GoodSteps"}, {"SkippedSteps"}},
      .outputs = {{"LossScaleOut"}, {"GoodStepsOut"}, {"SkippedStepsOut"}},
      .attrs = {DefaultAttr("growth_interval", int64_t{2000}), DefaultAttr("growth_factor", 2.0),
                DefaultAttr("backoff_factor", 0.5)},
      .inplace = {{"LossScaleOut", "LossScale"},
                  {"GoodStepsOut", "GoodSteps"},
                  {"SkippedStepsOut", "SkippedSteps"}},
      .amp = AmpPolicy::kAsIs,
      .infer = InferUpdateLossScaling,
      .cost =
          [](const InferContext& ctx) {
            return OpCost{4, IoBytes(ctx)};
          },
  });
  registry.Register(OpDef{
      .type = "copy_unless",
      .summary = "Out[i] = X[i] for every i, unless Skip > 0: then every Out keeps its value "
                 "(a backup of the state an update changes, kept while a step that must be "
                 "undone is redone)",
      .inputs = {{"X", /*duplicable=*/true}, {"Skip"}},
      .outputs = {{"Out", /*duplicable=*/true}},
      .amp = AmpPolicy::kAsIs,
      .infer = InferCopyUnless,
      .cost =
          [](const InferContext& ctx) {
            return OpCost{0, IoBytes(ctx)};
          },
  });
}

}  // namespace pw::ops
