// c_identity, c_allreduce_sum, c_allreduce_coalesced and c_allreduce_max; c_all_gather,
// c_reduce_scatter_sum, c_reduce_scatter_coalesced and c_sync_shards; c_shift, c_member_concat and
// c_member_sum (a collective matmul's pieces). The communicator (NCCL in the executor) queues the
// transfer on the same launch stream (a bf16 or f16 sum natively); a null one is a group of one. A
// low-precision max runs widened.

#include <optional>
#include <vector>

#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/member_order_reduce.h"
#include "ops/kernels/group_members.h"

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

// A bucket, as on the CPU: the X copied end to end into scratch, summed by one collective
// (NCCL's member-order sum of every element wherever it lies), copied back out.
Status CAllReduceCoalesced(KernelContext& ctx) {
  const size_t n = ctx.InCount("X");
  if (n == 1) return CAllReduceSum(ctx);
  const DataType dtype = ctx.In("X")->dtype();
  int64_t count = 0;
  for (size_t i = 0; i < n; ++i) count += ctx.In("X", i)->numel();
  if (ops::InPlaceEndToEnd(ctx))  // the executor's bucket: one allocation, summed in place
    return ops::AllReduceSumOverGroup(ctx, dtype, ctx.Out("Out")->raw(), count);
  if (count == 0) return OkStatus();
  PW_ASSIGN_OR_RETURN(Scratch scratch, Scratch::Make(count * DataTypeSize(dtype)));
  char* at = static_cast<char*>(scratch.get());
  for (size_t i = 0; i < n; ++i) {
    const Tensor& x = *ctx.In("X", i);
    PW_RETURN_IF_ERROR(CudaCheck(cudaMemcpyAsync(at, x.raw(), static_cast<size_t>(x.nbytes()),
                                                 cudaMemcpyDeviceToDevice, CurrentLaunch().stream),
                                 "bucket pack"));
    at += x.nbytes();
  }
  PW_RETURN_IF_ERROR(ops::AllReduceSumOverGroup(ctx, dtype, scratch.get(), count));
  at = static_cast<char*>(scratch.get());
  for (size_t i = 0; i < n; ++i) {
    Tensor& out = *ctx.Out("Out", i);
    PW_RETURN_IF_ERROR(CudaCheck(cudaMemcpyAsync(out.raw(), at, static_cast<size_t>(out.nbytes()),
                                                 cudaMemcpyDeviceToDevice, CurrentLaunch().stream),
                                 "bucket unpack"));
    at += out.nbytes();
  }
  return OkStatus();
}

// As on the CPU: a tensor cut along an inner axis ([outer, members, slice]) travels as
// [members, outer, slice]; member m's chunk is one pitched 2D copy of its slice of every row.
Status Rearrange(const ops::AxisSlices& s, int64_t elem, const char* src, char* dst,
                 bool to_chunks) {
  const size_t row = static_cast<size_t>(s.slice * elem);
  const size_t wide = row * static_cast<size_t>(s.members);
  for (int m = 0; m < s.members; ++m) {
    const size_t in_rows = m * row, in_chunks = m * row * static_cast<size_t>(s.outer);
    PW_RETURN_IF_ERROR(
        CudaCheck(cudaMemcpy2DAsync(dst + (to_chunks ? in_chunks : in_rows), to_chunks ? row : wide,
                                    src + (to_chunks ? in_rows : in_chunks), to_chunks ? wide : row,
                                    row, static_cast<size_t>(s.outer), cudaMemcpyDeviceToDevice,
                                    CurrentLaunch().stream),
                  "slice copy"));
  }
  return OkStatus();
}

Status CAllGather(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  Tensor& out = *ctx.Out("Out");
  PW_ASSIGN_OR_RETURN(ops::AxisSlices s, ops::SlicesOf(ctx, out.shape()));
  const int64_t elem = DataTypeSize(x.dtype());
  const int64_t chunk = s.outer * s.slice * elem;
  if (chunk == 0) return OkStatus();
  // One outer row: Out is already laid out chunk by chunk.
  std::optional<Scratch> scratch;
  char* staging = static_cast<char*>(out.raw());
  if (s.outer != 1) {
    PW_ASSIGN_OR_RETURN(Scratch made, Scratch::Make(out.nbytes()));
    scratch.emplace(std::move(made));
    staging = static_cast<char*>(scratch->get());
  }
  if (staging + ctx.GroupRank() * chunk != x.raw())  // X may be that slice of Out already
    PW_RETURN_IF_ERROR(CudaCheck(
        cudaMemcpyAsync(staging + ctx.GroupRank() * chunk, x.raw(), static_cast<size_t>(chunk),
                        cudaMemcpyDeviceToDevice, CurrentLaunch().stream),
        "own slice"));
  PW_RETURN_IF_ERROR(ops::AllGatherOverGroup(ctx, staging, out.nbytes()));
  if (s.outer == 1) return OkStatus();
  return Rearrange(s, elem, staging, static_cast<char*>(out.raw()), /*to_chunks=*/false);
}

// As on the CPU: the X packed member by member into scratch (one pitched copy per X and
// member), one reduce-scatter, this member's chunk copied out.
Status CReduceScatterCoalesced(KernelContext& ctx) {
  const size_t n = ctx.InCount("X");
  const DataType dtype = ctx.In("X")->dtype();
  const int64_t elem = DataTypeSize(dtype);
  PW_ASSIGN_OR_RETURN(const ops::BucketSlices bucket, ops::SlicesOfBucket(ctx));
  const std::vector<ops::AxisSlices>& cuts = bucket.cuts;
  const std::vector<int64_t>& offsets = bucket.offsets;
  const int64_t chunk = bucket.chunk;
  const int members = bucket.members;
  if (chunk == 0) return OkStatus();
  PW_ASSIGN_OR_RETURN(Scratch scratch, Scratch::Make(chunk * members));
  char* packed = static_cast<char*>(scratch.get());
  const cudaStream_t stream = CurrentLaunch().stream;
  for (size_t i = 0; i < n; ++i) {
    const ops::AxisSlices& s = cuts[i];
    const size_t row = static_cast<size_t>(s.slice * elem);
    if (row == 0 || s.outer == 0) continue;
    const char* x = static_cast<const char*>(ctx.In("X", i)->raw());
    for (int m = 0; m < members; ++m)
      PW_RETURN_IF_ERROR(CudaCheck(
          cudaMemcpy2DAsync(packed + m * chunk + offsets[i], row, x + m * row, row * members, row,
                            static_cast<size_t>(s.outer), cudaMemcpyDeviceToDevice, stream),
          "bucket pack"));
  }
  PW_RETURN_IF_ERROR(ops::ReduceScatterOverGroup(ctx, dtype, packed, chunk / elem * members));
  const char* mine = packed + ctx.GroupRank() * chunk;
  for (size_t i = 0; i < n; ++i) {
    Tensor& out = *ctx.Out("Out", i);
    PW_RETURN_IF_ERROR(
        CudaCheck(cudaMemcpyAsync(out.raw(), mine + offsets[i], static_cast<size_t>(out.nbytes()),
                                  cudaMemcpyDeviceToDevice, stream),
                  "bucket unpack"));
  }
  return OkStatus();
}

// In place over Out (X copied in first), through scratch when the cut is not along the
// outermost dims.
Status CSyncShards(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  PW_RETURN_IF_ERROR(CopyIfDistinct(*ctx.In("X"), out));
  PW_ASSIGN_OR_RETURN(ops::AxisSlices s, ops::SlicesOf(ctx, out.shape()));
  if (out.nbytes() == 0) return OkStatus();
  if (s.outer == 1) return ops::AllGatherOverGroup(ctx, out.raw(), out.nbytes());
  const int64_t elem = DataTypeSize(out.dtype());
  PW_ASSIGN_OR_RETURN(Scratch scratch, Scratch::Make(out.nbytes()));
  char* staging = static_cast<char*>(scratch.get());
  PW_RETURN_IF_ERROR(
      Rearrange(s, elem, static_cast<const char*>(out.raw()), staging, /*to_chunks=*/true));
  PW_RETURN_IF_ERROR(ops::AllGatherOverGroup(ctx, staging, out.nbytes()));
  return Rearrange(s, elem, staging, static_cast<char*>(out.raw()), /*to_chunks=*/false);
}

Status CReduceScatterSum(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  Tensor& out = *ctx.Out("Out");
  PW_ASSIGN_OR_RETURN(ops::AxisSlices s, ops::SlicesOf(ctx, x.shape()));
  const int64_t elem = DataTypeSize(x.dtype());
  const int64_t chunk = s.outer * s.slice * elem;
  if (chunk == 0) return OkStatus();
  PW_ASSIGN_OR_RETURN(Scratch scratch, Scratch::Make(x.nbytes()));
  char* staging = static_cast<char*>(scratch.get());
  if (s.outer == 1)
    PW_RETURN_IF_ERROR(CudaCheck(cudaMemcpyAsync(staging, x.raw(), static_cast<size_t>(x.nbytes()),
                                                 cudaMemcpyDeviceToDevice, CurrentLaunch().stream),
                                 "staging copy"));
  else
    PW_RETURN_IF_ERROR(
        Rearrange(s, elem, static_cast<const char*>(x.raw()), staging, /*to_chunks=*/true));
  PW_RETURN_IF_ERROR(ops::ReduceScatterOverGroup(ctx, x.dtype(), staging, x.numel()));
  return CudaCheck(
      cudaMemcpyAsync(out.raw(), staging + ctx.GroupRank() * chunk, static_cast<size_t>(chunk),
                      cudaMemcpyDeviceToDevice, CurrentLaunch().stream),
      "own slice");
}

Status CSplit(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  Tensor& out = *ctx.Out("Out");
  PW_ASSIGN_OR_RETURN(ops::AxisSlices s, ops::SlicesOf(ctx, x.shape()));
  const size_t row = static_cast<size_t>(s.slice * DataTypeSize(x.dtype()));
  if (row == 0 || s.outer == 0) return OkStatus();
  const int member = Member(ctx.GroupRank() + ctx.attrs().GetInt("offset", 0), s.members);
  return CudaCheck(
      cudaMemcpy2DAsync(out.raw(), row, static_cast<const char*>(x.raw()) + member * row,
                        row * s.members, row, static_cast<size_t>(s.outer),
                        cudaMemcpyDeviceToDevice, CurrentLaunch().stream),
      "slice copy");
}

// The communicator (NCCL) queues one send and one receive on the launch stream.
Status CShift(KernelContext& ctx) {
  const Tensor& x = *ctx.In("X");
  Tensor& out = *ctx.Out("Out");
  if (!ctx.comm) return CopyIfDistinct(x, out);
  return ops::ShiftOverGroup(ctx, static_cast<int>(ctx.attrs().GetInt("offset")), x.raw(),
                             out.raw(), x.nbytes());
}

Status CMemberConcat(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  PW_ASSIGN_OR_RETURN(ops::AxisSlices s, ops::SlicesOf(ctx, out.shape()));
  const size_t row = static_cast<size_t>(s.slice * DataTypeSize(out.dtype()));
  if (row == 0 || s.outer == 0) return OkStatus();
  for (int j = 0; j < s.members; ++j)
    PW_RETURN_IF_ERROR(
        CudaCheck(cudaMemcpy2DAsync(static_cast<char*>(out.raw()) + j * row, row * s.members,
                                    BlockOfMember(ctx, j, s.members).raw(), row, row,
                                    static_cast<size_t>(s.outer), cudaMemcpyDeviceToDevice,
                                    CurrentLaunch().stream),
                  "block copy"));
  return OkStatus();
}

// The member-order sum of NCCL's all-reduce: the partials laid out in member order, then
// ((p0 + p1) + p2) + ... per element (low precision in f32, rounded once).
Status CMemberSum(KernelContext& ctx) {
  Tensor& out = *ctx.Out("Out");
  const int members = static_cast<int>(ctx.InCount("X"));
  const size_t bytes = static_cast<size_t>(out.nbytes());
  if (bytes == 0) return OkStatus();
  PW_ASSIGN_OR_RETURN(Scratch scratch, Scratch::Make(out.nbytes() * members));
  char* slots = static_cast<char*>(scratch.get());
  for (int j = 0; j < members; ++j)
    PW_RETURN_IF_ERROR(
        CudaCheck(cudaMemcpyAsync(slots + j * bytes, BlockOfMember(ctx, j, members).raw(), bytes,
                                  cudaMemcpyDeviceToDevice, CurrentLaunch().stream),
                  "partial copy"));
  LaunchMemberOrderReduce(slots, members, out.numel(), out.raw(), out.dtype(), /*max=*/false,
                          CurrentLaunch().stream);
  return CudaCheck(cudaGetLastError(), "member-order sum");
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

}  // namespace pw::ops::cuda
