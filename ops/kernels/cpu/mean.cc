// mean and mean_grad. The sum runs in double, in index order.

#include "ops/kernels/cpu/cpu_kernels.h"

namespace pw::ops::cpu {
namespace {

Status Mean(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  double sum = 0;
  for (int64_t i = 0; i < x.numel(); ++i) sum += x.f32()[i];
  ctx.Out("Out")->f32()[0] = static_cast<float>(sum / x.numel());
  return OkStatus();
}

Status MeanGrad(KernelContext& ctx) {
  Tensor& dx = *ctx.Out(GradVarName("X"));
  dx.Fill(static_cast<float>(ctx.In(GradVarName("Out"))->f32()[0] / dx.numel()));
  return OkStatus();
}

}  // namespace

void RegisterMeanKernels(KernelTable& table) {
  Add<Mean>(table, "mean");
  Add<MeanGrad>(table, "mean_grad");
}

}  // namespace pw::ops::cpu
