// sgd and adam (host side). Adam's beta-power check runs on the device, where the
// powers live; a bad one fails the step when the stream is synchronized.

#include "ops/defs/defaults.h"
#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

// Loss scaling's flag on the device, or null.
const float* Skip(const KernelContext& ctx) {
  const Tensor* skip = ctx.In("SkipUpdate");
  return skip ? skip->f32() : nullptr;
}

Status Sgd(KernelContext& ctx) {
  Tensor& out = *ctx.Out("ParamOut");
  float lr = static_cast<float>(ctx.attrs().GetFloat("lr"));
  LaunchSgd(ctx.In("Param")->f32(), ctx.In("Grad")->f32(), out.f32(), out.numel(), lr, Skip(ctx),
            CurrentLaunch().stream);
  return OkStatus();
}

Status Adam(KernelContext& ctx) {
  const AttrList& a = ctx.attrs();
  AdamParams params{a.GetFloat("lr", kAdamLr), a.GetFloat("beta1", kAdamBeta1),
                    a.GetFloat("beta2", kAdamBeta2), a.GetFloat("epsilon", kAdamEpsilon)};
  const LaunchContext& launch = CurrentLaunch();
  const float* b1pow = ctx.In("Beta1Pow")->f32();
  const float* b2pow = ctx.In("Beta2Pow")->f32();
  LaunchAdam(ctx.In("Param")->f32(), ctx.In("Grad")->f32(), ctx.In("Moment1")->f32(),
             ctx.In("Moment2")->f32(), b1pow, b2pow, ctx.Out("ParamOut")->f32(),
             ctx.Out("Moment1Out")->f32(), ctx.Out("Moment2Out")->f32(),
             ctx.Out("ParamOut")->numel(), params, launch.error, launch.site, Skip(ctx),
             launch.stream);
  LaunchAdamPowers(b1pow, b2pow, ctx.Out("Beta1PowOut")->f32(), ctx.Out("Beta2PowOut")->f32(),
                   params, Skip(ctx), launch.stream);
  return OkStatus();
}

}  // namespace

void RegisterOptimizerKernels(KernelTable& table) {
  Add<Sgd>(table, "sgd");
  Add<Adam>(table, "adam");
}

}  // namespace pw::ops::cuda
