// rms_norm kernels (host side).

#include "ops/defs/defaults.h"
#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

int64_t Rows(const Tensor& x) {
  const int64_t d = x.dim(-1);
  return d == 0 ? 0 : x.numel() / d;
}

Status RmsNorm(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  LaunchRmsNorm(x.f32(), ctx.In("Scale")->f32(), ctx.Out("Y")->f32(), ctx.Out("Rstd")->f32(),
                Rows(x), x.dim(-1), ctx.attrs().GetFloat("epsilon", kRmsNormEpsilon),
                CurrentLaunch().stream);
  return OkStatus();
}

Status RmsNormGrad(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  LaunchRmsNormGrad(x.f32(), ctx.In("Scale")->f32(), ctx.In("Rstd")->f32(),
                    ctx.In(GradVarName("Y"))->f32(), ctx.Out(GradVarName("X"))->f32(), Rows(x),
                    x.dim(-1), CurrentLaunch().stream);
  return OkStatus();
}

Status RmsNormParamGrad(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  LaunchRmsNormParamGrad(x.f32(), ctx.In("Rstd")->f32(), ctx.In(GradVarName("Y"))->f32(),
                         ctx.Out(GradVarName("Scale"))->f32(),
                         GroupRowsFor(Shape(x.shape().begin(), x.shape().end() - 1), ctx.attrs()),
                         x.dim(-1), CurrentLaunch().stream);
  return OkStatus();
}

}  // namespace

void RegisterRmsNormKernels(KernelTable& table) {
  Add<RmsNorm>(table, "rms_norm");
  Add<RmsNormGrad>(table, "rms_norm_grad");
  Add<RmsNormParamGrad>(table, "rms_norm_param_grad");
}

}  // namespace pw::ops::cuda
