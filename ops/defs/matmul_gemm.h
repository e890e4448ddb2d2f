#pragma once
// Internal: how the matmul kernels map onto GEMM, shared by every backend so that they
// compute the same products and sum batches in the same order (the CUDA kernels must match
// the CPU ones). A backend only runs the StridedGemm it is given. The plan stores the
// pointers it is given and counts every step in elements, never offsetting a pointer, so
// a backend may hand it the bases of bf16 or f16 tensors (scaling the steps itself).

#include <cstdint>

#include "ops/defs/matmul_dims.h"

namespace pw::ops {

// Row-major C_i = op(A_i) · op(B_i) for i < batch, with A_i = a + i * a_step (likewise B,
// C). With `accumulate` every batch adds into the same C (c_step 0): the first overwrites
// it, the others add, one after another; with no batch at all C (m x ldc) is zero.
struct StridedGemm {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const float* a = nullptr;
  int64_t lda = 0, a_step = 0;
  const float* b = nullptr;
  int64_t ldb = 0, b_step = 0;
  float* c = nullptr;
  int64_t ldc = 0, c_step = 0;
  int64_t batch = 1;
  bool accumulate = false;
};

// matmul: Out = op(X) · op(Y). A Y shared by every batch of an untransposed X folds the
// batch into M (one large GEMM).
StridedGemm MatmulGemm(const MatmulDims& d, bool trans_x, bool trans_y, const float* x,
                       const float* y, float* out);

// matmul_weight_grad: dY = sum_b op(X_b)^T · G_b, or its transpose when trans_y. `x` has
// shape `x_shape`; G's last dim is `n`.
StridedGemm MatmulWeightGradGemm(const Shape& x_shape, int64_t n, bool trans_x, bool trans_y,
                                 const float* x, const float* g, float* dy);

}  // namespace pw::ops
