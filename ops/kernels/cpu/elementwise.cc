// Element-wise kernels. Each output element is computed from the inputs at the same
// index only, so an output that shares storage with an input is safe.

#include <algorithm>
#include <vector>

#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cpu/vector_math.h"

namespace pw::ops::cpu {
namespace {

Status BiasAdd(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const Tensor& bias = *ctx.In("Bias");
  Tensor& out = *ctx.Out("Out");
  int64_t d = bias.numel();
  int64_t rows = d == 0 ? 0 : x.numel() / d;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.f32() + r * d;
    float* o = out.f32() + r * d;
    AddF32(xr, bias.f32(), o, d);
  }
  return OkStatus();
}

// Rows are summed in order: deterministic.
Status BiasAddGrad(KernelContext& ctx) {
  const Tensor& g = *ctx.In(GradVarName("Out"));
  Tensor& db = *ctx.Out(GradVarName("Bias"));
  int64_t d = db.numel();
  int64_t rows = d == 0 ? 0 : g.numel() / d;
  db.Fill(0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* gr = g.f32() + r * d;
    AddF32(db.f32(), gr, db.f32(), d);
  }
  return OkStatus();
}

Status AddKernel(KernelContext& ctx) {
  const float* x = ctx.In("X")->f32();
  const float* y = ctx.In("Y")->f32();
  Tensor& out = *ctx.Out("Out");
  AddF32(x, y, out.f32(), out.numel());
  return OkStatus();
}

Status Gelu(KernelContext& ctx) {
  const float* x = ctx.In("X")->f32();
  Tensor& out = *ctx.Out("Out");
  GeluF32(x, out.f32(), out.numel());
  return OkStatus();
}

// d/dx [x·Φ(x)] = Φ(x) + x·φ(x).
Status GeluGrad(KernelContext& ctx) {
  const float* x = ctx.In("X")->f32();
  const float* g = ctx.In(GradVarName("Out"))->f32();
  Tensor& dx = *ctx.Out(GradVarName("X"));
  GeluGradF32(x, g, dx.f32(), dx.numel());
  return OkStatus();
}

Status Scale(KernelContext& ctx) {
  const float* x = ctx.In("X")->f32();
  Tensor& out = *ctx.Out("Out");
  float scale = static_cast<float>(ctx.attrs().GetFloat("scale", 1.0));
  float bias = static_cast<float>(ctx.attrs().GetFloat("bias", 0.0));
  ScaleF32(x, scale, bias, out.f32(), out.numel());
  return OkStatus();
}

// Summands are added in list order per element, so Out may alias any of them.
Status Sum(KernelContext& ctx) {
  size_t n = ctx.InCount("X");
  std::vector<const float*> xs;
  for (size_t k = 0; k < n; ++k) xs.push_back(ctx.In("X", k)->f32());
  Tensor& out = *ctx.Out("Out");
  // Blocks of a local sum, ((x0 + x1) + x2) + ..., copied to Out once every summand of the
  // block was read: Out may alias any summand.
  constexpr int64_t kBlock = 1024;
  float acc[kBlock];
  for (int64_t i = 0; i < out.numel(); i += kBlock) {
    const int64_t len = std::min(kBlock, out.numel() - i);
    std::copy_n(xs[0] + i, len, acc);
    for (size_t k = 1; k < n; ++k) AddF32(acc, xs[k] + i, acc, len);
    std::copy_n(acc, len, out.f32() + i);
  }
  return OkStatus();
}

}  // namespace

void RegisterElementwiseKernels(KernelTable& table) {
  Add<BiasAdd>(table, "bias_add");
  Add<BiasAddGrad>(table, "bias_add_grad");
  Add<AddKernel>(table, "add");
  Add<Gelu>(table, "gelu");
  Add<GeluGrad>(table, "gelu_grad");
  Add<Scale>(table, "scale");
  Add<Sum>(table, "sum");
}

}  // namespace pw::ops::cpu
