// The SIMD loops of the CPU kernels: same bits as the scalar code where they promise it
// (add, scale, adam), an element's result independent of its position, and the accuracy
// of exp and of the GELU's normal CDF against libm. Every test runs once per instruction
// set the build compiles and this machine runs (AVX-512, AVX2, SSE4, ..., scalar): a run
// only ever dispatches to the best one, so the others are checked only here.

#include "ops/kernels/cpu/vector_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "hwy/targets.h"
#include "hwy/tests/hwy_gtest.h"
#include "ops/kernels/cpu/math_module.h"
#include "ops/low_precision.h"

namespace pw::ops::cpu {
namespace {

std::vector<float> Random(int64_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Each test once per Highway target: the dispatch is restricted to that one.
class VectorMath : public hwy::TestWithParamTarget {
 protected:
  void SetUp() override {
    hwy::TestWithParamTarget::SetUp();
    ASSERT_STREQ(VectorTargetName(), hwy::TargetName(GetParam()));
  }
};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(VectorMath);

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// Distance in units in the last place between two finite floats of the same sign.
int64_t Ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::abs(static_cast<int64_t>(ia) - static_cast<int64_t>(ib));
}

TEST_P(VectorMath, AddAndScaleMatchTheScalarCodeForEveryLength) {
  for (int64_t n = 0; n < 70; ++n) {
    std::vector<float> a = Random(n, -3, 3, 1), b = Random(n, -3, 3, 2), y(n), s(n);
    AddF32(a.data(), b.data(), y.data(), n);
    ScaleF32(a.data(), 0.37f, -1.25f, s.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_TRUE(SameBits(y[i], a[i] + b[i])) << n << " " << i;
      ASSERT_TRUE(SameBits(s[i], 0.37f * a[i] + -1.25f)) << n << " " << i;
    }
  }
}

TEST_P(VectorMath, AdamMatchesTheScalarUpdateInPlace) {
  const int64_t n = 1000 + 13;
  std::vector<float> p = Random(n, -1, 1, 3), g = Random(n, -1, 1, 4), m1 = Random(n, -1, 1, 5),
                     m2 = Random(n, 0, 1, 6);
  const AdamStepF32 s{0.9f, 0.999f, 1e-3f, 1e-8f};
  std::vector<float> want_p(n), want_m1(n), want_m2(n);
  for (int64_t i = 0; i < n; ++i) {
    want_m1[i] = s.beta1 * m1[i] + (1 - s.beta1) * g[i];
    want_m2[i] = s.beta2 * m2[i] + (1 - s.beta2) * g[i] * g[i];
    want_p[i] = p[i] - s.lr_t * want_m1[i] / (std::sqrt(want_m2[i]) + s.eps_t);
  }
  AdamF32(s, p.data(), g.data(), m1.data(), m2.data(), p.data(), m1.data(), m2.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(SameBits(p[i], want_p[i])) << i;
    ASSERT_TRUE(SameBits(m1[i], want_m1[i])) << i;
    ASSERT_TRUE(SameBits(m2[i], want_m2[i])) << i;
  }
}

// Layer norm's rows against the scalar code it replaced (sums in double, element by
// element in order): the statistics are the same floats but for the last bit (the double
// sums are added in another order before rounding), the element-wise parts use the same
// f32 operations, and the scale gradient's accumulation is the same bits.
TEST_P(VectorMath, LayerNormRowsMatchTheScalarCode) {
  for (int64_t n : {1, 2, 7, 16, 17, 33, 64, 100, 512, 515}) {
    const std::vector<float> x = Random(n, -4, 4, 11), scale = Random(n, 0.5f, 2, 12),
                             bias = Random(n, -1, 1, 13), dy = Random(n, -1, 1, 14);
    const double eps = 1e-5;
    double sum = 0, var = 0;
    for (float v : x) sum += v;
    const double mu = sum / n;
    for (float v : x) var += (v - mu) * (v - mu);
    var /= n;
    const float m = static_cast<float>(mu), rs = static_cast<float>(1.0 / std::sqrt(var + eps));
    std::vector<float> y(n);
    float mean = 0, rstd = 0;
    LayerNormRowF32(x.data(), scale.data(), bias.data(), eps, y.data(), &mean, &rstd, n);
    EXPECT_LE(Ulps(mean, m), 1) << n;
    EXPECT_LE(Ulps(rstd, rs), 1) << n;
    for (int64_t j = 0; j < n; ++j)
      ASSERT_TRUE(SameBits(y[j], (x[j] - mean) * rstd * scale[j] + bias[j])) << n << " " << j;

    std::vector<float> xhat(n), g(n), dx(n);
    LayerNormGradRowF32(x.data(), dy.data(), scale.data(), m, rs, xhat.data(), g.data(), dx.data(),
                        n);
    double sum_g = 0, sum_gx = 0;
    for (int64_t j = 0; j < n; ++j) {
      const float xh = (x[j] - m) * rs, gj = dy[j] * scale[j];
      ASSERT_TRUE(SameBits(xhat[j], xh) && SameBits(g[j], gj)) << n << " " << j;
      sum_g += gj;
      sum_gx += gj * xh;
    }
    const float mg = static_cast<float>(sum_g / n), mgx = static_cast<float>(sum_gx / n);
    for (int64_t j = 0; j < n; ++j)
      EXPECT_NEAR(dx[j], rs * (g[j] - mg - xhat[j] * mgx), 1e-6f * (1 + std::fabs(dx[j])))
          << n << " " << j;

    std::vector<float> acc = Random(n, -1, 1, 15), want = acc;
    AddScaledDeviationF32(dy.data(), x.data(), m, rs, acc.data(), n);
    for (int64_t j = 0; j < n; ++j) want[j] += dy[j] * (x[j] - m) * rs;
    EXPECT_EQ(std::memcmp(acc.data(), want.data(), n * sizeof(float)), 0) << n;
  }
}

TEST_P(VectorMath, RmsNormRowsMatchTheScalarCode) {
  for (int64_t n : {1, 2, 7, 16, 17, 33, 64, 100, 512, 515}) {
    const std::vector<float> x = Random(n, -4, 4, 31), scale = Random(n, 0.5f, 2, 32),
                             dy = Random(n, -1, 1, 33);
    const double eps = 1e-5;
    double squares = 0;
    for (float v : x) squares += static_cast<double>(v) * v;
    const float rs = static_cast<float>(1.0 / std::sqrt(squares / n + eps));
    std::vector<float> y(n);
    float rstd = 0;
    RmsNormRowF32(x.data(), scale.data(), eps, y.data(), &rstd, n);
    EXPECT_LE(Ulps(rstd, rs), 1) << n;
    for (int64_t j = 0; j < n; ++j)
      ASSERT_TRUE(SameBits(y[j], x[j] * rstd * scale[j])) << n << " " << j;

    std::vector<float> xhat(n), g(n), dx(n);
    RmsNormGradRowF32(x.data(), dy.data(), scale.data(), rs, xhat.data(), g.data(), dx.data(), n);
    double sum_gx = 0;
    for (int64_t j = 0; j < n; ++j) {
      const float xh = x[j] * rs, gj = dy[j] * scale[j];
      ASSERT_TRUE(SameBits(xhat[j], xh) && SameBits(g[j], gj)) << n << " " << j;
      sum_gx += gj * xh;
    }
    const float mgx = static_cast<float>(sum_gx / n);
    for (int64_t j = 0; j < n; ++j)
      EXPECT_NEAR(dx[j], rs * (g[j] - xhat[j] * mgx), 1e-6f * (1 + std::fabs(dx[j])))
          << n << " " << j;
  }
}

TEST_P(VectorMath, RotateHalvesMatchTheScalarCodeInPlace) {
  for (int64_t n : {1, 3, 8, 17, 64, 67}) {
    const std::vector<float> a = Random(n, -3, 3, 41), b = Random(n, -3, 3, 42),
                             c = Random(n, -1, 1, 43), s = Random(n, -1, 1, 44);
    std::vector<float> x1 = a, x2 = b;
    RotateHalvesF32(x1.data(), x2.data(), c.data(), s.data(), x1.data(), x2.data(), n);
    for (int64_t j = 0; j < n; ++j) {
      ASSERT_TRUE(SameBits(x1[j], a[j] * c[j] - b[j] * s[j])) << n << " " << j;
      ASSERT_TRUE(SameBits(x2[j], b[j] * c[j] + a[j] * s[j])) << n << " " << j;
    }
  }
}

// silu(g)·u and its gradients against the formulas in double, over a range wide enough
// for exp(-|x|) to underflow: relative errors where the value is not tiny (the gate's
// gradient against the size of its terms).
TEST_P(VectorMath, SwigluAccuracyAgainstLibm) {
  const int64_t n = 200000;
  const std::vector<float> g = Random(n, -30, 30, 51), u = Random(n, -2, 2, 52),
                           dy = Random(n, -1, 1, 53);
  std::vector<float> out(n), dg(n), du(n);
  SwigluF32(g.data(), u.data(), out.data(), n);
  SwigluGradF32(g.data(), u.data(), dy.data(), dg.data(), du.data(), n);
  double out_err = 0, dg_err = 0, du_err = 0;
  auto rel = [](double got, double want) {
    return std::abs(want) > 1e-6 ? std::abs(got - want) / std::abs(want) : 0.0;
  };
  for (int64_t i = 0; i < n; ++i) {
    const double x = g[i], s = 1 / (1 + std::exp(-x)), silu = x * s;
    out_err = std::max(out_err, rel(out[i], silu * u[i]));
    // Near silu's minimum the slope cancels: measured against the size of its terms.
    const double terms = std::abs(dy[i] * u[i]) * s * (1 + std::abs(x) * (1 - s));
    if (terms > 1e-6)
      dg_err = std::max(dg_err, std::abs(dg[i] - dy[i] * u[i] * s * (1 + x * (1 - s))) / terms);
    du_err = std::max(du_err, rel(du[i], dy[i] * silu));
    ASSERT_TRUE(std::isfinite(out[i]) && std::isfinite(dg[i]) && std::isfinite(du[i])) << g[i];
  }
  std::printf("swiglu on [-30, 30]: max rel error %.3g, grads %.3g (gate) %.3g (up) (%s)\n",
              out_err, dg_err, du_err, VectorTargetName());
  EXPECT_LT(out_err, 1e-6);
  EXPECT_LT(du_err, 1e-6);
  EXPECT_LT(dg_err, 4e-6);
}

// The row helpers of softmax, its gradients and SGD: maxima exact, maps with the scalar
// code's f32 operations (same bits), sums in double within rounding of the in-order sums.
TEST_P(VectorMath, RowHelpersMatchTheScalarCode) {
  for (int64_t n : {1, 2, 7, 16, 17, 33, 128, 1000, 1027}) {
    const std::vector<float> a = Random(n, -5, 5, 21), b = Random(n, -2, 2, 22);
    float mx = a[0];
    double sum = 0, dot = 0;
    for (int64_t j = 0; j < n; ++j) {
      mx = std::max(mx, a[j]);
      sum += a[j];
      dot += a[j] * b[j];
    }
    EXPECT_TRUE(SameBits(MaxF32(a.data(), n), mx)) << n;
    EXPECT_NEAR(SumF32(a.data(), n), sum, 1e-12 * n) << n;
    EXPECT_NEAR(DotF32(a.data(), b.data(), n), dot, 1e-12 * n) << n;

    std::vector<float> out(n), scaled(n), stepped(n);
    MulDifferenceF32(a.data(), b.data(), 0.375f, out.data(), n);
    MulScalarF32(a.data(), -1.5f, scaled.data(), n);
    SubScaledF32(a.data(), b.data(), 0.01f, stepped.data(), n);
    for (int64_t j = 0; j < n; ++j) {
      ASSERT_TRUE(SameBits(out[j], a[j] * (b[j] - 0.375f))) << n << " " << j;
      ASSERT_TRUE(SameBits(scaled[j], a[j] * -1.5f)) << n << " " << j;
      ASSERT_TRUE(SameBits(stepped[j], a[j] - 0.01f * b[j])) << n << " " << j;
    }

    // Softmax of the first `valid` entries, in place, zeros after them.
    const int64_t valid = (n + 1) / 2;
    std::vector<float> row = a;
    double log_sum = 0;
    const float row_max = SoftmaxRowF32(row.data(), row.data(), n, valid, &log_sum);
    EXPECT_TRUE(SameBits(row_max, MaxF32(a.data(), valid)));
    double total = 0, exp_sum = 0;
    for (int64_t j = 0; j < valid; ++j) {
      total += row[j];
      exp_sum += std::exp(static_cast<double>(a[j]) - row_max);
    }
    EXPECT_NEAR(total, 1.0, 1e-6) << n;
    EXPECT_NEAR(log_sum, std::log(exp_sum), 1e-6) << n;
    for (int64_t j = valid; j < n; ++j) ASSERT_EQ(row[j], 0.f) << n << " " << j;
  }
}

// bf16 conversions on vectors against the scalar ones, bit for bit: every bf16 value
// widened, and f32 values around every rounding case (ties to even both ways, the largest
// finite values, infinities, NaNs with payloads, subnormals) narrowed, at lengths with tails.
TEST_P(VectorMath, Bf16ConversionsMatchTheScalarOnesBitForBit) {
  std::vector<uint16_t> all(65536 + 5);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> wide(all.size());
  WidenBf16ToF32(all.data(), wide.data(), static_cast<int64_t>(all.size()));
  for (size_t i = 0; i < all.size(); ++i)
    ASSERT_TRUE(SameBits(wide[i], ops::Bf16ToFloat(all[i]))) << i;

  std::vector<float> x;
  for (uint32_t hi = 0; hi < 65536; hi += 7)
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      const uint32_t bits = hi << 16 | lo;
      float f;
      std::memcpy(&f, &bits, sizeof(f));
      x.push_back(f);
    }
  for (int64_t n : {static_cast<int64_t>(x.size()), int64_t{13}}) {
    std::vector<uint16_t> narrow(n);
    NarrowF32ToBf16(x.data(), narrow.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(narrow[i], ops::FloatToBf16(x[i])) << i;
  }
}

TEST_P(VectorMath, ResultsDoNotDependOnPosition) {
  const std::vector<float> x = Random(257, -6, 6, 7);
  std::vector<float> whole(x.size());
  GeluF32(x.data(), whole.data(), x.size());
  for (int64_t offset : {1, 3, 17, 250}) {
    std::vector<float> part(x.size() - offset);
    GeluF32(x.data() + offset, part.data(), part.size());
    for (size_t i = 0; i < part.size(); ++i)
      ASSERT_TRUE(SameBits(part[i], whole[i + offset])) << offset << " " << i;
  }
}

TEST_P(VectorMath, ExpIsWithinOneUlpOfLibm) {
  const std::vector<float> x = Random(100000, -87, 0, 8);
  std::vector<float> y(x.size());
  ExpShiftedF32(x.data(), 0.f, y.data(), x.size());
  int64_t worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, Ulps(y[i], std::exp(x[i])));
  std::printf("exp: at most %lld ulp from expf on [-87, 0] (%s)\n", static_cast<long long>(worst),
              VectorTargetName());
  EXPECT_LE(worst, 1);
}

// The GELU against 0.5·x·(1 + erf(x/√2)) in double: the largest absolute error (the
// scale of the values near 0) and relative error where |gelu| > 1e-3.
TEST_P(VectorMath, GeluAccuracyAgainstLibm) {
  const std::vector<float> x = Random(200000, -10, 10, 9);
  std::vector<float> y(x.size()), dy(x.size()), ones(x.size(), 1.f);
  GeluF32(x.data(), y.data(), x.size());
  GeluGradF32(x.data(), ones.data(), dy.data(), x.size());
  double abs_err = 0, rel_err = 0, grad_abs_err = 0, libm_abs_err = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double xi = x[i];
    const double want = 0.5 * xi * (1 + std::erf(xi / std::sqrt(2.0)));
    const double want_grad = 0.5 * (1 + std::erf(xi / std::sqrt(2.0))) +
                             xi * std::exp(-0.5 * xi * xi) / std::sqrt(2 * M_PI);
    const float libm = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
    abs_err = std::max(abs_err, std::abs(y[i] - want));
    libm_abs_err = std::max(libm_abs_err, std::abs(libm - want));
    if (std::abs(want) > 1e-3) rel_err = std::max(rel_err, std::abs(y[i] - want) / std::abs(want));
    grad_abs_err = std::max(grad_abs_err, std::abs(dy[i] - want_grad));
  }
  std::printf(
      "gelu on [-10, 10]: max abs error %.3g (libm erff formula: %.3g), max rel error %.3g "
      "where |gelu| > 1e-3; gelu_grad max abs error %.3g (%s)\n",
      abs_err, libm_abs_err, rel_err, grad_abs_err, VectorTargetName());
  EXPECT_LT(abs_err, 4 * libm_abs_err + 1e-6);
  EXPECT_LT(rel_err, 2e-6);
  EXPECT_LT(grad_abs_err, 2e-6);
}

// The ordered GEMM (ordered_gemm.h): every element is one running f32 sum over k in
// ascending order (each product added by one multiply-add, fused where the target has FMA),
// scaled by alpha and beta once, so C cut anywhere by rows or columns gives the uncut
// product's bits; shapes with edges in every panel and block, K over several slices.
TEST_P(VectorMath, OrderedGemmIsOneSumInAscendingKWhereverCIsCut) {
  const auto gemm = CpuMath().ordered_sgemm;
  struct Shape {
    bool trans_a, trans_b;
    int64_t m, n, k;
    float beta;
  };
  const Shape shapes[] = {{false, false, 77, 530, 600, 0.f},  {false, true, 150, 45, 257, 0.25f},
                          {true, false, 13, 1100, 31, 0.25f}, {true, true, 200, 70, 513, 0.f},
                          {false, false, 1, 1, 1, 0.f},       {false, true, 6, 17, 256, 0.25f}};
  for (const Shape& s : shapes) {
    SCOPED_TRACE(::testing::Message() << s.m << "x" << s.n << "x" << s.k << " trans " << s.trans_a
                                      << s.trans_b << " beta " << s.beta);
    const int64_t pad = 3;
    const int64_t lda = (s.trans_a ? s.m : s.k) + pad, ldb = (s.trans_b ? s.k : s.n) + pad;
    const int64_t ldc = s.n + pad;
    const std::vector<float> a = Random((s.trans_a ? s.k : s.m) * lda, -1, 1, 3);
    const std::vector<float> b = Random((s.trans_b ? s.n : s.k) * ldb, -1, 1, 4);
    const std::vector<float> c0 = Random(s.m * ldc, -1, 1, 5);
    auto at = [&](int64_t i, int64_t p) { return s.trans_a ? a[p * lda + i] : a[i * lda + p]; };
    auto bt = [&](int64_t p, int64_t j) { return s.trans_b ? b[j * ldb + p] : b[p * ldb + j]; };
    const float alpha = 0.5f;
    std::vector<float> whole = c0;
    gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, alpha, a.data(), lda, b.data(), ldb, s.beta,
         whole.data(), ldc);
    // The order: the scalar sum, fused or not as the target's multiply-add is.
    int fused = -1;
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        float sum_fused = 0, sum_plain = 0;
        for (int64_t p = 0; p < s.k; ++p) {
          sum_fused = std::fma(at(i, p), bt(p, j), sum_fused);
          sum_plain = at(i, p) * bt(p, j) + sum_plain;
        }
        const float c = c0[i * ldc + j];
        const float want_fused =
            s.beta == 0 ? alpha * sum_fused : std::fma(alpha, sum_fused, s.beta * c);
        const float want_plain = s.beta == 0 ? alpha * sum_plain : alpha * sum_plain + s.beta * c;
        const float got = whole[i * ldc + j];
        if (fused < 0 && !SameBits(want_fused, want_plain))
          fused = SameBits(got, want_fused) ? 1 : 0;
        ASSERT_TRUE(SameBits(got, fused == 0 ? want_plain : want_fused))
            << "(" << i << ", " << j << "): " << got << " against " << want_fused << " fused, "
            << want_plain << " not";
      }
    // Cuts: every piece computed alone gives the whole's bits.
    for (int64_t cut : {int64_t{1}, int64_t{7}, s.n / 2, s.n - 1}) {
      if (cut <= 0 || cut >= s.n) continue;
      std::vector<float> pieces = c0;
      gemm(s.trans_a, s.trans_b, s.m, cut, s.k, alpha, a.data(), lda, b.data(), ldb, s.beta,
           pieces.data(), ldc);
      gemm(s.trans_a, s.trans_b, s.m, s.n - cut, s.k, alpha, a.data(), lda,
           s.trans_b ? b.data() + cut * ldb : b.data() + cut, ldb, s.beta, pieces.data() + cut,
           ldc);
      EXPECT_EQ(std::memcmp(pieces.data(), whole.data(), pieces.size() * sizeof(float)), 0)
          << "columns cut at " << cut;
    }
    for (int64_t cut : {int64_t{1}, int64_t{5}, s.m / 2, s.m - 1}) {
      if (cut <= 0 || cut >= s.m) continue;
      std::vector<float> pieces = c0;
      gemm(s.trans_a, s.trans_b, cut, s.n, s.k, alpha, a.data(), lda, b.data(), ldb, s.beta,
           pieces.data(), ldc);
      gemm(s.trans_a, s.trans_b, s.m - cut, s.n, s.k, alpha,
           s.trans_a ? a.data() + cut : a.data() + cut * lda, lda, b.data(), ldb, s.beta,
           pieces.data() + cut * ldc, ldc);
      EXPECT_EQ(std::memcmp(pieces.data(), whole.data(), pieces.size() * sizeof(float)), 0)
          << "rows cut at " << cut;
    }
  }
}

}  // namespace
}  // namespace pw::ops::cpu
