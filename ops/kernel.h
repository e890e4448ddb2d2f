#pragma once
// The CPU kernel contract. A kernel reads its input tensors and writes into output
// tensors the caller has allocated with the declared shapes. An output that names the
// same var as an input (in-place, e.g. sgd's ParamOut) is the same Tensor object.

#include <string_view>
#include <vector>

#include "ir/op.h"
#include "ir/op_def.h"
#include "ir/status.h"
#include "ops/tensor.h"

namespace pw {

// Collectives a kernel may call. `group` is "mp", "dp" or "pp"; a null Communicator in the
// KernelContext means a group of one (the collective is the identity).
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual Status AllReduceSum(std::string_view group, float* data, int64_t count) = 0;
  // A bf16 or f16 sum. By default (host memory) it is summed in f32 and rounded once; a
  // transport with native low-precision reductions (NCCL) overrides it.
  virtual Status AllReduceSumLowPrecision(std::string_view group, DataType dtype, void* data,
                                          int64_t count);
  // Element-wise max: the shared shift of a vocabulary-parallel softmax, overflow flags.
  virtual Status AllReduceMax(std::string_view group, float* data, int64_t count) = 0;
  // This rank's index in `group` (0 for the first member): which shard of a sharded
  // vocabulary it holds.
  virtual int GroupRank(std::string_view group) const = 0;
  // The number of members of `group`; 0 when the transport does not say.
  virtual int GroupSize(std::string_view group) const { return 0; }

  // Reduce-scatter of `count` values (a multiple of the group's size) cut in one chunk per
  // member, in member order: member i's chunk becomes every member's chunk i summed in
  // member order, the bits of that chunk of AllReduceSum; the other chunks are left
  // undefined. By default an all-reduce of the whole buffer (its bits, the bytes of a full
  // all-reduce); transports override it with a real reduce-scatter.
  virtual Status ReduceScatterSum(std::string_view group, float* data, int64_t count);
  // A bf16 or f16 reduce-scatter. By default summed in f32 and rounded once, as
  // AllReduceSumLowPrecision, so a chunk has that all-reduce's bits.
  virtual Status ReduceScatterSumLowPrecision(std::string_view group, DataType dtype, void* data,
                                              int64_t count);
  // All-gather of `bytes` (a multiple of the group's size) cut in one chunk per member:
  // member i's chunk is in place on entry, every member's on return.
  virtual Status AllGather(std::string_view group, void* data, int64_t bytes);
  // Sends `bytes` from `send` to the member `offset` places after this one in `group` and
  // receives into `recv` what the member `offset` places before it sends (c_shift). By
  // default an all-gather of every member's block, of which it keeps one; transports with
  // point-to-point channels override it with one send and one receive.
  virtual Status Shift(std::string_view group, int offset, const void* send, void* recv,
                       int64_t bytes);
};

enum class ReduceOp { kSum, kMax };

struct KernelContext {
  const Op& op;
  // inputs[i][j] / outputs[i][j]: var j of op.inputs[i] / op.outputs[i].
  std::vector<std::vector<const Tensor*>> inputs;
  std::vector<std::vector<Tensor*>> outputs;
  Communicator* comm = nullptr;
  // The tensor types (inputs, then outputs) ValidateKernelContext last accepted: run again
  // on tensors of the same types, as an instruction is every step, the context skips the
  // op's shape inference, which costs about a microsecond, as much as a small kernel.
  mutable std::vector<TensorType> validated = {};

  // The tensor of var `j` of a slot; nullptr when the slot is absent.
  const Tensor* In(std::string_view slot, size_t j = 0) const;
  Tensor* Out(std::string_view slot, size_t j = 0) const;
  size_t InCount(std::string_view slot) const;
  const AttrList& attrs() const { return op.attrs; }
  // This rank's index in the op's `group` (mp unless set); 0 without a communicator.
  int GroupRank() const;
};

using CpuKernel = Status (*)(KernelContext&);

// The CPU kernel of an op type, or nullptr.
CpuKernel FindCpuKernel(std::string_view type);

// Whether the CPU kernel of `type` writes every element of every output, whatever the
// shapes, so that outputs need not be zero-filled first (Tensor::Allocated with zeroed = false).
// Opt-in: a kernel not listed gets zero-filled outputs.
bool CpuKernelWritesEveryOutput(std::string_view type);

namespace ops {
// Threads one kernel may use (global to the process): the pool that GEMMs and the
// element-wise loops cut their work across (ops/kernels/cpu/parallel_for.h). Every kernel
// cuts only where no element's arithmetic changes (a GEMM cuts C's columns or rows, never
// its sums over K), so every count gives the bits of one.
void SetKernelThreads(int threads);

// c_allreduce_sum's and c_allreduce_max's reduction on every backend: reduces `out` in
// place over the op's `group` (mp unless set) through ctx.comm (a max needs f32, a sum
// takes bf16 and f16 too); a null communicator is a group of one. An error names the op
// and the group.
Status AllReduceOverGroup(const KernelContext& ctx, Tensor& out, ReduceOp op = ReduceOp::kSum);
// The sum of `count` elements of `dtype` at `data` (host or device memory, as the
// communicator takes it), as AllReduceOverGroup sums a tensor: c_allreduce_coalesced's
// packed bucket.
Status AllReduceSumOverGroup(const KernelContext& ctx, DataType dtype, void* data, int64_t count);
// Whether c_allreduce_coalesced's Out are its X and lie end to end in one allocation (the
// executor lays a dp bucket's gradient sums out so): then the bucket is summed in place.
bool InPlaceEndToEnd(const KernelContext& ctx);

// c_reduce_scatter_sum's and c_all_gather's transfers on every backend, over the op's group
// through ctx.comm, on a buffer laid out chunk by chunk in member order (the kernels move
// the slices into and out of that layout, in host or device memory as the communicator
// takes it). The buffer holds a multiple of the group's size of `count` elements of
// `dtype` / `bytes`. A null communicator is a group of one.
Status ReduceScatterOverGroup(const KernelContext& ctx, DataType dtype, void* data, int64_t count);
Status AllGatherOverGroup(const KernelContext& ctx, void* data, int64_t bytes);
// c_shift's transfer over the op's group (see Communicator::Shift); a null communicator is a
// group of one (a copy).
Status ShiftOverGroup(const KernelContext& ctx, int offset, const void* send, void* recv,
                      int64_t bytes);

// How c_all_gather and c_reduce_scatter_sum see a tensor cut along `axis`: `outer` rows
// (the dims before it) of `members` slices of `slice` elements each (its extent / members
// times the dims after it), for a tensor whose whole extent along axis is `members` slices.
struct AxisSlices {
  int64_t outer = 1;
  int64_t slice = 0;
  int members = 1;
};
// The slices of `whole` (the gathered / unscattered tensor) for the op's attrs; an error
// names the op when the attrs and the communicator's group disagree.
StatusOr<AxisSlices> SlicesOf(const KernelContext& ctx, const Shape& whole);
// A reduce-scatter bucket (c_reduce_scatter_coalesced) in the transfer's layout: member m's
// chunk holds its slice of X[0], then of X[1], ...; `offsets` (bytes) place each X's slice
// in a chunk of `chunk` bytes.
struct BucketSlices {
  std::vector<AxisSlices> cuts;  // per X
  std::vector<int64_t> offsets;  // per X
  int64_t chunk = 0;
  int members = 1;
};
StatusOr<BucketSlices> SlicesOfBucket(const KernelContext& ctx);
}  // namespace ops

}  // namespace pw
