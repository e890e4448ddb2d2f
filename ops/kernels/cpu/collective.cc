// c_identity and c_allreduce_sum. A null communicator is a group of one.

#include <cstring>

#include "ops/defs/defaults.h"
#include "ops/kernels/cpu/cpu_kernels.h"

namespace pw::ops::cpu {
namespace {

void CopyIfDistinct(const Tensor& src, Tensor& dst) {
  if (!src.SharesStorage(dst)) std::memcpy(dst.raw(), src.raw(), src.nbytes());
}

Status CIdentity(KernelContext& ctx) {
  CopyIfDistinct(*ctx.In("X"), *ctx.Out("Out"));
  return OkStatus();
}

Status CAllReduceSum(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  CopyIfDistinct(*ctx.In("X"), out);
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

}  // namespace pw::ops::cpu
