// c_identity, c_allreduce_sum and c_allreduce_max. The communicator (NCCL in the executor)
// queues the reduction on the same launch stream (a bf16 or f16 sum natively); a null one
// is a group of one. A low-precision max runs widened.

#include "ops/kernels/cuda/cuda_kernels.h"

namespace pw::ops::cuda {
namespace {

Status CIdentity(KernelContext& ctx) { return CopyIfDistinct(*ctx.In("X"), *ctx.Out("Out")); }

Status CAllReduceSum(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  PW_RETURN_IF_ERROR(CopyIfDistinct(*ctx.In("X"), out));
  return AllReduceOverGroup(ctx, out);
}

Status CAllReduceMax(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  PW_RETURN_IF_ERROR(CopyIfDistinct(*ctx.In("X"), out));
  return AllReduceOverGroup(ctx, out, ReduceOp::kMax);
}

}  // namespace

void RegisterCollectiveKernels(KernelTable& table) {
  AddNative<CIdentity>(table, "c_identity");
  AddNative<CAllReduceSum>(table, "c_allreduce_sum");
  Add<CAllReduceMax>(table, "c_allreduce_max");
}

}  // namespace pw::ops::cuda
