// bias_gelu, bias_dropout_add and their grads (host side): shapes as the CPU kernels read
// them. bias_dropout_add_grad is dropout's kernel on Out@GRAD; both grads then sum the bias
// gradient over the input gradient they wrote with bias_add_grad's column sum.

#include <optional>

#include "ops/dropout_args.h"
#include "ops/kernels/cuda/bias_fusions_launch.h"
#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/dropout_launch.h"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

cudaStream_t Stream() { return CurrentLaunch().stream; }

// Where a grad writes its input gradient: X@GRAD, or scratch when only the bias sum is wanted.
StatusOr<float*> GradTarget(KernelContext& ctx, int64_t n, std::optional<Scratch>& scratch) {
  if (Tensor* dx = ctx.Out(GradVarName("X"))) return dx->f32();
  PW_ASSIGN_OR_RETURN(Scratch s, Scratch::Make(n * static_cast<int64_t>(sizeof(float))));
  scratch.emplace(std::move(s));
  return static_cast<float*>(scratch->get());
}

Status BiasGelu(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  LaunchBiasGelu(x.f32(), ctx.In("Bias")->f32(), ctx.Out("Out")->f32(), x.numel(),
                 ctx.In("Bias")->numel(), Stream());
  return OkStatus();
}

Status BiasGeluGrad(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const Tensor& bias = *ctx.In("Bias");
  Tensor* dbias = ctx.Out(GradVarName("Bias"));
  if (!ctx.Out(GradVarName("X")) && !dbias) return OkStatus();
  std::optional<Scratch> scratch;
  PW_ASSIGN_OR_RETURN(float* dx, GradTarget(ctx, x.numel(), scratch));
  LaunchBiasGeluGrad(x.f32(), bias.f32(), ctx.In(GradVarName("Out"))->f32(), dx, x.numel(),
                     bias.numel(), Stream());
  if (dbias) SumBiasGrad(ctx, dx, x.shape(), bias.shape(), *dbias);
  return OkStatus();
}

StatusOr<DeviceMask> MaskOf(KernelContext& ctx, const Shape& shape) {
  DeviceMask mask;
  if (ctx.attrs().GetFloat("p") == 0.0) return mask;
  PW_ASSIGN_OR_RETURN(DropoutArgs a, DropoutArgsOf(ctx, shape));
  mask.seed = ctx.In("Seed")->i64();
  mask.salt = a.salt;
  mask.threshold = a.threshold;
  mask.scale = a.scale;
  mask.layout = a.layout;
  return mask;
}

Status BiasDropoutAdd(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  PW_ASSIGN_OR_RETURN(DeviceMask mask, MaskOf(ctx, x.shape()));
  LaunchBiasDropoutAdd(x.f32(), ctx.In("Bias")->f32(), ctx.In("Residual")->f32(),
                       ctx.Out("Out")->f32(), x.numel(), ctx.In("Bias")->numel(), mask, Stream());
  return OkStatus();
}

Status BiasDropoutAddGrad(KernelContext& ctx) {
  const Tensor& g = *ctx.In(GradVarName("Out"));
  Tensor* dbias = ctx.Out(GradVarName("Bias"));
  if (!ctx.Out(GradVarName("X")) && !dbias) return OkStatus();
  std::optional<Scratch> scratch;
  PW_ASSIGN_OR_RETURN(float* dx, GradTarget(ctx, g.numel(), scratch));
  PW_ASSIGN_OR_RETURN(DeviceMask m, MaskOf(ctx, g.shape()));
  if (m.seed) {
    LaunchDropout(g.f32(), dx, g.numel(), m.seed, m.salt, m.threshold, m.scale, m.layout, Stream());
  } else if (g.numel() > 0) {
    PW_RETURN_IF_ERROR(
        CudaCheck(cudaMemcpyAsync(dx, g.f32(), g.nbytes(), cudaMemcpyDeviceToDevice, Stream()),
                  "bias_dropout_add_grad: copy of Out@GRAD"));
  }
  if (dbias) SumBiasGrad(ctx, dx, g.shape(), ctx.attrs().GetInts("bias_shape"), *dbias);
  return OkStatus();
}

}  // namespace

void RegisterBiasFusionKernels(KernelTable& table) {
  Add<BiasGelu>(table, "bias_gelu");
  Add<BiasGeluGrad>(table, "bias_gelu_grad");
  Add<BiasDropoutAdd>(table, "bias_dropout_add");
  Add<BiasDropoutAddGrad>(table, "bias_dropout_add_grad");
}

}  // namespace pw::ops::cuda
