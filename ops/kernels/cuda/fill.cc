// fill_constant (host side).

#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

// As on the CPU: i64 outputs get the value truncated, every other dtype f32 bits.
Status FillConstant(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  double value = ctx.attrs().GetFloat("value", 0.0);
  if (out.dtype() == DataType::kInt64) {
    LaunchFillI64(out.i64(), out.numel(), static_cast<int64_t>(value), CurrentLaunch().stream);
  } else {
    LaunchFillF32(out.f32(), out.numel(), static_cast<float>(value), CurrentLaunch().stream);
  }
  return OkStatus();
}

}  // namespace

void RegisterFillKernels(KernelTable& table) { Add<FillConstant>(table, "fill_constant"); }

}  // namespace pw::ops::cuda
