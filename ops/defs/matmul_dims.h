#pragma once
// Internal: the problem sizes of a (possibly batched, possibly transposed) matmul, shared
// by shape inference, cost counting and the kernels.

#include <cstdint>
#include <string_view>

#include "ir/status.h"
#include "ir/types.h"

namespace pw::ops {

// Out[b] = op(X[b]) · op(Y[b]), op = transpose of the last two dims when the flag is set.
// A rank-2 operand is shared by every batch (broadcast); two batched operands need equal
// leading dims.
struct MatmulDims {
  int64_t batch = 1;
  int64_t m = 0, k = 0, n = 0;
  bool x_batched = false, y_batched = false;
  Shape out;
};

// `op_type` prefixes the error, which names X and Y with their shapes.
StatusOr<MatmulDims> ComputeMatmulDims(std::string_view op_type, const Shape& x, const Shape& y,
                                       bool trans_x, bool trans_y);

}  // namespace pw::ops
