// Element-wise kernels. Each output element is computed from the inputs at the same
// index only, so an output that shares storage with an input is safe, and the loops split
// into ranges on the kernel threads (parallel_for.h) without changing a bit.

#include <algorithm>
#include <vector>

#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cpu/parallel_for.h"
#include "ops/kernels/cpu/row_group_sums.h"
#include "ops/kernels/cpu/vector_math.h"

namespace pw::ops::cpu {

void SumBiasGrad(const KernelContext& ctx, const float* g, const Shape& g_shape,
                 const Shape& bias_shape, Tensor& dbias) {
  const Shape rows(g_shape.begin(), g_shape.end() - bias_shape.size());
  const int64_t d = NumElements(bias_shape);
  GroupedColumnSums(
      GroupRowsFor(rows, ctx.attrs()), d,
      [&](int64_t r, int64_t b, int64_t e, float* acc) { AddF32(acc, g + r * d + b, acc, e - b); },
      dbias.f32());
}

namespace {

Status BiasAdd(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const Tensor& bias = *ctx.In("Bias");
  Tensor& out = *ctx.Out("Out");
  int64_t d = bias.numel();
  int64_t rows = d == 0 ? 0 : x.numel() / d;
  ParallelFor(rows, RowGrain(d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) AddF32(x.f32() + r * d, bias.f32(), out.f32() + r * d, d);
  });
  return OkStatus();
}

// Rows summed in row groups (ops/defs/row_groups.h); with `partial_groups`, each group's
// partial sum is the output.
Status BiasAddGrad(KernelContext& ctx) {
  const Tensor& g = *ctx.In(GradVarName("Out"));
  SumBiasGrad(ctx, g.f32(), g.shape(), ctx.attrs().GetInts("bias_shape"),
              *ctx.Out(GradVarName("Bias")));
  return OkStatus();
}

// Out = the rows of X added in row order from zero: the last step of a sequence-sharded
// parameter gradient, whose rows are the gathered groups' partial sums.
Status SumRowPartials(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  Tensor& out = *ctx.Out("Out");
  const int64_t d = out.numel();
  const int64_t rows = d == 0 ? 0 : x.numel() / d;
  // Every row a group of its own: 0 + row 0 + row 1 + ..., as the groups' sums are added.
  GroupedColumnSums(
      RowGroups{rows, 1, false}, d,
      [&](int64_t r, int64_t b, int64_t e, float* acc) {
        AddF32(acc, x.f32() + r * d + b, acc, e - b);
      },
      out.f32());
  return OkStatus();
}

Status AddKernel(KernelContext& ctx) {
  const float* x = ctx.In("X")->f32();
  const float* y = ctx.In("Y")->f32();
  Tensor& out = *ctx.Out("Out");
  ParallelFor(out.numel(), kCheapGrain,
              [&](int64_t b, int64_t e) { AddF32(x + b, y + b, out.f32() + b, e - b); });
  return OkStatus();
}

Status Gelu(KernelContext& ctx) {
  const float* x = ctx.In("X")->f32();
  Tensor& out = *ctx.Out("Out");
  ParallelFor(out.numel(), kCostlyGrain,
              [&](int64_t b, int64_t e) { GeluF32(x + b, out.f32() + b, e - b); });
  return OkStatus();
}

// d/dx [x·Φ(x)] = Φ(x) + x·φ(x).
Status GeluGrad(KernelContext& ctx) {
  const float* x = ctx.In("X")->f32();
  const float* g = ctx.In(GradVarName("Out"))->f32();
  Tensor& dx = *ctx.Out(GradVarName("X"));
  ParallelFor(dx.numel(), kCostlyGrain,
              [&](int64_t b, int64_t e) { GeluGradF32(x + b, g + b, dx.f32() + b, e - b); });
  return OkStatus();
}

Status Scale(KernelContext& ctx) {
  const float* x = ctx.In("X")->f32();
  Tensor& out = *ctx.Out("Out");
  float scale = static_cast<float>(ctx.attrs().GetFloat("scale", 1.0));
  float bias = static_cast<float>(ctx.attrs().GetFloat("bias", 0.0));
  ParallelFor(out.numel(), kCheapGrain,
              [&](int64_t b, int64_t e) { ScaleF32(x + b, scale, bias, out.f32() + b, e - b); });
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
  ParallelFor(out.numel(), kCheapGrain, [&](int64_t begin, int64_t end) {
    float acc[kBlock];
    for (int64_t i = begin; i < end; i += kBlock) {
      const int64_t len = std::min(kBlock, end - i);
      std::copy_n(xs[0] + i, len, acc);
      for (size_t k = 1; k < n; ++k) AddF32(acc, xs[k] + i, acc, len);
      std::copy_n(acc, len, out.f32() + i);
    }
  });
  return OkStatus();
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

}  // namespace pw::ops::cpu
