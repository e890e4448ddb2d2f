#pragma once
// A GEMM whose output rows do not depend on how many rows it computes: row i of
// C = op(A)·op(B) has the same bits whether C has M rows or a block of them. The row
// splits of the overlap passes (passes/streams/row_split.h) promise exactly that, and
// cuBLAS's own heuristics break it: they choose a kernel, and a split of K, by shape.
// Here the algorithm is chosen once per (dtypes, transposes, N, K, leading dims) by
// cuBLASLt's heuristic at a fixed large M, restricted to kernels that sum K in one pass
// (no split-K, no reduction), and reused for every M.

#include <cstdint>

#include "ir/status.h"
#include "ops/tensor.h"

namespace pw::ops::cuda {

// Row-major C[m, n] = alpha · op(A) · op(B) + beta · C with one product (no batch), on the
// launch stream. Unavailable (the caller falls back to cuBLAS's own choice) when no
// algorithm fits these operands, e.g. pointers or leading dims not 16-byte aligned.
Status RowStableGemm(DataType ab_dtype, DataType c_dtype, bool trans_a, bool trans_b, int64_t m,
                     int64_t n, int64_t k, float alpha, const void* a, int64_t lda, const void* b,
                     int64_t ldb, float beta, void* c, int64_t ldc);

}  // namespace pw::ops::cuda
