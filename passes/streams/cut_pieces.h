#pragma once
// What the stream passes that cut an op into pieces (row-split, collective matmul) share:
// the ops they add (blocks, splits, joins, transfers) run where the cut op ran, and the
// vars they declare get names the program does not have yet.

#include <string>
#include <utility>

#include "ir/op.h"
#include "ir/program.h"
#include "ir/status.h"

namespace pw {

// An op of `type` with `from`'s role, pipeline stage and chunk, stream and weight-gradient
// part.
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

// A var name not declared in `program`: base + suffix, numbered if taken.
inline std::string FreshName(const Program& program, const std::string& base,
                             const std::string& suffix) {
  std::string name = base + suffix;
  for (int n = 1; program.HasVar(name); ++n) name = StrCat(base, suffix, ".", n);
  return name;
}

}  // namespace pw
