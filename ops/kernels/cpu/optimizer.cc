// sgd and adam. Each element of every output depends only on the inputs at the same
// index, so the in-place update (output tensor == input tensor) is safe and the kernel
// threads split the elements without changing a bit.

#include <cmath>

#include "ops/defs/defaults.h"
#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cpu/parallel_for.h"
#include "ops/kernels/cpu/vector_math.h"
#include "ops/registry.h"

namespace pw::ops::cpu {
namespace {

// A step skipped by loss scaling: every output keeps its input's values.
bool Skipped(KernelContext& ctx) {
  const Tensor* skip = ctx.In("SkipUpdate");
  if (!skip || !(skip->f32()[0] > 0)) return false;
  for (const auto& [out, in] : Registry().Find(ctx.op.type)->inplace)
    CopyIfDistinct(*ctx.In(in), *ctx.Out(out));
  return true;
}

Status Sgd(KernelContext& ctx) {
  if (Skipped(ctx)) return OkStatus();
  const float* p = ctx.In("Param")->f32();
  const float* g = ctx.In("Grad")->f32();
  Tensor& out = *ctx.Out("ParamOut");
  float lr = static_cast<float>(ctx.attrs().GetFloat("lr"));
  float* o = out.f32();
  ParallelFor(out.numel(), kCheapGrain, [&](int64_t begin, int64_t end) {
    SubScaledF32(p + begin, g + begin, lr, o + begin, end - begin);
  });
  return OkStatus();
}

// m1 = b1·m1 + (1-b1)·g; m2 = b2·m2 + (1-b2)·g²;
// p -= lr·sqrt(1-b2^t)/(1-b1^t) · m1 / (sqrt(m2) + eps·sqrt(1-b2^t)),
// which equals PyTorch's bias-corrected update exactly.
Status Adam(KernelContext& ctx) {
  if (Skipped(ctx)) return OkStatus();
  const AttrList& a = ctx.attrs();
  double lr = a.GetFloat("lr", kAdamLr);
  double beta1 = a.GetFloat("beta1", kAdamBeta1);
  double beta2 = a.GetFloat("beta2", kAdamBeta2);
  double eps = a.GetFloat("epsilon", kAdamEpsilon);
  // Read the step counters before any in-place write.
  double b1pow = ctx.In("Beta1Pow")->f32()[0];
  double b2pow = ctx.In("Beta2Pow")->f32()[0];
  if (!(b1pow < 1) || !(b2pow < 1)) {
    return InvalidArgument("adam: Beta1Pow ", b1pow, " and Beta2Pow ", b2pow,
                           " must be < 1 (initialise them to beta1 and beta2)");
  }
  float lr_t = static_cast<float>(lr * std::sqrt(1 - b2pow) / (1 - b1pow));
  float eps_t = static_cast<float>(eps * std::sqrt(1 - b2pow));
  const AdamStepF32 step{static_cast<float>(beta1), static_cast<float>(beta2), lr_t, eps_t};
  const float *p = ctx.In("Param")->f32(), *g = ctx.In("Grad")->f32();
  const float *m1 = ctx.In("Moment1")->f32(), *m2 = ctx.In("Moment2")->f32();
  float* p_out = ctx.Out("ParamOut")->f32();
  float *m1_out = ctx.Out("Moment1Out")->f32(), *m2_out = ctx.Out("Moment2Out")->f32();
  ParallelFor(ctx.Out("ParamOut")->numel(), kCheapGrain, [&](int64_t b, int64_t e) {
    AdamF32(step, p + b, g + b, m1 + b, m2 + b, p_out + b, m1_out + b, m2_out + b, e - b);
  });
  ctx.Out("Beta1PowOut")->f32()[0] = static_cast<float>(b1pow * beta1);
  ctx.Out("Beta2PowOut")->f32()[0] = static_cast<float>(b2pow * beta2);
  return OkStatus();
}

}  // namespace

void RegisterOptimizerKernels(KernelTable& table) {
  Add<Sgd>(table, "sgd");
  Add<Adam>(table, "adam");
}

}  // namespace pw::ops::cpu
