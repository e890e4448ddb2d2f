// fill_constant.

#include <algorithm>

#include "ops/kernels/cpu/cpu_kernels.h"

namespace pw::ops::cpu {
namespace {

Status FillConstant(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  double value = ctx.attrs().GetFloat("value", 0.0);
  if (out.dtype() == DataType::kInt64) {
    std::fill_n(out.i64(), out.numel(), static_cast<int64_t>(value));
  } else {
    out.Fill(static_cast<float>(value));
  }
  return OkStatus();
}

}  // namespace

void RegisterFillKernels(KernelTable& table) { Add<FillConstant>(table, "fill_constant"); }

}  // namespace pw::ops::cpu
