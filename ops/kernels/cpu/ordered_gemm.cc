// The ordered GEMM (ordered_gemm.h). Highway compiles this file once per target
// (foreach_target.h re-includes it); the HWY_ONCE part dispatches to the best one.
//
// Blocked as BLIS and GotoBLAS block a GEMM: C in column blocks of kBlockCols, K in slices
// of kDepth, A's rows in blocks of kBlockRows; each slice of A and B is packed into panels
// (kRows rows of A, two vectors' width of B, zero-padded at the edges) that a
// register-tiled kernel reads in order. What is particular: each element of C keeps one
// running sum in the column block's f32 accumulators across the K slices (stored and loaded back,
// which is exact), every product is added to it by one fused multiply-add in ascending k, and alpha
// and beta apply once at the end. Nothing about the order depends on m, n, the block an element
// falls in or where a caller cut C, so a cut never changes a bit.

#include "ops/kernels/cpu/ordered_gemm.h"

#include <algorithm>
#include <cstring>

// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/kernels/cpu/ordered_gemm.cc"
#include "hwy/foreach_target.h"
#include "hwy/highway.h"
#include "hwy/aligned_allocator.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace pw::ops::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

constexpr int64_t kRows = 6;         // rows of an A panel: 6 x 2 vector accumulators
constexpr int64_t kDepth = 256;      // a K slice
constexpr int64_t kBlockRows = 72;   // rows of a C block (a multiple of kRows)
constexpr int64_t kBlockCols = 512;  // columns of a C block (a multiple of any panel width)
constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);

int64_t RoundUp(int64_t x, int64_t unit) { return (x + unit - 1) / unit * unit; }

// Per thread: the packed slices and the accumulators of a column block (every row of C).
struct Scratch {
  hwy::AlignedFreeUniquePtr<float[]> a = hwy::AllocateAligned<float>(kBlockRows * kDepth);
  hwy::AlignedFreeUniquePtr<float[]> b = hwy::AllocateAligned<float>(kDepth * kBlockCols);
  hwy::AlignedFreeUniquePtr<float[]> acc;
  size_t acc_size = 0;

  float* Accumulators(size_t n) {
    if (n > acc_size) acc = hwy::AllocateAligned<float>(acc_size = n);
    return acc.get();
  }
};

// A's rows [i0, i0 + rows) over k [p0, p0 + depth) as panels of kRows rows, k-major. Each
// source row (or, transposed, each k) is read along its length.
void PackA(bool trans, const float* a, int64_t lda, int64_t i0, int64_t rows, int64_t p0,
           int64_t depth, float* out) {
  for (int64_t panel = 0; panel * kRows < rows; ++panel) {
    float* dst = out + panel * depth * kRows;
    const int64_t first = i0 + panel * kRows, valid = std::min(kRows, rows - panel * kRows);
    if (trans) {
      for (int64_t p = 0; p < depth; ++p) {
        const float* src = a + (p0 + p) * lda + first;
        for (int64_t r = 0; r < kRows; ++r) dst[p * kRows + r] = r < valid ? src[r] : 0.f;
      }
      continue;
    }
    for (int64_t r = 0; r < kRows; ++r) {
      const float* src = a + (first + r) * lda + p0;
      for (int64_t p = 0; p < depth; ++p) dst[p * kRows + r] = r < valid ? src[p] : 0.f;
    }
  }
}

// B's columns [j0, j0 + cols) over k [p0, p0 + depth) as panels `width` wide, k-major.
void PackB(bool trans, const float* b, int64_t ldb, int64_t p0, int64_t depth, int64_t j0,
           int64_t cols, int64_t width, float* out) {
  for (int64_t panel = 0; panel * width < cols; ++panel) {
    float* dst = out + panel * depth * width;
    const int64_t first = j0 + panel * width, valid = std::min(width, cols - panel * width);
    if (trans) {
      for (int64_t j = 0; j < width; ++j) {
        const float* src = b + (first + j) * ldb + p0;
        for (int64_t p = 0; p < depth; ++p) dst[p * width + j] = j < valid ? src[p] : 0.f;
      }
      continue;
    }
    for (int64_t p = 0; p < depth; ++p) {
      float* row = dst + p * width;
      std::memcpy(row, b + (p0 + p) * ldb + first, static_cast<size_t>(valid) * sizeof(float));
      for (int64_t j = valid; j < width; ++j) row[j] = 0.f;
    }
  }
}

// acc[kRows x 2 vectors] (row stride `stride`) += A panel x B panel over `depth`, one
// fused multiply-add per product in ascending k.
void Tile(const float* HWY_RESTRICT ap, const float* HWY_RESTRICT bp, int64_t depth,
          float* HWY_RESTRICT acc, int64_t stride) {
  const D d;
  const size_t lanes = hn::Lanes(d);
  V c00 = hn::Load(d, acc), c01 = hn::Load(d, acc + lanes);
  V c10 = hn::Load(d, acc + stride), c11 = hn::Load(d, acc + stride + lanes);
  V c20 = hn::Load(d, acc + 2 * stride), c21 = hn::Load(d, acc + 2 * stride + lanes);
  V c30 = hn::Load(d, acc + 3 * stride), c31 = hn::Load(d, acc + 3 * stride + lanes);
  V c40 = hn::Load(d, acc + 4 * stride), c41 = hn::Load(d, acc + 4 * stride + lanes);
  V c50 = hn::Load(d, acc + 5 * stride), c51 = hn::Load(d, acc + 5 * stride + lanes);
  for (int64_t p = 0; p < depth; ++p, ap += kRows, bp += 2 * lanes) {
    const V b0 = hn::Load(d, bp), b1 = hn::Load(d, bp + lanes);
    V a = hn::Set(d, ap[0]);
    c00 = hn::MulAdd(a, b0, c00), c01 = hn::MulAdd(a, b1, c01);
    a = hn::Set(d, ap[1]);
    c10 = hn::MulAdd(a, b0, c10), c11 = hn::MulAdd(a, b1, c11);
    a = hn::Set(d, ap[2]);
    c20 = hn::MulAdd(a, b0, c20), c21 = hn::MulAdd(a, b1, c21);
    a = hn::Set(d, ap[3]);
    c30 = hn::MulAdd(a, b0, c30), c31 = hn::MulAdd(a, b1, c31);
    a = hn::Set(d, ap[4]);
    c40 = hn::MulAdd(a, b0, c40), c41 = hn::MulAdd(a, b1, c41);
    a = hn::Set(d, ap[5]);
    c50 = hn::MulAdd(a, b0, c50), c51 = hn::MulAdd(a, b1, c51);
  }
  hn::Store(c00, d, acc), hn::Store(c01, d, acc + lanes);
  hn::Store(c10, d, acc + stride), hn::Store(c11, d, acc + stride + lanes);
  hn::Store(c20, d, acc + 2 * stride), hn::Store(c21, d, acc + 2 * stride + lanes);
  hn::Store(c30, d, acc + 3 * stride), hn::Store(c31, d, acc + 3 * stride + lanes);
  hn::Store(c40, d, acc + 4 * stride), hn::Store(c41, d, acc + 4 * stride + lanes);
  hn::Store(c50, d, acc + 5 * stride), hn::Store(c51, d, acc + 5 * stride + lanes);
}

// c[0, n) = alpha · acc + beta · c (beta 0: c is not read), the row's tail through padded
// copies so that every element goes through the same instructions.
void FinishRow(const float* acc, float alpha, float beta, float* c, int64_t n) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const V va = hn::Set(d, alpha), vb = hn::Set(d, beta);
  auto finish = [&](const float* in, float* out) {
    const V sum = hn::LoadU(d, in);
    hn::StoreU(beta == 0.f ? hn::Mul(va, sum) : hn::MulAdd(va, sum, hn::Mul(vb, hn::LoadU(d, out))),
               d, out);
  };
  int64_t j = 0;
  for (; j + lanes <= n; j += lanes) finish(acc + j, c + j);
  if (j == n) return;
  HWY_ALIGN float in[kMaxLanes] = {}, out[kMaxLanes] = {};
  std::memcpy(in, acc + j, static_cast<size_t>(n - j) * sizeof(float));
  if (beta != 0.f) std::memcpy(out, c + j, static_cast<size_t>(n - j) * sizeof(float));
  finish(in, out);
  std::memcpy(c + j, out, static_cast<size_t>(n - j) * sizeof(float));
}

void OrderedGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc) {
  thread_local Scratch scratch;
  const D d;
  const int64_t width = 2 * static_cast<int64_t>(hn::Lanes(d));
  for (int64_t j0 = 0; j0 < n; j0 += kBlockCols) {
    const int64_t cols = std::min(kBlockCols, n - j0), stride = RoundUp(cols, width);
    const size_t count = static_cast<size_t>(RoundUp(m, kRows) * stride);
    float* acc = scratch.Accumulators(count);
    std::fill(acc, acc + count, 0.f);
    for (int64_t p0 = 0; p0 < k; p0 += kDepth) {
      const int64_t depth = std::min(kDepth, k - p0);
      PackB(trans_b, b, ldb, p0, depth, j0, cols, width, scratch.b.get());
      for (int64_t i0 = 0; i0 < m; i0 += kBlockRows) {
        const int64_t rows = std::min(kBlockRows, m - i0);
        PackA(trans_a, a, lda, i0, rows, p0, depth, scratch.a.get());
        // A B panel stays in L1 while the block's A panels pass under it.
        for (int64_t jp = 0; jp * width < cols; ++jp)
          for (int64_t ip = 0; ip * kRows < rows; ++ip)
            Tile(scratch.a.get() + ip * depth * kRows, scratch.b.get() + jp * depth * width, depth,
                 acc + (i0 + ip * kRows) * stride + jp * width, stride);
      }
    }
    for (int64_t r = 0; r < m; ++r)
      FinishRow(acc + r * stride, alpha, beta, c + r * ldc + j0, cols);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace pw::ops::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pw::ops::cpu {

HWY_EXPORT(OrderedGemm);

void OrderedSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                  int64_t ldc) {
  HWY_DYNAMIC_DISPATCH(OrderedGemm)(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace pw::ops::cpu
#endif  // HWY_ONCE
