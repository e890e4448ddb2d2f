// mean and mean_grad (host side).

#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

Status Mean(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  LaunchMean(x.f32(), x.numel(), ctx.Out("Out")->f32(), CurrentLaunch().stream);
  return OkStatus();
}

Status MeanGrad(KernelContext& ctx) {
  Tensor& dx = *ctx.Out(GradVarName("X"));
  LaunchMeanGrad(ctx.In(GradVarName("Out"))->f32(), dx.f32(), dx.numel(), CurrentLaunch().stream);
  return OkStatus();
}

}  // namespace

void RegisterMeanKernels(KernelTable& table) {
  Add<Mean>(table, "mean");
  Add<MeanGrad>(table, "mean_grad");
}

}  // namespace pw::ops::cuda
