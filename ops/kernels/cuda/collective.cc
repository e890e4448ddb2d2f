// c_identity and c_allreduce_sum. The communicator (NCCL in the executor) queues the
// reduction on the same launch stream; a null one is a group of one.

#include "ops/defs/defaults.h"
#include "ops/kernels/cuda/cuda_kernels.h"

namespace pw::ops::cuda {
namespace {

Status CIdentity(KernelContext& ctx) { return CopyIfDistinct(*ctx.In("X"), *ctx.Out("Out")); }

Status CAllReduceSum(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  PW_RETURN_IF_ERROR(CopyIfDistinct(*ctx.In("X"), out));
  if (!ctx.comm) return OkStatus();
  std::string group = ctx.attrs().GetString("group", kDefaultGroup);
  Status s = ctx.comm->AllReduceSum(group, out.f32(), out.numel());
  return s.ok() ? s : s.WithContext(StrCat("c_allreduce_sum over group '", group, "'"));
}

}  // namespace

void RegisterCollectiveKernels(KernelTable& table) {
  Add<CIdentity>(table, "c_identity");
  Add<CAllReduceSum>(table, "c_allreduce_sum");
}

}  // namespace pw::ops::cuda
