// swiglu kernels (host side).

#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

Status Swiglu(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  LaunchSwiglu(ctx.In("Gate")->f32(), ctx.In("Up")->f32(), out.f32(), out.numel(),
               CurrentLaunch().stream);
  return OkStatus();
}

// Either output may be absent (its input needs no gradient).
Status SwigluGrad(KernelContext& ctx) {
  const Tensor& gate = *ctx.In("Gate");
  Tensor* dgate = ctx.Out(GradVarName("Gate"));
  Tensor* dup = ctx.Out(GradVarName("Up"));
  LaunchSwigluGrad(gate.f32(), ctx.In("Up")->f32(), ctx.In(GradVarName("Out"))->f32(),
                   dgate ? dgate->f32() : nullptr, dup ? dup->f32() : nullptr, gate.numel(),
                   CurrentLaunch().stream);
  return OkStatus();
}

}  // namespace

void RegisterSwigluKernels(KernelTable& table) {
  Add<Swiglu>(table, "swiglu");
  Add<SwigluGrad>(table, "swiglu_grad");
}

}  // namespace pw::ops::cuda
