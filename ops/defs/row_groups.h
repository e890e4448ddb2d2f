#pragma once
// The one order in which a parameter gradient's sum over rows (tokens) is taken: by a norm's
// Scale/Bias gradient and by bias_add_grad, on every backend. The rows of each index of the
// leading axes are cut along the last row axis (the sequence, for [B, S, H] activations)
// into gcd(S, 8) groups of consecutive rows; each group is summed in row order from zero,
// and the groups' partial sums are added in order, from zero.
//
// Why groups: under sequence parallelism a rank holds S/mp consecutive rows of each sample.
// When mp divides the group count, every group lies on one rank, so a rank can sum its own
// groups and all-gather the [B, groups, H] partial sums (not the [B, S, H] activations)
// and the result keeps the unsharded kernel's bits (ops/defs/def_util.h, EmitShardPartials).

#include <cstdint>
#include <numeric>

#include "ir/types.h"

namespace pw::ops {

inline constexpr int64_t kMaxRowGroups = 8;  // per index of the leading axes

// The attribute of the ops that sum rows in groups: 0 (the default) for the whole sum, else
// the groups per leading index whose partial sums are the output.
inline constexpr const char* kPartialGroupsAttr = "partial_groups";

// `count` groups of `rows` consecutive rows each, in row order; `partial`: each group's sum
// is the result ([count, cols]), else the sum of them all ([cols]). A plain struct: the
// CUDA kernels take it as an argument.
struct RowGroups {
  int64_t count = 1;
  int64_t rows = 0;
  bool partial = false;
};

// Groups per leading index GroupRows picks for a last row axis of `last`.
inline int64_t DefaultGroupsPerLead(int64_t last) {
  return last == 0 ? 1 : std::gcd(last, kMaxRowGroups);
}

// The groups of the rows of a tensor whose rows have shape `row_shape` (its shape without
// the summed-over columns). `per_lead` > 0 asks for that many groups per leading index
// instead of the default (it must divide the last row axis: a sequence shard's partials).
inline RowGroups GroupRows(const Shape& row_shape, int64_t per_lead = 0) {
  if (row_shape.empty()) return {1, 1, per_lead > 0};
  const int64_t last = row_shape.back();
  int64_t leads = 1;
  for (size_t i = 0; i + 1 < row_shape.size(); ++i) leads *= row_shape[i];
  if (last == 0 || leads == 0) return {0, 0, per_lead > 0};
  const int64_t groups = per_lead > 0 ? per_lead : DefaultGroupsPerLead(last);
  return {leads * groups, last / groups, per_lead > 0};
}

// The groups an op's kernel sums the rows of shape `row_shape` in, as its attributes
// (an AttrList: a template so that nvcc, which reads this header, needs none) ask.
template <class Attrs>
RowGroups GroupRowsFor(const Shape& row_shape, const Attrs& attrs) {
  return GroupRows(row_shape, attrs.GetInt(kPartialGroupsAttr, 0));
}

}  // namespace pw::ops
