// layer_norm kernels (host side).

#include "ops/defs/defaults.h"
#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

int64_t Rows(const Tensor& x) {
  int64_t d = x.dim(-1);
  return d == 0 ? 0 : x.numel() / d;
}

Status LayerNorm(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  double eps = ctx.attrs().GetFloat("epsilon", kLayerNormEpsilon);
  LaunchLayerNorm(x.f32(), ctx.In("Scale")->f32(), ctx.In("Bias")->f32(), ctx.Out("Y")->f32(),
                  ctx.Out("Mean")->f32(), ctx.Out("Rstd")->f32(), Rows(x), x.dim(-1), eps,
                  CurrentLaunch().stream);
  return OkStatus();
}

Status LayerNormGrad(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  LaunchLayerNormGrad(x.f32(), ctx.In("Scale")->f32(), ctx.In("Mean")->f32(), ctx.In("Rstd")->f32(),
                      ctx.In(GradVarName("Y"))->f32(), ctx.Out(GradVarName("X"))->f32(), Rows(x),
                      x.dim(-1), CurrentLaunch().stream);
  return OkStatus();
}

// Either output may be absent (its parameter needs no gradient).
Status LayerNormParamGrad(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  Tensor* dscale = ctx.Out(GradVarName("Scale"));
  Tensor* dbias = ctx.Out(GradVarName("Bias"));
  LaunchLayerNormParamGrad(x.f32(), ctx.In("Mean")->f32(), ctx.In("Rstd")->f32(),
                           ctx.In(GradVarName("Y"))->f32(), dscale ? dscale->f32() : nullptr,
                           dbias ? dbias->f32() : nullptr,
                           GroupRowsFor(Shape(x.shape().begin(), x.shape().end() - 1), ctx.attrs()),
                           x.dim(-1), CurrentLaunch().stream);
  return OkStatus();
}

}  // namespace

void RegisterNormKernels(KernelTable& table) {
  Add<LayerNorm>(table, "layer_norm");
  Add<LayerNormGrad>(table, "layer_norm_grad");
  Add<LayerNormParamGrad>(table, "layer_norm_param_grad");
}

}  // namespace pw::ops::cuda
