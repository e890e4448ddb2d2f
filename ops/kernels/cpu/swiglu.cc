// swiglu kernels: element-wise, so ranges split among the kernel threads without
// changing a bit.

#include <vector>

#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cpu/parallel_for.h"
#include "ops/kernels/cpu/vector_math.h"

namespace pw::ops::cpu {
namespace {

Status Swiglu(KernelContext& ctx) {
  const float* gate = ctx.In("Gate")->f32();
  const float* up = ctx.In("Up")->f32();
  Tensor& out = *ctx.Out("Out");
  ParallelFor(out.numel(), kCostlyGrain,
              [&](int64_t b, int64_t e) { SwigluF32(gate + b, up + b, out.f32() + b, e - b); });
  return OkStatus();
}

// An absent output (its input needs no gradient) is computed into per-range scratch.
Status SwigluGrad(KernelContext& ctx) {
  const Tensor& gate = *ctx.In("Gate");
  const float* up = ctx.In("Up")->f32();
  const float* dout = ctx.In(GradVarName("Out"))->f32();
  Tensor* dgate = ctx.Out(GradVarName("Gate"));
  Tensor* dup = ctx.Out(GradVarName("Up"));
  if (!dgate && !dup) return OkStatus();
  ParallelFor(gate.numel(), kCostlyGrain, [&](int64_t b, int64_t e) {
    std::vector<float> scratch(dgate && dup ? 0 : e - b);
    float* dg = dgate ? dgate->f32() + b : scratch.data();
    float* du = dup ? dup->f32() + b : scratch.data();
    SwigluGradF32(gate.f32() + b, up + b, dout + b, dg, du, e - b);
  });
  return OkStatus();
}

}  // namespace

void RegisterSwigluKernels(KernelTable& table) {
  Add<Swiglu>(table, "swiglu");
  Add<SwigluGrad>(table, "swiglu_grad");
}

}  // namespace pw::ops::cpu
