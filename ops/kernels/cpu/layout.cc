// Data movement: reshape, transpose, split, concat. These copy bytes, so they work for
// every dtype.

#include <cstring>
#include <vector>

#include "ops/kernels/cpu/cpu_kernels.h"

namespace pw::ops::cpu {
namespace {

void CopyIfDistinct(const Tensor& src, Tensor& dst) {
  if (!src.SharesStorage(dst)) std::memcpy(dst.raw(), src.raw(), src.nbytes());
}

Status Reshape(KernelContext& ctx) {
  CopyIfDistinct(*ctx.In("X"), *ctx.Out("Out"));
  return OkStatus();
}

template <typename T>
void TransposeImpl(const Tensor& x, Tensor& out, const std::vector<int64_t>& perm) {
  int rank = x.rank();
  std::vector<int64_t> in_stride(rank, 1);
  for (int i = rank - 2; i >= 0; --i) in_stride[i] = in_stride[i + 1] * x.dim(i + 1);
  // Walk the output in order; `src` follows via the permuted input strides.
  std::vector<int64_t> idx(rank, 0);
  const T* in = x.data<T>();
  T* o = out.data<T>();
  int64_t src = 0;
  for (int64_t n = 0; n < out.numel(); ++n) {
    o[n] = in[src];
    for (int i = rank - 1; i >= 0; --i) {
      src += in_stride[perm[i]];
      if (++idx[i] < out.dim(i)) break;
      src -= in_stride[perm[i]] * idx[i];
      idx[i] = 0;
    }
  }
}

Status Transpose(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  Tensor& out = *ctx.Out("Out");
  if (x.SharesStorage(out)) return InvalidArgument("transpose: Out must not alias X");
  std::vector<int64_t> perm = ctx.attrs().GetInts("perm");
  switch (DataTypeSize(x.dtype())) {
    case 8:
      TransposeImpl<uint64_t>(x, out, perm);
      break;
    case 4:
      TransposeImpl<uint32_t>(x, out, perm);
      break;
    case 2:
      TransposeImpl<uint16_t>(x, out, perm);
      break;
    default:
      return Unimplemented("transpose: dtype ", DataTypeName(x.dtype()));
  }
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
    auto* dst = static_cast<char*>(out.raw());
    for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * chunk, src + o * row + offset, chunk);
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
    const auto* src = static_cast<const char*>(x.raw());
    for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * row + offset, src + o * chunk, chunk);
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

}  // namespace pw::ops::cpu
