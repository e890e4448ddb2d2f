// rotary_embedding kernel (host side).

#include "ops/defs/defaults.h"
#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

Status Rotary(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  const int64_t width = x.dim(2);
  LaunchRotary(x.f32(), ctx.Out("Out")->f32(), width == 0 ? 0 : x.numel() / width, x.dim(1), width,
               ctx.attrs().GetInt("head_dim"), ctx.attrs().GetFloat("theta", kRopeTheta),
               ctx.attrs().GetBool("inverse", false), CurrentLaunch().stream);
  return OkStatus();
}

}  // namespace

void RegisterRotaryKernels(KernelTable& table) { Add<Rotary>(table, "rotary_embedding"); }

}  // namespace pw::ops::cuda
