// Data movement: reshape, transpose, split, concat. Bytes are copied, so every dtype
// works; split and concat are 2-D strided copies (one row per outer index).

#include <vector>

#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/launchers.h"
#include "ops/layout_copies.h"

namespace pw::ops::cuda {
namespace {

Status Reshape(KernelContext& ctx) { return CopyIfDistinct(*ctx.In("X"), *ctx.Out("Out")); }

Status Transpose(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  Tensor& out = *ctx.Out("Out");
  if (x.SharesStorage(out)) return InvalidArgument("transpose: Out must not alias X");
  std::vector<int64_t> perm = ctx.attrs().GetInts("perm");
  int rank = x.rank();
  if (rank > kMaxTransposeRank)
    return Unimplemented("transpose: rank ", rank, " (the CUDA kernel takes up to ",
                         kMaxTransposeRank, ")");
  int64_t elem = DataTypeSize(x.dtype());
  if (elem != 2 && elem != 4 && elem != 8)
    return Unimplemented("transpose: dtype ", DataTypeName(x.dtype()));
  std::vector<int64_t> in_stride(rank, 1);
  for (int i = rank - 2; i >= 0; --i) in_stride[i] = in_stride[i + 1] * x.dim(i + 1);
  TransposeDims dims{};
  dims.rank = rank;
  for (int i = 0; i < rank; ++i) {
    dims.out_dims[i] = out.dim(i);
    dims.src_stride[i] = in_stride[perm[i]];
  }
  LaunchTranspose(x.raw(), out.raw(), out.numel(), dims, static_cast<int>(elem),
                  CurrentLaunch().stream);
  return OkStatus();
}

Status Copy(const std::vector<StridedCopy>& copies, const char* what) {
  for (const StridedCopy& c : copies) {
    if (c.width == 0 || c.rows == 0) continue;
    PW_RETURN_IF_ERROR(
        CudaCheck(cudaMemcpy2DAsync(c.dst, c.dst_pitch, c.src, c.src_pitch, c.width, c.rows,
                                    cudaMemcpyDeviceToDevice, CurrentLaunch().stream),
                  what));
  }
  return OkStatus();
}

Status Split(KernelContext& ctx) { return Copy(SplitCopies(ctx), "split"); }

Status Concat(KernelContext& ctx) {
  PW_ASSIGN_OR_RETURN(std::vector<StridedCopy> copies, ConcatCopies(ctx));
  return Copy(copies, "concat");
}

}  // namespace

void RegisterLayoutKernels(KernelTable& table) {
  AddNative<Reshape>(table, "reshape");
  AddNative<Transpose>(table, "transpose");
  AddNative<Split>(table, "split");
  AddNative<Concat>(table, "concat");
}

}  // namespace pw::ops::cuda
