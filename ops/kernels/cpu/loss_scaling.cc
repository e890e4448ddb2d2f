// check_finite_and_unscale and update_loss_scaling (ops/defs/loss_scaling.cc).

#include <cmath>
#include <cstring>

#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/loss_scale_state.h"

namespace pw::ops::cpu {
namespace {

Status CheckFiniteAndUnscale(KernelContext& ctx) {
  const float inv = 1.0f / ctx.In("Scale")->f32()[0];
  bool found = false;
  for (size_t k = 0; k < ctx.InCount("X"); ++k) {
    const Tensor& x = *ctx.In("X", k);
    Tensor& out = *ctx.Out("Out", k);
    for (int64_t i = 0; i < x.numel(); ++i) {
      found = found || !std::isfinite(x.f32()[i]);
      out.f32()[i] = x.f32()[i] * inv;
    }
  }
  ctx.Out("FoundInfinite")->f32()[0] = found ? 1.f : 0.f;
  return OkStatus();
}

Status UpdateLossScaling(KernelContext& ctx) {
  LossScaleState s{ctx.In("LossScale")->f32()[0], ctx.In("GoodSteps")->f32()[0],
                   ctx.In("SkippedSteps")->f32()[0]};
  s.Update(ctx.In("FoundInfinite")->f32()[0] > 0, LossScaleRule::Of(ctx.attrs()));
  ctx.Out("LossScaleOut")->f32()[0] = s.scale;
  ctx.Out("GoodStepsOut")->f32()[0] = s.good_steps;
  ctx.Out("SkippedStepsOut")->f32()[0] = s.skipped_steps;
  return OkStatus();
}

Status CopyUnless(KernelContext& ctx) {
  if (ctx.In("Skip")->f32()[0] > 0) return OkStatus();
  for (size_t k = 0; k < ctx.InCount("X"); ++k) {
    const Tensor& x = *ctx.In("X", k);
    std::memcpy(ctx.Out("Out", k)->raw(), x.raw(), static_cast<size_t>(x.nbytes()));
  }
  return OkStatus();
}

}  // namespace

void RegisterLossScalingKernels(KernelTable& table) {
  Add<CheckFiniteAndUnscale>(table, "check_finite_and_unscale");
  Add<UpdateLossScaling>(table, "update_loss_scaling");
  AddNative<CopyUnless>(table, "copy_unless");  // bytes of any dtype
}

}  // namespace pw::ops::cpu
