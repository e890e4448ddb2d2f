// cast between f32, bf16 and f16: widening is exact, narrowing rounds to nearest even.

#include <vector>

#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/low_precision.h"

namespace pw::ops::cpu {
namespace {

Status Cast(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  Tensor& out = *ctx.Out("Out");
  if (x.dtype() == out.dtype()) {
    CopyIfDistinct(x, out);
  } else if (x.dtype() == DataType::kFloat32) {
    NarrowFromF32(out.dtype(), x.f32(), out.raw(), out.numel());
  } else if (out.dtype() == DataType::kFloat32) {
    WidenToF32(x.dtype(), x.raw(), out.f32(), out.numel());
  } else {  // bf16 <-> f16 through f32 (exact widening, one rounding)
    std::vector<float> wide(x.numel());
    WidenToF32(x.dtype(), x.raw(), wide.data(), x.numel());
    NarrowFromF32(out.dtype(), wide.data(), out.raw(), out.numel());
  }
  return OkStatus();
}

}  // namespace

void RegisterCastKernels(KernelTable& table) { AddNative<Cast>(table, "cast"); }

}  // namespace pw::ops::cpu
