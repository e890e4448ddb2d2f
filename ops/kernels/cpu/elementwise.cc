// Element-wise kernels. Each output element is computed from the inputs at the same
// index only, so an output that shares storage with an input is safe.

#include <cmath>

#include "ops/kernels/cpu/cpu_kernels.h"

namespace pw::ops::cpu {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

Status BiasAdd(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const Tensor& bias = *ctx.In("Bias");
  Tensor& out = *ctx.Out("Out");
  int64_t d = bias.numel();
  int64_t rows = d == 0 ? 0 : x.numel() / d;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.f32() + r * d;
    float* o = out.f32() + r * d;
    for (int64_t j = 0; j < d; ++j) o[j] = xr[j] + bias.f32()[j];
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
    for (int64_t j = 0; j < d; ++j) db.f32()[j] += gr[j];
  }
  return OkStatus();
}

Status AddKernel(KernelContext& ctx) {
  const float* x = ctx.In("X")->f32();
  const float* y = ctx.In("Y")->f32();
  Tensor& out = *ctx.Out("Out");
  for (int64_t i = 0; i < out.numel(); ++i) out.f32()[i] = x[i] + y[i];
  return OkStatus();
}

Status Gelu(KernelContext& ctx) {
  const float* x = ctx.In("X")->f32();
  Tensor& out = *ctx.Out("Out");
  for (int64_t i = 0; i < out.numel(); ++i) {
    out.f32()[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
  }
  return OkStatus();
}

// d/dx [x·Φ(x)] = Φ(x) + x·φ(x).
Status GeluGrad(KernelContext& ctx) {
  const float* x = ctx.In("X")->f32();
  const float* g = ctx.In(GradVarName("Out"))->f32();
  Tensor& dx = *ctx.Out(GradVarName("X"));
  for (int64_t i = 0; i < dx.numel(); ++i) {
    float cdf = 0.5f * (1.0f + std::erf(x[i] * kInvSqrt2));
    float pdf = kInvSqrt2Pi * std::exp(-0.5f * x[i] * x[i]);
    dx.f32()[i] = g[i] * (cdf + x[i] * pdf);
  }
  return OkStatus();
}

Status Scale(KernelContext& ctx) {
  const float* x = ctx.In("X")->f32();
  Tensor& out = *ctx.Out("Out");
  float scale = static_cast<float>(ctx.attrs().GetFloat("scale", 1.0));
  float bias = static_cast<float>(ctx.attrs().GetFloat("bias", 0.0));
  for (int64_t i = 0; i < out.numel(); ++i) out.f32()[i] = scale * x[i] + bias;
  return OkStatus();
}

// Summands are added in list order per element, so Out may alias any of them.
Status Sum(KernelContext& ctx) {
  size_t n = ctx.InCount("X");
  std::vector<const float*> xs;
  for (size_t k = 0; k < n; ++k) xs.push_back(ctx.In("X", k)->f32());
  Tensor& out = *ctx.Out("Out");
  for (int64_t i = 0; i < out.numel(); ++i) {
    float acc = xs[0][i];
    for (size_t k = 1; k < n; ++k) acc += xs[k][i];
    out.f32()[i] = acc;
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
