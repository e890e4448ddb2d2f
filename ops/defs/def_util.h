#pragma once
// Internal helpers shared by the op definitions: input checks whose errors name the op,
// the slot and the shapes involved, cost counting and grad-maker shorthands.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/op_def.h"

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
// An InvalidArgument naming both slots and their shapes: "op: X [2, 3] and Y [4]: why".
Status Mismatch(const InferContext& ctx, std::string_view a, const Shape& sa, std::string_view b,
                const Shape& sb, std::string_view why);

// Bytes of every input and output var.
double IoBytes(const InferContext& ctx);
// `flops_per_element` times the elements of output `slot`, plus IoBytes.
OpCost ElementwiseCost(const InferContext& ctx, double flops_per_element,
                       std::string_view slot = "Out");

// Sets op.weight_grad when every output of a grad op is the gradient of a parameter, so
// zero-bubble schedules can defer it.
void MarkWeightGrad(const GradContext& ctx, Op& op);

// Sequence parallelism (passes/sequence_parallel_pass.cc) runs a norm or a bias add on the
// rank's shard of the sequence; its parameter's gradient then sums over the whole sequence
// in one kernel, as without it, from tensors all-gathered along the sequence (a sum of
// per-shard partial sums would associate differently). These attributes say so; nranks 1
// (the default) is off.
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
// `attrs` and SeqParallelAttrs().
std::vector<AttrDef> WithSeqParallel(std::vector<AttrDef> attrs);

// Normalises a possibly negative axis against `rank`; false when out of range.
bool NormalizeAxis(int64_t axis, int rank, int* out);

}  // namespace pw::ops
