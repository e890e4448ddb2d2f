// c_identity, c_allreduce_sum and c_allreduce_max. A null communicator is a group of one.
// A low-precision sum goes to the communicator as it is (which sums in f32 and rounds
// once); a low-precision max runs widened.

#include "ops/kernels/cpu/cpu_kernels.h"

namespace pw::ops::cpu {
namespace {

Status CIdentity(KernelContext& ctx) {
  CopyIfDistinct(*ctx.In("X"), *ctx.Out("Out"));
  return OkStatus();
}

Status CAllReduceSum(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  CopyIfDistinct(*ctx.In("X"), out);
  return AllReduceOverGroup(ctx, out);
}

Status CAllReduceMax(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  CopyIfDistinct(*ctx.In("X"), out);
  return AllReduceOverGroup(ctx, out, ReduceOp::kMax);
}

}  // namespace

void RegisterCollectiveKernels(KernelTable& table) {
  AddNative<CIdentity>(table, "c_identity");
  AddNative<CAllReduceSum>(table, "c_allreduce_sum");
  Add<CAllReduceMax>(table, "c_allreduce_max");
}

}  // namespace pw::ops::cpu
