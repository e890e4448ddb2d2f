// layer_norm kernels. Row statistics accumulate in double, in a fixed order; rows (and the
// parameter gradients' columns) split among the kernel threads without changing a bit.

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/defs/defaults.h"
#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cpu/parallel_for.h"
#include "ops/kernels/cpu/row_group_sums.h"
#include "ops/kernels/cpu/vector_math.h"

namespace pw::ops::cpu {
namespace {

Status LayerNorm(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const float* scale = ctx.In("Scale")->f32();
  const float* bias = ctx.In("Bias")->f32();
  Tensor& y = *ctx.Out("Y");
  float* mean = ctx.Out("Mean")->f32();
  float* rstd = ctx.Out("Rstd")->f32();
  double eps = ctx.attrs().GetFloat("epsilon", kLayerNormEpsilon);
  int64_t d = x.dim(-1);
  int64_t rows = d == 0 ? 0 : x.numel() / d;
  ParallelFor(rows, RowGrain(d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      LayerNormRowF32(x.f32() + r * d, scale, bias, eps, y.f32() + r * d, mean + r, rstd + r, d);
  });
  return OkStatus();
}

// dx = rstd · (g - mean(g) - x̂ · mean(g · x̂)), g = dy · scale.
Status LayerNormGrad(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const float* scale = ctx.In("Scale")->f32();
  const float* mean = ctx.In("Mean")->f32();
  const float* rstd = ctx.In("Rstd")->f32();
  const float* dy = ctx.In(GradVarName("Y"))->f32();
  Tensor& dx = *ctx.Out(GradVarName("X"));
  int64_t d = x.dim(-1);
  int64_t rows = d == 0 ? 0 : x.numel() / d;
  ParallelFor(rows, RowGrain(d), [&](int64_t begin, int64_t end) {
    std::vector<float> xhat(d), g(d);
    for (int64_t r = begin; r < end; ++r)
      LayerNormGradRowF32(x.f32() + r * d, dy + r * d, scale, mean[r], rstd[r], xhat.data(),
                          g.data(), dx.f32() + r * d, d);
  });
  return OkStatus();
}

// Either output may be absent (its parameter needs no gradient). Rows are summed in row
// groups (ops/defs/row_groups.h); with `partial_groups`, each group's partial sum is the
// output.
Status LayerNormParamGrad(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const float* mean = ctx.In("Mean")->f32();
  const float* rstd = ctx.In("Rstd")->f32();
  const float* dy = ctx.In(GradVarName("Y"))->f32();
  Tensor* dscale = ctx.Out(GradVarName("Scale"));
  Tensor* dbias = ctx.Out(GradVarName("Bias"));
  const int64_t d = x.dim(-1);
  const RowGroups groups = GroupRowsFor(Shape(x.shape().begin(), x.shape().end() - 1), ctx.attrs());
  auto sums = [&](Tensor* out, auto add_row) {
    if (out) GroupedColumnSums(groups, d, add_row, out->f32());
  };
  sums(dscale, [&](int64_t r, int64_t b, int64_t e, float* acc) {
    AddScaledDeviationF32(dy + r * d + b, x.f32() + r * d + b, mean[r], rstd[r], acc, e - b);
  });
  sums(dbias, [&](int64_t r, int64_t b, int64_t e, float* acc) {
    AddF32(acc, dy + r * d + b, acc, e - b);
  });
  return OkStatus();
}

}  // namespace

void RegisterNormKernels(KernelTable& table) {
  Add<LayerNorm>(table, "layer_norm");
  Add<LayerNormGrad>(table, "layer_norm_grad");
  Add<LayerNormParamGrad>(table, "layer_norm_param_grad");
}

}  // namespace pw::ops::cpu
