// The ordered GEMM (ordered_gemm.h). Highway compiles this file once per target
// (foreach_target.h re-includes it); the HWY_ONCE part dispatches to the best one.
//
// Blocked as BLIS and GotoBLAS block a GEMM: C in column blocks of kBlockCols, K in slices
// of kDepth, A's rows in blocks of kBlockRows; each slice of A and B is packed into panels
// (kRows rows of A, two vectors' width of B, zero-padded at the edges) that a
// register-tiled kernel reads in order (with few rows of C, B's rows are read where they
// lie). What is particular: each element of C keeps one running f32 sum across the K slices
// (stored between slices and loaded back, which is exact), every product is added to it by
// one multiply-add in ascending k, and alpha and beta apply once, after the last slice.
// Nothing about the order depends on m, n, the block or panel an element falls in or where
// a caller cut C, so a cut never changes a bit.

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
constexpr int64_t kDirectRows = 96;  // up to this many rows of C, B is read unpacked

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
    if (valid == width) {  // two vectors a row, inline: a call per row would cost as much
      const D d;
      const size_t lanes = hn::Lanes(d);
      for (int64_t p = 0; p < depth; ++p) {
        const float* src = b + (p0 + p) * ldb + first;
        hn::Store(hn::LoadU(d, src), d, dst + p * width);
        hn::Store(hn::LoadU(d, src + lanes), d, dst + p * width + lanes);
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

// Where a whole tile's sums go after the last K slice: C = alpha · sum + beta · C.
struct Finish {
  float* c;
  int64_t ldc;
  float alpha, beta;
};

// *dst = alpha · sum + beta · *dst (beta 0: dst is not read): every finished element of C.
void FinishVector(V sum, const Finish& f, float* dst) {
  const D d;
  const V alpha = hn::Set(d, f.alpha);
  hn::StoreU(f.beta == 0.f ? hn::Mul(alpha, sum)
                           : hn::MulAdd(alpha, sum, hn::Mul(hn::Set(d, f.beta), hn::LoadU(d, dst))),
             d, dst);
}

// out[kRows x 2 vectors] (row stride `stride`) = in (the running sums so far, row stride
// `in_stride`; null: zeros) + A panel x B's two vectors a k (`b_stride` apart: a packed
// panel's width, or B's own rows) over `depth`, one multiply-add per product in ascending k.
// With `finish`, the sums go into C instead of `out`.
void Tile(const float* HWY_RESTRICT ap, const float* HWY_RESTRICT bp, int64_t b_stride,
          int64_t depth, const float* in, int64_t in_stride, float* out, int64_t stride,
          const Finish* finish = nullptr) {
  const D d;
  const size_t lanes = hn::Lanes(d);
  auto start = [&](int64_t row, size_t half) {
    return in ? hn::Load(d, in + row * in_stride + half * lanes) : hn::Zero(d);
  };
  V c00 = start(0, 0), c01 = start(0, 1), c10 = start(1, 0), c11 = start(1, 1);
  V c20 = start(2, 0), c21 = start(2, 1), c30 = start(3, 0), c31 = start(3, 1);
  V c40 = start(4, 0), c41 = start(4, 1), c50 = start(5, 0), c51 = start(5, 1);
  for (int64_t p = 0; p < depth; ++p, ap += kRows, bp += b_stride) {
    const V b0 = hn::LoadU(d, bp), b1 = hn::LoadU(d, bp + lanes);
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
  if (finish) {  // a whole tile after its last slice: straight into C
    const int64_t ldc = finish->ldc;
    float* c = finish->c;
    FinishVector(c00, *finish, c), FinishVector(c01, *finish, c + lanes);
    FinishVector(c10, *finish, c + ldc), FinishVector(c11, *finish, c + ldc + lanes);
    FinishVector(c20, *finish, c + 2 * ldc), FinishVector(c21, *finish, c + 2 * ldc + lanes);
    FinishVector(c30, *finish, c + 3 * ldc), FinishVector(c31, *finish, c + 3 * ldc + lanes);
    FinishVector(c40, *finish, c + 4 * ldc), FinishVector(c41, *finish, c + 4 * ldc + lanes);
    FinishVector(c50, *finish, c + 5 * ldc), FinishVector(c51, *finish, c + 5 * ldc + lanes);
    return;
  }
  hn::Store(c00, d, out), hn::Store(c01, d, out + lanes);
  hn::Store(c10, d, out + stride), hn::Store(c11, d, out + stride + lanes);
  hn::Store(c20, d, out + 2 * stride), hn::Store(c21, d, out + 2 * stride + lanes);
  hn::Store(c30, d, out + 3 * stride), hn::Store(c31, d, out + 3 * stride + lanes);
  hn::Store(c40, d, out + 4 * stride), hn::Store(c41, d, out + 4 * stride + lanes);
  hn::Store(c50, d, out + 5 * stride), hn::Store(c51, d, out + 5 * stride + lanes);
}

// A row of an edge tile: f.c[0, n) finished from sums[0, n), the tail through padded copies
// so that every element goes through FinishVector as a whole tile's do.
void FinishRow(const float* sums, const Finish& f, int64_t n) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t j = 0;
  for (; j + lanes <= n; j += lanes) FinishVector(hn::LoadU(d, sums + j), f, f.c + j);
  if (j == n) return;
  HWY_ALIGN float in[kMaxLanes] = {}, out[kMaxLanes] = {};
  const size_t bytes = static_cast<size_t>(n - j) * sizeof(float);
  std::memcpy(in, sums + j, bytes);
  if (f.beta != 0.f) std::memcpy(out, f.c + j, bytes);
  FinishVector(hn::Load(d, in), f, out);
  std::memcpy(f.c + j, out, bytes);
}

void OrderedGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc) {
  thread_local Scratch scratch;
  const D d;
  const int64_t width = 2 * static_cast<int64_t>(hn::Lanes(d));
  HWY_ALIGN float last[kRows * 2 * kMaxLanes];  // a tile's sums after its last K slice
  for (int64_t j0 = 0; j0 < n; j0 += kBlockCols) {
    const int64_t cols = std::min(kBlockCols, n - j0), stride = RoundUp(cols, width);
    // Running sums between K slices; a product of one slice needs none.
    float* acc = k > kDepth ? scratch.Accumulators(static_cast<size_t>(RoundUp(m, kRows) * stride))
                            : nullptr;
    for (int64_t p0 = 0; p0 < k; p0 += kDepth) {
      const int64_t depth = std::min(kDepth, k - p0);
      const bool first = p0 == 0, final = p0 + depth >= k;
      // A few rows of C use each element of B too few times to pay for packing it: their
      // tiles read B's rows where they lie (all but a last, narrower panel).
      const int64_t direct = !trans_b && m <= kDirectRows ? cols / width * width : 0;
      PackB(trans_b, b, ldb, p0, depth, j0 + direct, cols - direct, width, scratch.b.get());
      for (int64_t i0 = 0; i0 < m; i0 += kBlockRows) {
        const int64_t rows = std::min(kBlockRows, m - i0);
        PackA(trans_a, a, lda, i0, rows, p0, depth, scratch.a.get());
        // Many rows: an A panel stays in L1 while the block's B panels pass under it, and
        // C's rows are written along their length. A few: each B panel stays in L1 while
        // the few A panels pass under it.
        const int64_t row_panels = (rows + kRows - 1) / kRows,
                      col_panels = (cols + width - 1) / width;
        const bool b_outer = direct > 0;
        for (int64_t t = 0; t < row_panels * col_panels; ++t) {
          const int64_t ip = b_outer ? t % row_panels : t / col_panels;
          const int64_t jp = b_outer ? t / row_panels : t % col_panels;
          const int64_t row = i0 + ip * kRows, col = jp * width;
          float* sums = acc ? acc + row * stride + col : nullptr;
          const float* ap = scratch.a.get() + ip * depth * kRows;
          const bool packed = col >= direct;
          const float* bp = packed ? scratch.b.get() + (col - direct) / width * depth * width
                                   : b + p0 * ldb + j0 + col;
          const int64_t b_stride = packed ? width : ldb;
          if (!final) {
            Tile(ap, bp, b_stride, depth, first ? nullptr : sums, stride, sums, stride);
            continue;
          }
          if (row + kRows <= m && col + width <= cols) {
            const Finish into{c + row * ldc + j0 + col, ldc, alpha, beta};
            Tile(ap, bp, b_stride, depth, first ? nullptr : sums, stride, nullptr, 0, &into);
            continue;
          }
          Tile(ap, bp, b_stride, depth, first ? nullptr : sums, stride, last, width);
          for (int64_t r = 0; r < std::min(kRows, m - row); ++r)
            FinishRow(last + r * width, Finish{c + (row + r) * ldc + j0 + col, ldc, alpha, beta},
                      std::min(width, cols - col));
        }
      }
    }
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
