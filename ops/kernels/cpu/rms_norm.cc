// rms_norm kernels. A row's sum of squares accumulates in double, in a fixed order; rows
// (and the scale gradient's columns) split among the kernel threads without changing a bit.

#include <algorithm>
#include <vector>

#include "ops/defs/defaults.h"
#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cpu/parallel_for.h"
#include "ops/kernels/cpu/row_group_sums.h"
#include "ops/kernels/cpu/vector_math.h"

namespace pw::ops::cpu {
namespace {

int64_t Rows(const Tensor& x) {
  const int64_t d = x.dim(-1);
  return d == 0 ? 0 : x.numel() / d;
}

Status RmsNorm(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const float* scale = ctx.In("Scale")->f32();
  float* y = ctx.Out("Y")->f32();
  float* rstd = ctx.Out("Rstd")->f32();
  const double eps = ctx.attrs().GetFloat("epsilon", kRmsNormEpsilon);
  const int64_t d = x.dim(-1);
  ParallelFor(Rows(x), RowGrain(d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      RmsNormRowF32(x.f32() + r * d, scale, eps, y + r * d, rstd + r, d);
  });
  return OkStatus();
}

Status RmsNormGrad(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const float* scale = ctx.In("Scale")->f32();
  const float* rstd = ctx.In("Rstd")->f32();
  const float* dy = ctx.In(GradVarName("Y"))->f32();
  float* dx = ctx.Out(GradVarName("X"))->f32();
  const int64_t d = x.dim(-1);
  ParallelFor(Rows(x), RowGrain(d), [&](int64_t begin, int64_t end) {
    std::vector<float> xhat(d), g(d);
    for (int64_t r = begin; r < end; ++r)
      RmsNormGradRowF32(x.f32() + r * d, dy + r * d, scale, rstd[r], xhat.data(), g.data(),
                        dx + r * d, d);
  });
  return OkStatus();
}

// Scale@GRAD[j] = sum over rows, in row order, of dy·x·rstd; columns split among threads.
// Rows summed in row groups (ops/defs/row_groups.h); with `partial_groups`, each group's
// partial sum is the output.
Status RmsNormParamGrad(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const float* rstd = ctx.In("Rstd")->f32();
  const float* dy = ctx.In(GradVarName("Y"))->f32();
  float* ds = ctx.Out(GradVarName("Scale"))->f32();
  const int64_t d = x.dim(-1);
  GroupedColumnSums(
      GroupRowsFor(Shape(x.shape().begin(), x.shape().end() - 1), ctx.attrs()), d,
      [&](int64_t r, int64_t b, int64_t e, float* acc) {
        AddScaledDeviationF32(dy + r * d + b, x.f32() + r * d + b, 0.f, rstd[r], acc, e - b);
      },
      ds);
  return OkStatus();
}

}  // namespace

void RegisterRmsNormKernels(KernelTable& table) {
  Add<RmsNorm>(table, "rms_norm");
  Add<RmsNormGrad>(table, "rms_norm_grad");
  Add<RmsNormParamGrad>(table, "rms_norm_param_grad");
}

}  // namespace pw::ops::cpu
