#pragma once
// Dropout's attributes and their checks, shared by dropout and by the fused
// bias_dropout_add (ops/defs/bias_fusions.cc): p, the site's salt, and where a shard's
// slice sits in the whole tensor's mask.

#include <string_view>
#include <vector>

#include "ir/op_def.h"

namespace pw::ops {

// p (required), salt, shard_axis, shard_count and group.
std::vector<AttrDef> DropoutAttrs();

// Copies the attributes above that `from` sets onto `to` (a grad op draws the forward's mask).
void CopyDropoutAttrs(const Op& from, Op& to);

// Checks p, the seed and the shard attributes against the tensor in `slot`. With
// `allow_zero`, p may be 0 and Seed is then optional (an op that also adds, whose dropout
// may be off).
Status CheckDropout(const InferContext& ctx, std::string_view slot, bool allow_zero = false);

}  // namespace pw::ops
