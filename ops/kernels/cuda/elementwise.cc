// Element-wise kernels (host side): shapes as the CPU kernels read them.

#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {

void SumBiasGrad(const KernelContext& ctx, const float* g, const Shape& g_shape,
                 const Shape& bias_shape, Tensor& dbias) {
  const Shape rows(g_shape.begin(), g_shape.end() - bias_shape.size());
  LaunchColumnSum(g, dbias.f32(), GroupRowsFor(rows, ctx.attrs()), NumElements(bias_shape),
                  CurrentLaunch().stream);
}

namespace {

cudaStream_t Stream() { return CurrentLaunch().stream; }

Status BiasAdd(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const Tensor& bias = *ctx.In("Bias");
  int64_t d = bias.numel();
  int64_t rows = d == 0 ? 0 : x.numel() / d;
  LaunchBiasAdd(x.f32(), bias.f32(), ctx.Out("Out")->f32(), rows, d, Stream());
  return OkStatus();
}

Status BiasAddGrad(KernelContext& ctx) {
  const Tensor& g = *ctx.In(GradVarName("Out"));
  SumBiasGrad(ctx, g.f32(), g.shape(), ctx.attrs().GetInts("bias_shape"),
              *ctx.Out(GradVarName("Bias")));
  return OkStatus();
}

// The gathered groups' partial sums added in row order (ops/defs/row_groups.h).
Status SumRowPartials(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  Tensor& out = *ctx.Out("Out");
  const int64_t d = out.numel();
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  LaunchColumnSum(x.f32(), out.f32(), {rows, 1, false}, d, Stream());
  return OkStatus();
}

Status AddKernel(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  LaunchAdd(ctx.In("X")->f32(), ctx.In("Y")->f32(), out.f32(), out.numel(), Stream());
  return OkStatus();
}

Status Gelu(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  LaunchGelu(ctx.In("X")->f32(), out.f32(), out.numel(), Stream());
  return OkStatus();
}

Status GeluGrad(KernelContext& ctx) {
  Tensor& dx = *ctx.Out(GradVarName("X"));
  LaunchGeluGrad(ctx.In("X")->f32(), ctx.In(GradVarName("Out"))->f32(), dx.f32(), dx.numel(),
                 Stream());
  return OkStatus();
}

Status Scale(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  float scale = static_cast<float>(ctx.attrs().GetFloat("scale", 1.0));
  float bias = static_cast<float>(ctx.attrs().GetFloat("bias", 0.0));
  LaunchScale(ctx.In("X")->f32(), out.f32(), out.numel(), scale, bias, Stream());
  return OkStatus();
}

// Out may alias any summand, as on the CPU. Up to kMaxSumInputs summands go in one
// pass; more are summed in passes into a scratch buffer (in list order still), which is
// copied to Out last.
Status Sum(KernelContext& ctx) {
  const int n = static_cast<int>(ctx.InCount("X"));
  Tensor& out = *ctx.Out("Out");
  if (n == 0 || out.numel() == 0) return OkStatus();
  auto chunk = [&](int begin) {
    SumInputs xs{};
    for (int k = begin; k < n && xs.count < kMaxSumInputs; ++k)
      xs.xs[xs.count++] = ctx.In("X", k)->f32();
    return xs;
  };
  if (n <= kMaxSumInputs) {
    LaunchSum(nullptr, chunk(0), out.f32(), out.numel(), Stream());
    return OkStatus();
  }
  PW_ASSIGN_OR_RETURN(Scratch acc_buffer, Scratch::Make(out.nbytes()));
  auto* acc = static_cast<float*>(acc_buffer.get());
  for (int begin = 0; begin < n; begin += kMaxSumInputs)
    LaunchSum(begin == 0 ? nullptr : acc, chunk(begin), acc, out.numel(), Stream());
  return CudaCheck(
      cudaMemcpyAsync(out.raw(), acc, out.nbytes(), cudaMemcpyDeviceToDevice, Stream()),
      "sum: copy of the result");
}

}  // namespace

void RegisterElementwiseKernels(KernelTable& table) {
  Add<BiasAdd>(table, "bias_add");
  Add<BiasAddGrad>(table, "bias_add_grad");
  Add<SumRowPartials>(table, "sum_row_partials");
  Add<AddKernel>(table, "add");
  Add<Gelu>(table, "gelu");
  Add<GeluGrad>(table, "gelu_grad");
  Add<Scale>(table, "scale");
  Add<Sum>(table, "sum");
}

}  // namespace pw::ops::cuda
