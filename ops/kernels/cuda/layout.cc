// Data movement: reshape, transpose, split, concat. Bytes are copied, so every dtype
// works; split and concat are 2-D strided copies (one row per outer index).

#include <vector>

#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/launchers.h"

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

// Bytes per step along `axis` (the inner block) and the number of outer blocks.
void AxisBlocks(const Shape& shape, int axis, int64_t elem, int64_t* outer, int64_t* inner) {
  *outer = 1;
  *inner = elem;
  for (int i = 0; i < axis; ++i) *outer *= shape[i];
  for (size_t i = axis + 1; i < shape.size(); ++i) *inner *= shape[i];
}

int Axis(const KernelContext& ctx, int rank) {
  int64_t axis = ctx.attrs().GetInt("axis");
  return static_cast<int>(axis < 0 ? axis + rank : axis);  // validated by inference
}

// `height` rows of `width` bytes from src (row pitch spitch) to dst (row pitch dpitch).
Status Copy2D(void* dst, int64_t dpitch, const void* src, int64_t spitch, int64_t width,
              int64_t height, const char* what) {
  if (width == 0 || height == 0) return OkStatus();
  return CudaCheck(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height,
                                     cudaMemcpyDeviceToDevice, CurrentLaunch().stream),
                   what);
}

Status Split(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  int axis = Axis(ctx, x.rank());
  int64_t outer, inner;
  AxisBlocks(x.shape(), axis, DataTypeSize(x.dtype()), &outer, &inner);
  const auto* src = static_cast<const char*>(x.raw());
  int64_t row = x.dim(axis) * inner;
  int64_t offset = 0;
  for (size_t k = 0; k < ctx.op.FindOutput("Out")->size(); ++k) {
    Tensor& out = *ctx.Out("Out", k);
    int64_t chunk = out.dim(axis) * inner;
    PW_RETURN_IF_ERROR(Copy2D(out.raw(), chunk, src + offset, row, chunk, outer, "split"));
    offset += chunk;
  }
  return OkStatus();
}

Status Concat(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  int axis = Axis(ctx, out.rank());
  int64_t outer, inner;
  AxisBlocks(out.shape(), axis, DataTypeSize(out.dtype()), &outer, &inner);
  auto* dst = static_cast<char*>(out.raw());
  int64_t row = out.dim(axis) * inner;
  int64_t offset = 0;
  for (size_t k = 0; k < ctx.InCount("X"); ++k) {
    const Tensor& x = *ctx.In("X", k);
    if (x.SharesStorage(out)) return InvalidArgument("concat: Out must not alias X");
    int64_t chunk = x.dim(axis) * inner;
    PW_RETURN_IF_ERROR(Copy2D(dst + offset, row, x.raw(), chunk, chunk, outer, "concat"));
    offset += chunk;
  }
  return OkStatus();
}

}  // namespace

void RegisterLayoutKernels(KernelTable& table) {
  Add<Reshape>(table, "reshape");
  Add<Transpose>(table, "transpose");
  Add<Split>(table, "split");
  Add<Concat>(table, "concat");
}

}  // namespace pw::ops::cuda
