// check_finite_and_unscale, update_loss_scaling and copy_unless (host side), in launches of up to
// kMaxUnscaleInputs gradients each.

#include <algorithm>

#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

Status CheckFiniteAndUnscale(KernelContext& ctx) {
  const cudaStream_t stream = CurrentLaunch().stream;
  const float* scale = ctx.In("Scale")->f32();
  float* found = ctx.Out("FoundInfinite")->f32();
  const size_t n = ctx.InCount("X");
  PW_ASSIGN_OR_RETURN(Scratch part, Scratch::Make(sizeof(float)));
  auto* part_found = static_cast<float*>(part.get());
  // The first launch writes the flag; later launches fold theirs in by a max.
  for (size_t begin = 0; begin < std::max<size_t>(n, 1); begin += kMaxUnscaleInputs) {
    UnscaleList list{};
    for (size_t k = begin; k < n && k < begin + kMaxUnscaleInputs; ++k) {
      list.xs[list.count] = ctx.In("X", k)->f32();
      list.outs[list.count] = ctx.Out("Out", k)->f32();
      list.sizes[list.count] = ctx.In("X", k)->numel();
      ++list.count;
    }
    LaunchCheckFiniteAndUnscale(list, scale, begin == 0 ? found : part_found, stream);
    if (begin > 0) LaunchMaxInto(found, part_found, stream);
  }
  return OkStatus();
}

Status UpdateLossScaling(KernelContext& ctx) {
  const AttrList& a = ctx.attrs();
  LaunchUpdateLossScaling(ctx.In("FoundInfinite")->f32(), ctx.In("LossScale")->f32(),
                          ctx.In("GoodSteps")->f32(), ctx.In("SkippedSteps")->f32(),
                          ctx.Out("LossScaleOut")->f32(), ctx.Out("GoodStepsOut")->f32(),
                          ctx.Out("SkippedStepsOut")->f32(), a.GetInt("growth_interval"),
                          static_cast<float>(a.GetFloat("growth_factor")),
                          static_cast<float>(a.GetFloat("backoff_factor")), CurrentLaunch().stream);
  return OkStatus();
}

Status CopyUnless(KernelContext& ctx) {
  for (size_t k = 0; k < ctx.InCount("X"); ++k) {
    const Tensor& x = *ctx.In("X", k);
    LaunchCopyUnless(x.raw(), ctx.Out("Out", k)->raw(), x.nbytes(), ctx.In("Skip")->f32(),
                     CurrentLaunch().stream);
  }
  return OkStatus();
}

}  // namespace

void RegisterLossScalingKernels(KernelTable& table) {
  Add<CheckFiniteAndUnscale>(table, "check_finite_and_unscale");
  Add<UpdateLossScaling>(table, "update_loss_scaling");
  AddNative<CopyUnless>(table, "copy_unless");  // bytes of any dtype
}

}  // namespace pw::ops::cuda
