// fill_constant (host side).

#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/launchers.h"
#include "ops/low_precision.h"

namespace pw::ops::cuda {
namespace {

// As on the CPU: i64 outputs get the value truncated, f32 its float, bf16 and f16 that
// float rounded to nearest even.
Status FillConstant(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  double value = ctx.attrs().GetFloat("value", 0.0);
  if (out.dtype() == DataType::kInt64) {
    LaunchFillI64(out.i64(), out.numel(), static_cast<int64_t>(value), CurrentLaunch().stream);
  } else if (out.dtype() == DataType::kFloat32) {
    LaunchFillF32(out.f32(), out.numel(), static_cast<float>(value), CurrentLaunch().stream);
  } else {
    const float v = static_cast<float>(value);
    uint16_t bits;
    NarrowFromF32(out.dtype(), &v, &bits, 1);
    LaunchFillU16(out.data<uint16_t>(), out.numel(), bits, CurrentLaunch().stream);
  }
  return OkStatus();
}

}  // namespace

void RegisterFillKernels(KernelTable& table) { AddNative<FillConstant>(table, "fill_constant"); }

}  // namespace pw::ops::cuda
