// check_finite_and_unscale and update_loss_scaling (ops/defs/loss_scaling.cc).

#include <cmath>

#include "ops/kernels/cpu/cpu_kernels.h"

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
  const bool found = ctx.In("FoundInfinite")->f32()[0] > 0;
  float scale = ctx.In("LossScale")->f32()[0];
  float good = ctx.In("GoodSteps")->f32()[0];
  float skipped = ctx.In("SkippedSteps")->f32()[0];
  if (found) {
    scale *= static_cast<float>(ctx.attrs().GetFloat("backoff_factor"));
    good = 0;
    skipped += 1;
  } else if (++good >= static_cast<float>(ctx.attrs().GetInt("growth_interval"))) {
    scale *= static_cast<float>(ctx.attrs().GetFloat("growth_factor"));
    good = 0;
  }
  ctx.Out("LossScaleOut")->f32()[0] = scale;
  ctx.Out("GoodStepsOut")->f32()[0] = good;
  ctx.Out("SkippedStepsOut")->f32()[0] = skipped;
  return OkStatus();
}

}  // namespace

void RegisterLossScalingKernels(KernelTable& table) {
  Add<CheckFiniteAndUnscale>(table, "check_finite_and_unscale");
  Add<UpdateLossScaling>(table, "update_loss_scaling");
}

}  // namespace pw::ops::cpu
