#pragma once
// Internal helpers shared by the op definitions: input checks whose errors name the op,
// the slot and the shapes involved, cost counting and grad-maker shorthands.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/op_def.h"
#include "ops/defs/row_groups.h"

namespace pw::ops {

// Attribute declarations: a required one, and one whose type comes from its default.
inline AttrDef RequiredAttr(std::string name, AttrType type) {
  return AttrDef{std::move(name), type, std::nullopt};
}
inline AttrDef DefaultAttr(std::string name, Attribute value) {
  AttrType type = TypeOf(value);
  return AttrDef{std::move(name), type, std::move(value)};
}

// "matmul: X" — the prefix of every inference error.
std::string Where(const InferContext& ctx, std::string_view slot);

// "matmul: Y ('w')": the op, the slot and the var, for errors about one input.
std::string WhereVar(const InferContext& ctx, std::string_view slot, size_t i = 0);

// Checks that input `slot` (var `i`) is present and has dtype `dtype`.
Status CheckDtype(const InferContext& ctx, std::string_view slot, DataType dtype, size_t i = 0);
// The dtype of input `slot` (var `i`) when it is present and floating (f32, bf16, f16):
// the dtype the op computes in, which its other floating inputs and outputs share.
StatusOr<DataType> FloatDtype(const InferContext& ctx, std::string_view slot, size_t i = 0);
// Checks dtype and that input `slot` holds exactly one element (a scalar of any rank).
Status CheckOneElement(const InferContext& ctx, std::string_view slot, DataType dtype);
// Checks dtype and that the rank is at least `min_rank`.
Status CheckRankAtLeast(const InferContext& ctx, std::string_view slot, DataType dtype,
                        int min_rank);
// Checks dtype and exact rank.
Status CheckRank(const InferContext& ctx, std::string_view slot, DataType dtype, int rank);
// Checks that two inputs have the same dtype and shape.
Status CheckSameType(const InferContext& ctx, std::string_view a, std::string_view b, size_t ia = 0,
                     size_t ib = 0);
// Checks that `bias` is floating, of `x`'s dtype, and equals x's trailing dims (it is
// broadcast over the leading ones).
Status CheckBias(const InferContext& ctx, std::string_view x, std::string_view bias);
// An InvalidArgument naming both slots and their shapes: "op: X [2, 3] and Y [4]: why".
Status Mismatch(const InferContext& ctx, std::string_view a, const Shape& sa, std::string_view b,
                const Shape& sb, std::string_view why);

// Bytes of a tensor of type `t`.
double BytesOf(const TensorType& t);
// Bytes of every input and output var.
double IoBytes(const InferContext& ctx);
// `flops_per_element` times the elements of output `slot`, plus IoBytes.
OpCost ElementwiseCost(const InferContext& ctx, double flops_per_element,
                       std::string_view slot = "Out");

// Sets op.weight_grad when every output of a grad op is the gradient of a parameter, so
// zero-bubble schedules can defer it.
void MarkWeightGrad(const GradContext& ctx, Op& op);

// An op whose definition has this attribute can write its output in f32 from 16-bit
// operands ("f32"; empty: the operands' dtype): amp sets it on the ops that finish a
// parameter's gradient instead of casting their 16-bit result.
inline constexpr const char* kOutDtypeAttr = "out_dtype";

// Sequence parallelism (passes/sequence_parallel_pass.cc) runs a norm or a bias add on the
// rank's shard of the sequence; its parameter's gradient must still sum over the whole
// sequence in the unsharded order. Where the shard holds whole row groups
// (ops/defs/row_groups.h) each rank sums its groups and the [.., groups, H] partial sums
// are all-gathered and added in order (ShardPartialGroups, EmitShardPartials); elsewhere the
// tensors are all-gathered along the sequence and one kernel sums the whole
// (GatherSequence). These attributes say so; nranks 1 (the default) is off.
inline constexpr const char* kSeqParallelGroup = "seq_parallel_group";
inline constexpr const char* kSeqParallelAxis = "seq_parallel_axis";
inline constexpr const char* kSeqParallelNranks = "seq_parallel_nranks";
std::vector<AttrDef> SeqParallelAttrs();
bool SeqParallel(const Op& forward);
// Emits, for a parameter gradient, a c_all_gather of the sequence-sharded `var` along the
// forward op's sequence axis; returns the gathered temp. `var` has the type of forward var
// `like`; or, with `per_row`, it is a statistic of one f32 value per row of `like`
// (flattened): it is reshaped to like's leading dims, gathered, and flattened back, so its
// rows keep the unsharded order.
StatusOr<std::string> GatherSequence(GradContext& ctx, const std::string& var,
                                     const std::string& like, bool per_row = false);
// Groups per leading index that each rank's sequence shard of forward var `x` holds whole,
// for a parameter-gradient op's `partial_groups` attribute; 0 when the shard cuts a group
// (the sequence is not a multiple of nranks groups, or is not x's last row axis).
int64_t ShardPartialGroups(const GradContext& ctx, const std::string& x);
// Makes `op` (just emitted, its inputs set) this rank's f32 partial sums over the row groups
// of its shard of forward var `x` ([.., S/n, H]; `per_lead` from ShardPartialGroups): for
// each (output slot, parameter gradient) of `outputs` the slot writes [.., per_lead, H]
// partials, which are then all-gathered along the sequence and added by sum_row_partials
// into the gradient: the whole sequence's sum in the unsharded kernel's order. All of it is
// weight-gradient work. `op` must not be used afterwards (more ops are emitted).
void EmitShardPartials(GradContext& ctx, Op& op, const std::string& x, int64_t per_lead,
                       const std::vector<std::pair<std::string, std::string>>& outputs);
// `partial_groups` (0: the whole sum) for the ops that sum rows in row groups.
AttrDef PartialGroupsAttr();
// The type of a row-summing op's output over rows of shape `rows`: the sum, {dtype, cols};
// or, as its `partial_groups` attribute asks, the f32 [.., partial_groups, cols...] partials.
StatusOr<TensorType> RowSumType(const InferContext& ctx, const Shape& rows, const Shape& cols,
                                DataType dtype);

// The Bias@GRAD a bias gradient op writes: Out@GRAD (input `dout`) summed over its leading
// dims down to the `bias_shape` attribute (which must equal its trailing dims), or the
// partial sums its `partial_groups` attribute asks for (RowSumType).
StatusOr<TensorType> BiasGradType(const InferContext& ctx, std::string_view dout);

// `attrs` and SeqParallelAttrs().
std::vector<AttrDef> WithSeqParallel(std::vector<AttrDef> attrs);

// Normalises a possibly negative axis against `rank`; false when out of range.
bool NormalizeAxis(int64_t axis, int rank, int* out);

}  // namespace pw::ops
