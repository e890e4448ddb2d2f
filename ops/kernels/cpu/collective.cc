// c_identity and c_allreduce_sum. A null communicator is a group of one.

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

}  // namespace

void RegisterCollectiveKernels(KernelTable& table) {
  Add<CIdentity>(table, "c_identity");
  Add<CAllReduceSum>(table, "c_allreduce_sum");
}

}  // namespace pw::ops::cpu
