// dropout and dropout_grad (host side): the CPU kernels' mask and arithmetic, on the device.

#include "ops/dropout_args.h"
#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/dropout_launch.h"

namespace pw::ops::cuda {
namespace {

Status RunDropout(KernelContext& ctx, const Tensor& in, Tensor& out) {
  PW_ASSIGN_OR_RETURN(DropoutArgs a, DropoutArgsOf(ctx, in.shape()));
  LaunchDropout(in.f32(), out.f32(), in.numel(), ctx.In("Seed")->i64(), a.salt, a.threshold,
                a.scale, a.layout, CurrentLaunch().stream);
  return OkStatus();
}

Status Dropout(KernelContext& ctx) { return RunDropout(ctx, *ctx.In("X"), *ctx.Out("Out")); }

Status DropoutGrad(KernelContext& ctx) {
  return RunDropout(ctx, *ctx.In(GradVarName("Out")), *ctx.Out(GradVarName("X")));
}

}  // namespace

void RegisterDropoutKernels(KernelTable& table) {
  Add<Dropout>(table, "dropout");
  Add<DropoutGrad>(table, "dropout_grad");
}

}  // namespace pw::ops::cuda
