#pragma once
// A GEMM whose every element is the same sum in the same order whatever the shape around
// it: C = alpha·op(A)·op(B) + beta·C (row-major, one thread) where each element's products
// are added in ascending k by fused multiply-adds into one f32 sum, then scaled once. A
// caller may cut C's rows or columns anywhere (threads, row blocks of a matmul) and get
// every bit of the uncut product. oneDNN's sgemm keeps that only where its kernels do (the
// machines gemm.cc names); elsewhere the CPU math module uses this one.

#include <cstdint>

namespace pw::ops::cpu {

void OrderedSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                  int64_t ldc);

}  // namespace pw::ops::cpu
