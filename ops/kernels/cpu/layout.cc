// Data movement: reshape, transpose, split, concat. These copy bytes, so they work for
// every dtype.

#include <cstring>
#include <vector>

#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/layout_copies.h"

namespace pw::ops::cpu {
namespace {

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

void Copy(const std::vector<StridedCopy>& copies) {
  for (const StridedCopy& c : copies)
    for (int64_t r = 0; r < c.rows; ++r)
      std::memcpy(c.dst + r * c.dst_pitch, c.src + r * c.src_pitch, c.width);
}

Status Split(KernelContext& ctx) {
  Copy(SplitCopies(ctx));
  return OkStatus();
}

Status Concat(KernelContext& ctx) {
  PW_ASSIGN_OR_RETURN(std::vector<StridedCopy> copies, ConcatCopies(ctx));
  Copy(copies);
  return OkStatus();
}

}  // namespace

void RegisterLayoutKernels(KernelTable& table) {
  AddNative<Reshape>(table, "reshape");
  AddNative<Transpose>(table, "transpose");
  AddNative<Split>(table, "split");
  AddNative<Concat>(table, "concat");
}

}  // namespace pw::ops::cpu
