#pragma once
// Cutting a var into the equal pieces a layout gives its ranks, and joining pieces back
// into the whole: how a checkpoint written under one plan loads under another. Bytes are
// copied, never converted, so every dtype moves bit for bit.

#include <vector>

#include "ir/status.h"
#include "ops/tensor.h"

namespace pw {

// The whole tensor from its pieces (in shard order, equal dtypes and shapes) cut along
// `axis`.
StatusOr<Tensor> JoinShards(const std::vector<const Tensor*>& pieces, int axis);
// Piece `index` of `num` equal pieces of `whole` along `axis`.
StatusOr<Tensor> CutShard(const Tensor& whole, int axis, int num, int index);

}  // namespace pw
