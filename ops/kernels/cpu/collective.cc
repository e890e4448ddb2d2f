// c_identity, c_allreduce_sum, c_allreduce_coalesced and c_allreduce_max; c_all_gather,
// c_reduce_scatter_sum, c_reduce_scatter_coalesced and c_sync_shards; c_shift, c_member_concat and
// c_member_sum (a collective matmul's pieces). A null communicator is a group of one. A
// low-precision sum goes to the communicator as it is (which sums in f32 and rounds once); a
// low-precision max runs widened.

#include <cstring>
#include <vector>

#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/group_members.h"
#include "ops/low_precision.h"

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

// A bucket: the X laid end to end in one buffer, summed as one collective, laid back out.
// The communicators sum each element in member order wherever it lies: the bits of one
// c_allreduce_sum per X.
Status CAllReduceCoalesced(KernelContext& ctx) {
  const size_t n = ctx.InCount("X");
  if (n == 1) return CAllReduceSum(ctx);
  const DataType dtype = ctx.In("X")->dtype();
  int64_t count = 0;
  for (size_t i = 0; i < n; ++i) count += ctx.In("X", i)->numel();
  if (ops::InPlaceEndToEnd(ctx))  // the executor's bucket: one allocation, summed in place
    return ops::AllReduceSumOverGroup(ctx, dtype, ctx.Out("Out")->raw(), count);
  Tensor packed = Tensor::Allocated(dtype, {count}, false);
  char* at = static_cast<char*>(packed.raw());
  for (size_t i = 0; i < n; ++i) {
    const Tensor& x = *ctx.In("X", i);
    std::memcpy(at, x.raw(), static_cast<size_t>(x.nbytes()));
    at += x.nbytes();
  }
  PW_RETURN_IF_ERROR(ops::AllReduceSumOverGroup(ctx, dtype, packed.raw(), count));
  at = static_cast<char*>(packed.raw());
  for (size_t i = 0; i < n; ++i) {
    Tensor& out = *ctx.Out("Out", i);
    std::memcpy(out.raw(), at, static_cast<size_t>(out.nbytes()));
    at += out.nbytes();
  }
  return OkStatus();
}

// The communicators move one contiguous chunk per member, so a tensor cut along an inner
// axis ([outer, members, slice] elements) travels as [members, outer, slice]: member m's
// chunk is its slice of every outer row. `to_chunks` picks the direction.
void Rearrange(const ops::AxisSlices& s, int64_t elem, const char* src, char* dst, bool to_chunks) {
  const int64_t row = s.slice * elem;
  for (int m = 0; m < s.members; ++m)
    for (int64_t o = 0; o < s.outer; ++o) {
      const int64_t in_rows = (o * s.members + m) * row, in_chunks = (m * s.outer + o) * row;
      std::memcpy(dst + (to_chunks ? in_chunks : in_rows), src + (to_chunks ? in_rows : in_chunks),
                  static_cast<size_t>(row));
    }
}

Status CAllGather(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  Tensor& out = *ctx.Out("Out");
  PW_ASSIGN_OR_RETURN(ops::AxisSlices s, ops::SlicesOf(ctx, out.shape()));
  const int64_t elem = DataTypeSize(x.dtype());
  const int64_t chunk = s.outer * s.slice * elem;
  // One outer row: Out is already laid out chunk by chunk.
  Tensor staging = s.outer == 1 ? out : Tensor::Allocated(x.dtype(), out.shape(), false);
  char* mine = static_cast<char*>(staging.raw()) + ctx.GroupRank() * chunk;
  if (mine != x.raw()) std::memcpy(mine, x.raw(), static_cast<size_t>(chunk));  // X may be it
  PW_RETURN_IF_ERROR(ops::AllGatherOverGroup(ctx, staging.raw(), staging.nbytes()));
  if (s.outer != 1)
    Rearrange(s, elem, static_cast<const char*>(staging.raw()), static_cast<char*>(out.raw()),
              /*to_chunks=*/false);
  return OkStatus();
}

// In place over Out (X copied in first): this member's slice is already where the
// transfer's layout wants it when the cut is along the outermost dims.
Status CSyncShards(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  CopyIfDistinct(*ctx.In("X"), out);
  PW_ASSIGN_OR_RETURN(ops::AxisSlices s, ops::SlicesOf(ctx, out.shape()));
  if (s.outer == 1) return ops::AllGatherOverGroup(ctx, out.raw(), out.nbytes());
  const int64_t elem = DataTypeSize(out.dtype());
  Tensor staging = Tensor::Allocated(out.dtype(), out.shape(), false);
  Rearrange(s, elem, static_cast<const char*>(out.raw()), static_cast<char*>(staging.raw()),
            /*to_chunks=*/true);
  PW_RETURN_IF_ERROR(ops::AllGatherOverGroup(ctx, staging.raw(), staging.nbytes()));
  Rearrange(s, elem, static_cast<const char*>(staging.raw()), static_cast<char*>(out.raw()),
            /*to_chunks=*/false);
  return OkStatus();
}

Status CReduceScatterSum(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  Tensor& out = *ctx.Out("Out");
  PW_ASSIGN_OR_RETURN(ops::AxisSlices s, ops::SlicesOf(ctx, x.shape()));
  const int64_t elem = DataTypeSize(x.dtype());
  const int64_t chunk = s.outer * s.slice * elem;
  Tensor staging = Tensor::Allocated(x.dtype(), x.shape(), false);
  if (s.outer == 1)
    std::memcpy(staging.raw(), x.raw(), static_cast<size_t>(x.nbytes()));
  else
    Rearrange(s, elem, static_cast<const char*>(x.raw()), static_cast<char*>(staging.raw()),
              /*to_chunks=*/true);
  PW_RETURN_IF_ERROR(
      ops::ReduceScatterOverGroup(ctx, staging.dtype(), staging.raw(), staging.numel()));
  std::memcpy(out.raw(), static_cast<const char*>(staging.raw()) + ctx.GroupRank() * chunk,
              static_cast<size_t>(chunk));
  return OkStatus();
}

// A bucket: the X packed member by member (member m's chunk holds its slice of X[0], then
// of X[1], ...), one reduce-scatter, this member's chunk copied out slice by slice. Every
// element is summed in member order: the bits of c_reduce_scatter_sum on each X alone.
Status CReduceScatterCoalesced(KernelContext& ctx) {
  const size_t n = ctx.InCount("X");
  const DataType dtype = ctx.In("X")->dtype();
  const int64_t elem = DataTypeSize(dtype);
  PW_ASSIGN_OR_RETURN(const ops::BucketSlices bucket, ops::SlicesOfBucket(ctx));
  const std::vector<ops::AxisSlices>& cuts = bucket.cuts;
  const std::vector<int64_t>& offsets = bucket.offsets;
  const int64_t chunk = bucket.chunk;
  const int members = bucket.members;
  Tensor staging = Tensor::Allocated(dtype, {chunk / elem * members}, false);
  char* packed = static_cast<char*>(staging.raw());
  for (size_t i = 0; i < n; ++i) {
    const ops::AxisSlices& s = cuts[i];
    const int64_t row = s.slice * elem;
    const char* x = static_cast<const char*>(ctx.In("X", i)->raw());
    for (int m = 0; m < members; ++m)
      for (int64_t o = 0; o < s.outer; ++o)
        std::memcpy(packed + m * chunk + offsets[i] + o * row, x + (o * members + m) * row,
                    static_cast<size_t>(row));
  }
  PW_RETURN_IF_ERROR(ops::ReduceScatterOverGroup(ctx, dtype, packed, staging.numel()));
  const char* mine = packed + ctx.GroupRank() * chunk;
  for (size_t i = 0; i < n; ++i) {
    Tensor& out = *ctx.Out("Out", i);
    std::memcpy(out.raw(), mine + offsets[i], static_cast<size_t>(out.nbytes()));
  }
  return OkStatus();
}

Status CSplit(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  Tensor& out = *ctx.Out("Out");
  PW_ASSIGN_OR_RETURN(ops::AxisSlices s, ops::SlicesOf(ctx, x.shape()));
  const int64_t row = s.slice * DataTypeSize(x.dtype());
  const int m = Member(ctx.GroupRank() + ctx.attrs().GetInt("offset", 0), s.members);
  for (int64_t o = 0; o < s.outer; ++o)
    std::memcpy(static_cast<char*>(out.raw()) + o * row,
                static_cast<const char*>(x.raw()) + (o * s.members + m) * row,
                static_cast<size_t>(row));
  return OkStatus();
}

Status CShift(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  Tensor& out = *ctx.Out("Out");
  return ops::ShiftOverGroup(ctx, static_cast<int>(ctx.attrs().GetInt("offset")), x.raw(),
                             out.raw(), x.nbytes());
}

Status CMemberConcat(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  PW_ASSIGN_OR_RETURN(ops::AxisSlices s, ops::SlicesOf(ctx, out.shape()));
  const int64_t row = s.slice * DataTypeSize(out.dtype());
  for (int j = 0; j < s.members; ++j) {
    const char* block = static_cast<const char*>(BlockOfMember(ctx, j, s.members).raw());
    for (int64_t o = 0; o < s.outer; ++o)
      std::memcpy(static_cast<char*>(out.raw()) + (o * s.members + j) * row, block + o * row,
                  static_cast<size_t>(row));
  }
  return OkStatus();
}

// The communicators' member-order sum: member 0's value, plus member 1's, ... in f32,
// a low-precision result rounded once.
Status CMemberSum(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  const int members = static_cast<int>(ctx.InCount("X"));
  const int64_t n = out.numel();
  const DataType dtype = out.dtype();
  std::vector<float> sum(static_cast<size_t>(n)), part;
  auto widen = [&](const Tensor& t, float* dst) {
    if (dtype == DataType::kFloat32)
      std::memcpy(dst, t.raw(), static_cast<size_t>(n) * sizeof(float));
    else
      ops::WidenToF32(dtype, t.raw(), dst, n);
  };
  widen(BlockOfMember(ctx, 0, members), sum.data());
  if (members > 1) part.resize(static_cast<size_t>(n));
  for (int j = 1; j < members; ++j) {
    widen(BlockOfMember(ctx, j, members), part.data());
    for (int64_t i = 0; i < n; ++i) sum[i] = sum[i] + part[i];
  }
  if (dtype == DataType::kFloat32)
    std::memcpy(out.raw(), sum.data(), static_cast<size_t>(n) * sizeof(float));
  else
    ops::NarrowFromF32(dtype, sum.data(), out.raw(), n);
  return OkStatus();
}

}  // namespace

void RegisterCollectiveKernels(KernelTable& table) {
  AddNative<CIdentity>(table, "c_identity");
  AddNative<CAllReduceSum>(table, "c_allreduce_sum");
  AddNative<CAllReduceCoalesced>(table, "c_allreduce_coalesced");
  Add<CAllReduceMax>(table, "c_allreduce_max");
  AddNative<CAllGather>(table, "c_all_gather");
  AddNative<CReduceScatterSum>(table, "c_reduce_scatter_sum");
  AddNative<CReduceScatterCoalesced>(table, "c_reduce_scatter_coalesced");
  AddNative<CSyncShards>(table, "c_sync_shards");
  AddNative<CSplit>(table, "c_split");
  AddNative<CShift>(table, "c_shift");
  AddNative<CMemberConcat>(table, "c_member_concat");
  AddNative<CMemberSum>(table, "c_member_sum");
}

}  // namespace pw::ops::cpu
