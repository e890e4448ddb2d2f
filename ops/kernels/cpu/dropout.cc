// dropout and dropout_grad on the CPU: the same map applied to X (forward) or Out@GRAD
// (backward), each element's mask drawn from Philox by its global index
// (ops/dropout_mask.h). Any range split gives the same bits: the draw depends on the
// index only.

#include <algorithm>

#include "ops/dropout_args.h"
#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cpu/parallel_for.h"

namespace pw::ops::cpu {
namespace {

// out[l] = in[l] · scale where element l is kept, 0 where dropped, for local l in
// [begin, end): runs of consecutive global indices, one Philox call per four of them.
void ApplyMask(const float* in, float* out, int64_t begin, int64_t end, uint64_t seed,
               const DropoutArgs& a) {
  uint64_t group = ~uint64_t{0};
  PhiloxBlock block{};
  int64_t l = begin;
  while (l < end) {
    const int64_t row_end = std::min(end, (l / a.layout.inner + 1) * a.layout.inner);
    for (uint64_t g = static_cast<uint64_t>(a.layout.Global(l)); l < row_end; ++l, ++g) {
      if (g / 4 != group) {
        group = g / 4;
        block = DropoutBlock(seed, a.salt, group);
      }
      out[l] = block.w[g % 4] >= a.threshold ? in[l] * a.scale : 0.0f;
    }
  }
}

Status RunDropout(KernelContext& ctx, const Tensor& in, Tensor& out) {
  PW_ASSIGN_OR_RETURN(DropoutArgs args, DropoutArgsOf(ctx, in.shape()));
  const uint64_t seed = static_cast<uint64_t>(ctx.In("Seed")->i64()[0]);
  ParallelFor(in.numel(), kCostlyGrain,
              [&](int64_t b, int64_t e) { ApplyMask(in.f32(), out.f32(), b, e, seed, args); });
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
