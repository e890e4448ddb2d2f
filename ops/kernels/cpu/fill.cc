// fill_constant.

#include <algorithm>

#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/low_precision.h"

namespace pw::ops::cpu {
namespace {

Status FillConstant(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  double value = ctx.attrs().GetFloat("value", 0.0);
  if (out.dtype() == DataType::kInt64) {
    std::fill_n(out.i64(), out.numel(), static_cast<int64_t>(value));
  } else if (out.dtype() == DataType::kFloat32) {
    out.Fill(static_cast<float>(value));
  } else {
    const float v = static_cast<float>(value);
    uint16_t bits;
    NarrowFromF32(out.dtype(), &v, &bits, 1);
    std::fill_n(out.data<uint16_t>(), out.numel(), bits);
  }
  return OkStatus();
}

}  // namespace

void RegisterFillKernels(KernelTable& table) { AddNative<FillConstant>(table, "fill_constant"); }

}  // namespace pw::ops::cpu
