#pragma once
// The ops a stream pass adds in place of one it cuts up (blocks, splits, joins, transfers)
// run where that op ran: same role, pipeline stage and chunk, stream and weight-gradient
// part.

#include <string>
#include <utility>

#include "ir/op.h"

namespace pw {

inline Op OpLike(const Op& from, std::string type) {
  Op op;
  op.type = std::move(type);
  op.role = from.role;
  op.stage = from.stage;
  op.chunk = from.chunk;
  op.stream = from.stream;
  op.weight_grad = from.weight_grad;
  return op;
}

}  // namespace pw
