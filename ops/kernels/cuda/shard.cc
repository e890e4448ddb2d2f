// c_split: this member's piece along the axis, one strided device copy on the launch stream.

#include "ops/kernels/cuda/cuda_kernels.h"

namespace pw::ops::cuda {
namespace {

Status CSplit(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  Tensor& out = *ctx.Out("Out");
  int64_t axis = ctx.attrs().GetInt("axis", 0);  // in range: the op's inference checked it
  if (axis < 0) axis += static_cast<int64_t>(x.shape().size());
  int64_t outer = 1;
  for (int i = 0; i < axis; ++i) outer *= x.shape()[i];
  if (outer == 0 || out.nbytes() == 0) return OkStatus();
  const size_t piece = static_cast<size_t>(out.nbytes() / outer);
  const size_t row = static_cast<size_t>(x.nbytes() / outer);
  const char* src = static_cast<const char*>(x.raw()) + ctx.GroupRank() * piece;
  return CudaCheck(cudaMemcpy2DAsync(out.raw(), piece, src, row, piece, static_cast<size_t>(outer),
                                     cudaMemcpyDeviceToDevice, CurrentLaunch().stream),
                   "c_split copy");
}

}  // namespace

void RegisterShardKernels(KernelTable& table) { AddNative<CSplit>(table, "c_split"); }

}  // namespace pw::ops::cuda
