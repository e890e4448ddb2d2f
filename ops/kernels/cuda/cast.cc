// cast between f32, bf16 and f16 on the device (host side).

#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

Status Cast(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  Tensor& out = *ctx.Out("Out");
  const cudaStream_t stream = CurrentLaunch().stream;
  const bool x_bf16 = x.dtype() == DataType::kBFloat16;
  const bool out_bf16 = out.dtype() == DataType::kBFloat16;
  if (x.dtype() == out.dtype()) return CopyIfDistinct(x, out);
  if (x.dtype() == DataType::kFloat32) {
    LaunchNarrowFromF32(out_bf16, x.f32(), out.raw(), out.numel(), stream);
  } else if (out.dtype() == DataType::kFloat32) {
    LaunchWidenToF32(x_bf16, x.raw(), out.f32(), out.numel(), stream);
  } else {  // bf16 <-> f16 through f32 (exact widening, one rounding)
    PW_ASSIGN_OR_RETURN(Scratch wide, Scratch::Make(x.numel() * int64_t{sizeof(float)}));
    auto* f = static_cast<float*>(wide.get());
    LaunchWidenToF32(x_bf16, x.raw(), f, x.numel(), stream);
    LaunchNarrowFromF32(out_bf16, f, out.raw(), out.numel(), stream);
  }
  return OkStatus();
}

}  // namespace

void RegisterCastKernels(KernelTable& table) { AddNative<Cast>(table, "cast"); }

}  // namespace pw::ops::cuda
