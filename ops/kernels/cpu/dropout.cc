// dropout and dropout_grad on the CPU: the same map applied to X (forward) or Out@GRAD
// (backward), each element's mask drawn from Philox by its global index
// (ops/dropout_mask.h). Any range split gives the same bits: the draw depends on the
// index only.

#include "ops/dropout_args.h"
#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cpu/dropout_map.h"
#include "ops/kernels/cpu/parallel_for.h"

namespace pw::ops::cpu {
namespace {

Status RunDropout(KernelContext& ctx, const Tensor& in, Tensor& out) {
  PW_ASSIGN_OR_RETURN(DropoutArgs args, DropoutArgsOf(ctx, in.shape()));
  const uint64_t seed = static_cast<uint64_t>(ctx.In("Seed")->i64()[0]);
  ParallelFor(in.numel(), kCostlyGrain, [&](int64_t b, int64_t e) {
    DropoutMapF32(in.f32() + b, out.f32() + b, b, e, seed, args);
  });
  return OkStatus();
}

Status Dropout(KernelContext& ctx) { return RunDropout(ctx, *ctx.In("X"), *ctx.Out("Out")); }

Status DropoutGrad(KernelContext& ctx) {
  return RunDropout(ctx, *ctx.In(GradVarName("Out")), *ctx.Out(GradVarName("X")));
}

}  // namespace

void RegisterDropoutKernels(KernelTable& table) {
  Add<Dropout>(table, "dropout");
  Add<DropoutGrad>(table, "dropout_grad");
}

}  // namespace pw::ops::cpu
