#pragma once
// What a dropout or dropout_grad kernel needs besides its tensors, read from the op's
// attributes and the communicator on every backend: the mask's salt, threshold and scale,
// and where this rank's slice sits in the whole tensor.

#include "ir/status.h"
#include "ir/types.h"
#include "ops/dropout_mask.h"
#include "ops/kernel.h"

namespace pw::ops {

struct DropoutArgs {
  uint64_t salt = 0;
  uint32_t threshold = 0;
  float scale = 1.0f;
  DropoutLayout layout;
};

// For a tensor of `shape` (X, or Out@GRAD of the grad): the shard is this rank's index in
// the op's group. An error names the op when shard_count disagrees with the group's size.
StatusOr<DropoutArgs> DropoutArgsOf(const KernelContext& ctx, const Shape& shape);

}  // namespace pw::ops
