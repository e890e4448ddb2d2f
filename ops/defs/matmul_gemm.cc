#include "ops/defs/matmul_gemm.h"

#include <algorithm>

namespace pw::ops {

StridedGemm MatmulGemm(const MatmulDims& d, bool trans_x, bool trans_y, const float* x,
                       const float* y, float* out) {
  StridedGemm g;
  g.trans_a = trans_x;
  g.trans_b = trans_y;
  g.m = d.m;
  g.n = d.n;
  g.k = d.k;
  g.a = x;
  g.lda = trans_x ? d.m : d.k;
  g.b = y;
  g.ldb = trans_y ? d.k : d.n;
  g.c = out;
  g.ldc = d.n;
  if (d.x_batched && !d.y_batched && !trans_x) {
    g.m = d.batch * d.m;  // the rows of every batch are contiguous
    return g;
  }
  g.batch = d.batch;
  g.a_step = d.x_batched ? d.m * d.k : 0;
  g.b_step = d.y_batched ? d.k * d.n : 0;
  g.c_step = d.m * d.n;
  return g;
}

StridedGemm MatmulWeightGradGemm(const Shape& x_shape, int64_t n, bool trans_x, bool trans_y,
                                 const float* x, const float* g, float* dy) {
  const size_t rank = x_shape.size();
  const int64_t rows = x_shape[rank - 2], cols = x_shape[rank - 1];
  const int64_t m = trans_x ? cols : rows;
  const int64_t k = trans_x ? rows : cols;
  int64_t numel = 1;
  for (int64_t dim : x_shape) numel *= dim;
  const int64_t batch = numel / std::max<int64_t>(1, m * k);
  StridedGemm out;
  out.c = dy;
  if (!trans_x) {
    // X's rows are contiguous: one GEMM over all batch * m rows.
    out.trans_a = true;
    out.k = batch * m;
    if (!trans_y) {  // dY[k, n] = X^T · G
      out.m = k, out.n = n;
      out.a = x, out.lda = k, out.b = g, out.ldb = n, out.ldc = n;
    } else {  // dY[n, k] = G^T · X
      out.m = n, out.n = k;
      out.a = g, out.lda = n, out.b = x, out.ldb = k, out.ldc = k;
    }
    return out;
  }
  // X_b is [k, m]: one GEMM per batch, summed into dY.
  out.batch = batch;
  out.accumulate = true;
  out.k = m;
  if (!trans_y) {  // dY[k, n] += X_b · G_b
    out.m = k, out.n = n;
    out.a = x, out.lda = m, out.a_step = k * m;
    out.b = g, out.ldb = n, out.b_step = m * n;
    out.ldc = n;
  } else {  // dY[n, k] += G_b^T · X_b^T
    out.trans_a = out.trans_b = true;
    out.m = n, out.n = k;
    out.a = g, out.lda = n, out.a_step = m * n;
    out.b = x, out.ldb = m, out.b_step = k * m;
    out.ldc = k;
  }
  return out;
}

}  // namespace pw::ops
