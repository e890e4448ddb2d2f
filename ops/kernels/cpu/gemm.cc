// The CPU GEMM: oneDNN's sgemm (its JIT kernels for the machine's instruction set) on
// AVX-512 machines, the ordered GEMM (ordered_gemm.h) elsewhere (math_module_entry.cc says
// why), cut across the kernel threads by this process's own pool rather than by oneDNN.
//
// Why oneDNN: on the GPT's shapes its single-thread sgemm runs 6-16 % faster than OpenBLAS's
// on 7 of 8 (1 % slower on the last), and cut across 2 threads 9-32 % faster on the 7 large
// ones (benchmarks/gemm_bench, AVX-512 machine); GEMM is ~85 % of a CPU training step.
// Why our own cut: oneDNN's threads would split a GEMM's sum over K for some shapes, so the
// bits would depend on the thread count; cutting C's columns (or rows) keeps every element
// the same dot product summed in the same order, whatever the number of threads.
// oneDNN itself lives in the CPU math module (math_module.h), opened on the first GEMM.
#include <algorithm>
#include <cstdint>

#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cpu/math_module.h"
#include "ops/kernels/cpu/parallel_for.h"

namespace pw::ops::cpu {
namespace {

void OneThreadGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                   int64_t ldc) {
  CpuMath().sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Pieces of C are cut at multiples of this many rows or columns (one 64-byte line of
// floats) and are at least kMinPiece wide: narrower ones take oneDNN's small-matrix paths.
constexpr int64_t kCutUnit = 16;
constexpr int64_t kMinPiece = 64;

}  // namespace

void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // The product is empty, so C = beta · C (and 0 where beta is 0, even over NaN).
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0 ? 0 : beta * c[i * ldc + j];
    return;
  }
  // Cut C's columns, or its rows where it is narrow, into pieces of at least kMinPiece
  // that each hold kMinRangeMacs multiply-adds (ParallelFor asks more of them while the
  // pool's threads sleep); one piece is the whole product on this thread.
  const bool by_columns = n >= 2 * kMinPiece;
  const int64_t extent = by_columns ? n : m, across = by_columns ? m : n;
  const int64_t units = (extent + kCutUnit - 1) / kCutUnit;
  const int64_t grain = std::max(kMinPiece / kCutUnit, MacGrain(across * k * kCutUnit));
  ParallelFor(units, grain, [&](int64_t first, int64_t last) {
    const int64_t begin = first * kCutUnit, end = std::min(extent, last * kCutUnit);
    if (by_columns) {
      const float* b_piece = trans_b ? b + begin * ldb : b + begin;
      OneThreadGemm(trans_a, trans_b, m, end - begin, k, alpha, a, lda, b_piece, ldb, beta,
                    c + begin, ldc);
    } else {
      const float* a_piece = trans_a ? a + begin : a + begin * lda;
      OneThreadGemm(trans_a, trans_b, end - begin, n, k, alpha, a_piece, lda, b, ldb, beta,
                    c + begin * ldc, ldc);
    }
  });
}

}  // namespace pw::ops::cpu
