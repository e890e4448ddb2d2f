// bias_gelu, bias_dropout_add and their grads on the CPU: row by row, X + Bias into a
// scratch row that stays in cache, then the unfused ops' own vector maps on it (GeluF32,
// the dropout map, AddF32), so every element gets the bits the unfused ops give it. The
// grads sum the bias gradient over the input gradient as bias_add_grad does (SumBiasGrad).

#include <algorithm>
#include <optional>
#include <vector>

#include "ops/dropout_args.h"
#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cpu/dropout_map.h"
#include "ops/kernels/cpu/parallel_for.h"
#include "ops/kernels/cpu/vector_math.h"

namespace pw::ops::cpu {
namespace {

// Rows of `x` against a bias of `d` elements.
int64_t RowsOf(const Tensor& x, int64_t d) { return d == 0 ? 0 : x.numel() / d; }

// Where a grad writes its input gradient: X@GRAD, or scratch when only the bias sum is wanted.
class GradTarget {
 public:
  GradTarget(Tensor* dx, int64_t n) : dx_(dx) {
    if (!dx_) scratch_.resize(n);
  }
  float* data() { return dx_ ? dx_->f32() : scratch_.data(); }

 private:
  Tensor* dx_;
  std::vector<float> scratch_;
};

Status BiasGelu(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const float* bias = ctx.In("Bias")->f32();
  float* out = ctx.Out("Out")->f32();
  const int64_t d = ctx.In("Bias")->numel();
  ParallelFor(RowsOf(x, d), RowGrain(d, kCostlyGrain), [&](int64_t begin, int64_t end) {
    std::vector<float> t(d);
    for (int64_t r = begin; r < end; ++r) {
      AddF32(x.f32() + r * d, bias, t.data(), d);
      GeluF32(t.data(), out + r * d, d);
    }
  });
  return OkStatus();
}

Status BiasGeluGrad(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const Tensor& bias = *ctx.In("Bias");
  const float* g = ctx.In(GradVarName("Out"))->f32();
  Tensor* dbias = ctx.Out(GradVarName("Bias"));
  GradTarget dx(ctx.Out(GradVarName("X")), x.numel());
  if (!ctx.Out(GradVarName("X")) && !dbias) return OkStatus();
  const int64_t d = bias.numel();
  ParallelFor(RowsOf(x, d), RowGrain(d, kCostlyGrain), [&](int64_t begin, int64_t end) {
    std::vector<float> t(d);
    for (int64_t r = begin; r < end; ++r) {
      AddF32(x.f32() + r * d, bias.f32(), t.data(), d);
      GeluGradF32(t.data(), g + r * d, dx.data() + r * d, d);
    }
  });
  if (dbias) SumBiasGrad(ctx, dx.data(), x.shape(), bias.shape(), *dbias);
  return OkStatus();
}

// The mask's arguments and the seed, or none when p is 0.
struct OptionalMask {
  std::optional<DropoutArgs> args;
  uint64_t seed = 0;
};
StatusOr<OptionalMask> MaskOf(const KernelContext& ctx, const Shape& shape) {
  OptionalMask mask;
  if (ctx.attrs().GetFloat("p") == 0.0) return mask;
  PW_ASSIGN_OR_RETURN(mask.args, DropoutArgsOf(ctx, shape));
  mask.seed = static_cast<uint64_t>(ctx.In("Seed")->i64()[0]);
  return mask;
}

Status BiasDropoutAdd(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const float* bias = ctx.In("Bias")->f32();
  const float* residual = ctx.In("Residual")->f32();
  float* out = ctx.Out("Out")->f32();
  const int64_t d = ctx.In("Bias")->numel();
  PW_ASSIGN_OR_RETURN(OptionalMask mask, MaskOf(ctx, x.shape()));
  ParallelFor(RowsOf(x, d), RowGrain(d, kCostlyGrain), [&](int64_t begin, int64_t end) {
    std::vector<float> t(d);
    for (int64_t r = begin; r < end; ++r) {
      AddF32(x.f32() + r * d, bias, t.data(), d);
      if (mask.args) DropoutMapF32(t.data(), t.data(), r * d, (r + 1) * d, mask.seed, *mask.args);
      AddF32(residual + r * d, t.data(), out + r * d, d);
    }
  });
  return OkStatus();
}

Status BiasDropoutAddGrad(KernelContext& ctx) {
  const Tensor& g = *ctx.In(GradVarName("Out"));
  Tensor* dbias = ctx.Out(GradVarName("Bias"));
  GradTarget dx(ctx.Out(GradVarName("X")), g.numel());
  if (!ctx.Out(GradVarName("X")) && !dbias) return OkStatus();
  PW_ASSIGN_OR_RETURN(OptionalMask mask, MaskOf(ctx, g.shape()));
  ParallelFor(g.numel(), kCostlyGrain, [&](int64_t b, int64_t e) {
    if (mask.args)
      DropoutMapF32(g.f32() + b, dx.data() + b, b, e, mask.seed, *mask.args);
    else
      std::copy(g.f32() + b, g.f32() + e, dx.data() + b);
  });
  if (dbias) SumBiasGrad(ctx, dx.data(), g.shape(), ctx.attrs().GetInts("bias_shape"), *dbias);
  return OkStatus();
}

}  // namespace

void RegisterBiasFusionKernels(KernelTable& table) {
  Add<BiasGelu>(table, "bias_gelu");
  Add<BiasGeluGrad>(table, "bias_gelu_grad");
  Add<BiasDropoutAdd>(table, "bias_dropout_add");
  Add<BiasDropoutAddGrad>(table, "bias_dropout_add_grad");
}

}  // namespace pw::ops::cpu
