// Highway compiles this file once per target (foreach_target.h re-includes it); the
// HWY_ONCE part at the end dispatches to the best compiled target.

#include "ops/kernels/cpu/vector_math.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "ops/low_precision.h"

// The order matters: foreach_target.h, then highway.h, then the -inl.h headers.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/kernels/cpu/vector_math.cc"
#include "hwy/foreach_target.h"
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace pw::ops::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;
using V = hn::Vec<D>;

constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);

// Calls body(in, out, i) for every whole vector at offset i, then once more on padded
// copies of the tail, so every element goes through the same instructions.
template <size_t kIn, size_t kOut, class Body>
void ForEachVector(std::array<const float*, kIn> in, std::array<float*, kOut> out, int64_t n,
                   Body body) {
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) body(in, out, i);
  const int64_t rest = n - i;
  if (rest == 0) return;
  HWY_ALIGN float in_pad[kIn == 0 ? 1 : kIn][kMaxLanes] = {};
  HWY_ALIGN float out_pad[kOut][kMaxLanes] = {};
  std::array<const float*, kIn> tail_in;
  std::array<float*, kOut> tail_out;
  for (size_t k = 0; k < kIn; ++k) {
    std::memcpy(in_pad[k], in[k] + i, rest * sizeof(float));
    tail_in[k] = in_pad[k];
  }
  for (size_t k = 0; k < kOut; ++k) tail_out[k] = out_pad[k];
  body(tail_in, tail_out, 0);
  for (size_t k = 0; k < kOut; ++k) std::memcpy(out[k] + i, out_pad[k], rest * sizeof(float));
}

// The standard normal CDF from erfc(|x|/sqrt 2), the Chebyshev fit of Numerical Recipes
// (relative error < 1.2e-7 in exact arithmetic): Phi = 1 - erfc/2 for x >= 0, erfc/2
// below. No 1 + erf(x) cancellation for negative x.
V NormalCdf(D d, V x) {
  const V z = hn::Mul(hn::Abs(x), hn::Set(d, 0.70710678118654752f));
  const V t = hn::Div(hn::Set(d, 1.0f), hn::MulAdd(hn::Set(d, 0.5f), z, hn::Set(d, 1.0f)));
  V poly = hn::Set(d, 0.17087277f);
  for (float c : {-0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f, -0.18628806f, 0.09678418f,
                  0.37409196f, 1.00002368f, -1.26551223f})
    poly = hn::MulAdd(poly, t, hn::Set(d, c));
  const V half_erfc = hn::Mul(hn::Mul(hn::Set(d, 0.5f), t), hn::Exp(d, hn::NegMulAdd(z, z, poly)));
  return hn::IfThenElse(hn::Lt(x, hn::Zero(d)), half_erfc, hn::Sub(hn::Set(d, 1.0f), half_erfc));
}

void Gelu(const float* x, float* y, int64_t n) {
  const D d;
  ForEachVector<1, 1>({x}, {y}, n, [d](auto in, auto out, int64_t i) {
    const V v = hn::LoadU(d, in[0] + i);
    hn::StoreU(hn::Mul(v, NormalCdf(d, v)), d, out[0] + i);
  });
}

void GeluGrad(const float* x, const float* g, float* dx, int64_t n) {
  const D d;
  ForEachVector<2, 1>({x, g}, {dx}, n, [d](auto in, auto out, int64_t i) {
    const V v = hn::LoadU(d, in[0] + i);
    const V pdf = hn::Mul(hn::Set(d, 0.39894228040143268f),
                          hn::Exp(d, hn::Mul(hn::Set(d, -0.5f), hn::Mul(v, v))));
    const V slope = hn::MulAdd(v, pdf, NormalCdf(d, v));
    hn::StoreU(hn::Mul(hn::LoadU(d, in[1] + i), slope), d, out[0] + i);
  });
}

void ExpShifted(const float* x, float shift, float* y, int64_t n) {
  const D d;
  ForEachVector<1, 1>({x}, {y}, n, [d, shift](auto in, auto out, int64_t i) {
    hn::StoreU(hn::Exp(d, hn::Sub(hn::LoadU(d, in[0] + i), hn::Set(d, shift))), d, out[0] + i);
  });
}

void Add(const float* a, const float* b, float* y, int64_t n) {
  const D d;
  ForEachVector<2, 1>({a, b}, {y}, n, [d](auto in, auto out, int64_t i) {
    hn::StoreU(hn::Add(hn::LoadU(d, in[0] + i), hn::LoadU(d, in[1] + i)), d, out[0] + i);
  });
}

void Scale(const float* x, float scale, float bias, float* y, int64_t n) {
  const D d;
  ForEachVector<1, 1>({x}, {y}, n, [d, scale, bias](auto in, auto out, int64_t i) {
    const V scaled = hn::Mul(hn::Set(d, scale), hn::LoadU(d, in[0] + i));
    hn::StoreU(hn::Add(scaled, hn::Set(d, bias)), d, out[0] + i);
  });
}

// The scalar update's operations in its order, without fused multiply-adds.
void Adam(const AdamStepF32& s, const float* p, const float* g, const float* m1, const float* m2,
          float* p_out, float* m1_out, float* m2_out, int64_t n) {
  const D d;
  ForEachVector<4, 3>(
      {p, g, m1, m2}, {p_out, m1_out, m2_out}, n, [d, s](auto in, auto out, int64_t i) {
        const V b1 = hn::Set(d, s.beta1), b2 = hn::Set(d, s.beta2);
        const V gi = hn::LoadU(d, in[1] + i);
        const V m1i =
            hn::Add(hn::Mul(b1, hn::LoadU(d, in[2] + i)), hn::Mul(hn::Set(d, 1 - s.beta1), gi));
        const V m2i = hn::Add(hn::Mul(b2, hn::LoadU(d, in[3] + i)),
                              hn::Mul(hn::Mul(hn::Set(d, 1 - s.beta2), gi), gi));
        const V step =
            hn::Div(hn::Mul(hn::Set(d, s.lr_t), m1i), hn::Add(hn::Sqrt(m2i), hn::Set(d, s.eps_t)));
        const V pi = hn::Sub(hn::LoadU(d, in[0] + i), step);
        hn::StoreU(pi, d, out[0] + i);
        hn::StoreU(m1i, d, out[1] + i);
        hn::StoreU(m2i, d, out[2] + i);
      });
}

// Layer norm's rows. Sums accumulate in double, one partial sum per lane, added up at the
// end and then the tail's elements in order: the same bits for the same row every time.
// Float vectors as wide (in lanes) as a double vector, so each promotes to one.
using DD = hn::ScalableTag<double>;
using DH = hn::Rebind<float, DD>;

// The sum in double of term(i) over [0, n): term(dh, i) gives the floats at [i, i + lanes);
// `tail(i)` gives one float past the last whole vector.
template <class Term, class Tail>
double SumInDouble(int64_t n, Term term, Tail tail) {
  const DD dd;
  const DH dh;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(dd));
  auto acc = hn::Zero(dd);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) acc = hn::Add(acc, term(dh, dd, i));
  double sum = hn::GetLane(hn::SumOfLanes(dd, acc));
  for (; i < n; ++i) sum += tail(i);
  return sum;
}

double Sum(const float* x, int64_t n) {
  return SumInDouble(
      n, [&](DH dh, DD dd, int64_t i) { return hn::PromoteTo(dd, hn::LoadU(dh, x + i)); },
      [&](int64_t i) { return static_cast<double>(x[i]); });
}

double Dot(const float* a, const float* b, int64_t n) {
  return SumInDouble(
      n,
      [&](DH dh, DD dd, int64_t i) {
        return hn::PromoteTo(dd, hn::Mul(hn::LoadU(dh, a + i), hn::LoadU(dh, b + i)));
      },
      [&](int64_t i) { return static_cast<double>(a[i] * b[i]); });
}

void LayerNormRow(const float* x, const float* scale, const float* bias, double eps, float* y,
                  float* mean, float* rstd, int64_t n) {
  const double mu = Sum(x, n) / static_cast<double>(n);
  // (x - mu)² in double: the square is taken after promotion, as the scalar code does.
  double var = SumInDouble(
      n,
      [&](DH dh, DD dd, int64_t i) {
        const auto a = hn::Sub(hn::PromoteTo(dd, hn::LoadU(dh, x + i)), hn::Set(dd, mu));
        return hn::Mul(a, a);
      },
      [&](int64_t i) { return (x[i] - mu) * (x[i] - mu); });
  var /= static_cast<double>(n);
  const D d;
  const float m = static_cast<float>(mu);
  const float rs = static_cast<float>(1.0 / std::sqrt(var + eps));
  *mean = m;
  *rstd = rs;
  ForEachVector<3, 1>({x, scale, bias}, {y}, n, [&](auto in, auto out, int64_t j) {
    const V xhat = hn::Mul(hn::Sub(hn::LoadU(d, in[0] + j), hn::Set(d, m)), hn::Set(d, rs));
    hn::StoreU(hn::Add(hn::Mul(xhat, hn::LoadU(d, in[1] + j)), hn::LoadU(d, in[2] + j)), d,
               out[0] + j);
  });
}

void LayerNormGradRow(const float* x, const float* dy, const float* scale, float mean, float rstd,
                      float* xhat, float* g, float* dx, int64_t n) {
  const D d;
  ForEachVector<3, 2>({x, dy, scale}, {xhat, g}, n, [&](auto in, auto out, int64_t j) {
    hn::StoreU(hn::Mul(hn::Sub(hn::LoadU(d, in[0] + j), hn::Set(d, mean)), hn::Set(d, rstd)), d,
               out[0] + j);
    hn::StoreU(hn::Mul(hn::LoadU(d, in[1] + j), hn::LoadU(d, in[2] + j)), d, out[1] + j);
  });
  const double sum_g = Sum(g, n);
  const double sum_gx = Dot(g, xhat, n);  // g·x̂ rounded to f32, then summed, as before
  const float mg = static_cast<float>(sum_g / static_cast<double>(n));
  const float mgx = static_cast<float>(sum_gx / static_cast<double>(n));
  ForEachVector<2, 1>({g, xhat}, {dx}, n, [&](auto in, auto out, int64_t j) {
    const V centred = hn::Sub(hn::LoadU(d, in[0] + j), hn::Set(d, mg));
    const V dxv = hn::Sub(centred, hn::Mul(hn::LoadU(d, in[1] + j), hn::Set(d, mgx)));
    hn::StoreU(hn::Mul(hn::Set(d, rstd), dxv), d, out[0] + j);
  });
}

void AddScaledDeviation(const float* dy, const float* x, float mean, float rstd, float* acc,
                        int64_t n) {
  const D d;
  ForEachVector<3, 1>({acc, dy, x}, {acc}, n, [&](auto in, auto out, int64_t j) {
    const V dev = hn::Sub(hn::LoadU(d, in[2] + j), hn::Set(d, mean));
    const V term = hn::Mul(hn::Mul(hn::LoadU(d, in[1] + j), dev), hn::Set(d, rstd));
    hn::StoreU(hn::Add(hn::LoadU(d, in[0] + j), term), d, out[0] + j);
  });
}

void RmsNormRow(const float* x, const float* scale, double eps, float* y, float* rstd, int64_t n) {
  // x² in double, after promotion.
  const double squares = SumInDouble(
      n,
      [&](DH dh, DD dd, int64_t i) {
        const auto a = hn::PromoteTo(dd, hn::LoadU(dh, x + i));
        return hn::Mul(a, a);
      },
      [&](int64_t i) { return static_cast<double>(x[i]) * x[i]; });
  const float rs = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(n) + eps));
  *rstd = rs;
  const D d;
  ForEachVector<2, 1>({x, scale}, {y}, n, [&](auto in, auto out, int64_t j) {
    const V xhat = hn::Mul(hn::LoadU(d, in[0] + j), hn::Set(d, rs));
    hn::StoreU(hn::Mul(xhat, hn::LoadU(d, in[1] + j)), d, out[0] + j);
  });
}

void RmsNormGradRow(const float* x, const float* dy, const float* scale, float rstd, float* xhat,
                    float* g, float* dx, int64_t n) {
  const D d;
  ForEachVector<3, 2>({x, dy, scale}, {xhat, g}, n, [&](auto in, auto out, int64_t j) {
    hn::StoreU(hn::Mul(hn::LoadU(d, in[0] + j), hn::Set(d, rstd)), d, out[0] + j);
    hn::StoreU(hn::Mul(hn::LoadU(d, in[1] + j), hn::LoadU(d, in[2] + j)), d, out[1] + j);
  });
  const float mgx = static_cast<float>(Dot(g, xhat, n) / static_cast<double>(n));
  ForEachVector<2, 1>({g, xhat}, {dx}, n, [&](auto in, auto out, int64_t j) {
    const V dxv =
        hn::Sub(hn::LoadU(d, in[0] + j), hn::Mul(hn::LoadU(d, in[1] + j), hn::Set(d, mgx)));
    hn::StoreU(hn::Mul(hn::Set(d, rstd), dxv), d, out[0] + j);
  });
}

// sigmoid(x) from e = exp(-|x|) <= 1: 1/(1 + e) for x >= 0, e/(1 + e) below.
V Sigmoid(D d, V x) {
  const V e = hn::Exp(d, hn::Neg(hn::Abs(x)));
  const V inv = hn::Div(hn::Set(d, 1.0f), hn::Add(hn::Set(d, 1.0f), e));
  return hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Mul(e, inv), inv);
}

void Swiglu(const float* gate, const float* up, float* out, int64_t n) {
  const D d;
  ForEachVector<2, 1>({gate, up}, {out}, n, [d](auto in, auto o, int64_t i) {
    const V g = hn::LoadU(d, in[0] + i);
    hn::StoreU(hn::Mul(hn::Mul(g, Sigmoid(d, g)), hn::LoadU(d, in[1] + i)), d, o[0] + i);
  });
}

void SwigluGrad(const float* gate, const float* up, const float* dout, float* dgate, float* dup,
                int64_t n) {
  const D d;
  ForEachVector<3, 2>({gate, up, dout}, {dgate, dup}, n, [d](auto in, auto o, int64_t i) {
    const V g = hn::LoadU(d, in[0] + i);
    const V u = hn::LoadU(d, in[1] + i);
    const V dy = hn::LoadU(d, in[2] + i);
    const V s = Sigmoid(d, g);
    const V silu = hn::Mul(g, s);
    const V slope = hn::Mul(s, hn::Add(hn::Set(d, 1.0f), hn::Mul(g, hn::Sub(hn::Set(d, 1.0f), s))));
    hn::StoreU(hn::Mul(hn::Mul(dy, u), slope), d, o[0] + i);
    hn::StoreU(hn::Mul(dy, silu), d, o[1] + i);
  });
}

void RotateHalves(const float* x1, const float* x2, const float* c, const float* s, float* out1,
                  float* out2, int64_t n) {
  const D d;
  ForEachVector<4, 2>({x1, x2, c, s}, {out1, out2}, n, [d](auto in, auto o, int64_t i) {
    const V a = hn::LoadU(d, in[0] + i);
    const V b = hn::LoadU(d, in[1] + i);
    const V cv = hn::LoadU(d, in[2] + i);
    const V sv = hn::LoadU(d, in[3] + i);
    const V first = hn::Sub(hn::Mul(a, cv), hn::Mul(b, sv));
    const V second = hn::Add(hn::Mul(b, cv), hn::Mul(a, sv));
    hn::StoreU(first, d, o[0] + i);
    hn::StoreU(second, d, o[1] + i);
  });
}

float Max(const float* x, int64_t n) {  // n >= 1; a maximum is exact in any order
  const D d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  float mx = x[0];
  int64_t i = 0;
  if (n >= lanes) {
    V acc = hn::LoadU(d, x);
    for (i = lanes; i + lanes <= n; i += lanes) acc = hn::Max(acc, hn::LoadU(d, x + i));
    mx = hn::GetLane(hn::MaxOfLanes(d, acc));
  }
  for (; i < n; ++i) mx = std::max(mx, x[i]);
  return mx;
}

void MulDifference(const float* y, const float* dy, float c, float* out, int64_t n) {
  const D d;
  ForEachVector<2, 1>({y, dy}, {out}, n, [&](auto in, auto o, int64_t i) {
    const V diff = hn::Sub(hn::LoadU(d, in[1] + i), hn::Set(d, c));
    hn::StoreU(hn::Mul(hn::LoadU(d, in[0] + i), diff), d, o[0] + i);
  });
}

void MulScalar(const float* x, float s, float* y, int64_t n) {
  const D d;
  ForEachVector<1, 1>({x}, {y}, n, [&](auto in, auto out, int64_t i) {
    hn::StoreU(hn::Mul(hn::LoadU(d, in[0] + i), hn::Set(d, s)), d, out[0] + i);
  });
}

void SubScaled(const float* p, const float* g, float lr, float* out, int64_t n) {
  const D d;
  ForEachVector<2, 1>({p, g}, {out}, n, [&](auto in, auto o, int64_t i) {
    const V step = hn::Mul(hn::Set(d, lr), hn::LoadU(d, in[1] + i));
    hn::StoreU(hn::Sub(hn::LoadU(d, in[0] + i), step), d, o[0] + i);
  });
}

// bf16 is the top half of an f32: widening shifts it up; narrowing rounds to nearest even
// with the scalar code's integer steps (a NaN keeps its top bits and is made quiet).
using DU32 = hn::Rebind<uint32_t, D>;
using DU16 = hn::Rebind<uint16_t, D>;

void WidenBf16(const uint16_t* src, float* dst, int64_t n) {
  const D d;
  const DU32 du32;
  const DU16 du16;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto wide = hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, src + i)));
    hn::StoreU(hn::BitCast(d, wide), d, dst + i);
  }
  for (; i < n; ++i) dst[i] = Bf16ToFloat(src[i]);
}

void NarrowBf16(const float* src, uint16_t* dst, int64_t n) {
  const D d;
  const DU32 du32;
  const DU16 du16;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto x = hn::BitCast(du32, hn::LoadU(d, src + i));
    const auto is_nan = hn::Gt(hn::And(x, hn::Set(du32, 0x7fffffffu)), hn::Set(du32, 0x7f800000u));
    const auto odd = hn::And(hn::ShiftRight<16>(x), hn::Set(du32, 1u));
    const auto rounded = hn::ShiftRight<16>(hn::Add(x, hn::Add(hn::Set(du32, 0x7fffu), odd)));
    const auto quiet_nan = hn::Or(hn::ShiftRight<16>(x), hn::Set(du32, 0x40u));
    // Every lane holds 16 bits now, so the saturating demotion from i32 keeps it as it is.
    const auto bf16 =
        hn::BitCast(hn::Rebind<int32_t, D>(), hn::IfThenElse(is_nan, quiet_nan, rounded));
    hn::StoreU(hn::DemoteTo(du16, bf16), du16, dst + i);
  }
  for (; i < n; ++i) dst[i] = FloatToBf16(src[i]);
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace pw::ops::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pw::ops::cpu {

HWY_EXPORT(Gelu);
HWY_EXPORT(GeluGrad);
HWY_EXPORT(ExpShifted);
HWY_EXPORT(Add);
HWY_EXPORT(Scale);
HWY_EXPORT(Adam);
HWY_EXPORT(LayerNormRow);
HWY_EXPORT(LayerNormGradRow);
HWY_EXPORT(AddScaledDeviation);
HWY_EXPORT(RmsNormRow);
HWY_EXPORT(RmsNormGradRow);
HWY_EXPORT(Swiglu);
HWY_EXPORT(SwigluGrad);
HWY_EXPORT(RotateHalves);
HWY_EXPORT(Max);
HWY_EXPORT(Sum);
HWY_EXPORT(Dot);
HWY_EXPORT(MulDifference);
HWY_EXPORT(MulScalar);
HWY_EXPORT(SubScaled);
HWY_EXPORT(WidenBf16);
HWY_EXPORT(NarrowBf16);
HWY_EXPORT(TargetName);

void GeluF32(const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(Gelu)(x, y, n); }
void GeluGradF32(const float* x, const float* g, float* dx, int64_t n) {
  HWY_DYNAMIC_DISPATCH(GeluGrad)(x, g, dx, n);
}
void ExpShiftedF32(const float* x, float shift, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(ExpShifted)(x, shift, y, n);
}
void AddF32(const float* a, const float* b, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(Add)(a, b, y, n);
}
void ScaleF32(const float* x, float scale, float bias, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(Scale)(x, scale, bias, y, n);
}
void AdamF32(const AdamStepF32& step, const float* p, const float* g, const float* m1,
             const float* m2, float* p_out, float* m1_out, float* m2_out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(Adam)(step, p, g, m1, m2, p_out, m1_out, m2_out, n);
}
const char* VectorTargetName() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

void LayerNormRowF32(const float* x, const float* scale, const float* bias, double epsilon,
                     float* y, float* mean, float* rstd, int64_t n) {
  HWY_DYNAMIC_DISPATCH(LayerNormRow)(x, scale, bias, epsilon, y, mean, rstd, n);
}
void LayerNormGradRowF32(const float* x, const float* dy, const float* scale, float mean,
                         float rstd, float* xhat, float* g, float* dx, int64_t n) {
  HWY_DYNAMIC_DISPATCH(LayerNormGradRow)(x, dy, scale, mean, rstd, xhat, g, dx, n);
}
void AddScaledDeviationF32(const float* dy, const float* x, float mean, float rstd, float* acc,
                           int64_t n) {
  HWY_DYNAMIC_DISPATCH(AddScaledDeviation)(dy, x, mean, rstd, acc, n);
}

void RmsNormRowF32(const float* x, const float* scale, double epsilon, float* y, float* rstd,
                   int64_t n) {
  HWY_DYNAMIC_DISPATCH(RmsNormRow)(x, scale, epsilon, y, rstd, n);
}
void RmsNormGradRowF32(const float* x, const float* dy, const float* scale, float rstd, float* xhat,
                       float* g, float* dx, int64_t n) {
  HWY_DYNAMIC_DISPATCH(RmsNormGradRow)(x, dy, scale, rstd, xhat, g, dx, n);
}
void SwigluF32(const float* gate, const float* up, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(Swiglu)(gate, up, out, n);
}
void SwigluGradF32(const float* gate, const float* up, const float* dout, float* dgate, float* dup,
                   int64_t n) {
  HWY_DYNAMIC_DISPATCH(SwigluGrad)(gate, up, dout, dgate, dup, n);
}
void RotateHalvesF32(const float* x1, const float* x2, const float* c, const float* s, float* out1,
                     float* out2, int64_t n) {
  HWY_DYNAMIC_DISPATCH(RotateHalves)(x1, x2, c, s, out1, out2, n);
}

float MaxF32(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(Max)(x, n); }
double SumF32(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(Sum)(x, n); }
double DotF32(const float* a, const float* b, int64_t n) {
  return HWY_DYNAMIC_DISPATCH(Dot)(a, b, n);
}
void MulDifferenceF32(const float* y, const float* dy, float c, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(MulDifference)(y, dy, c, out, n);
}
void MulScalarF32(const float* x, float s, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(MulScalar)(x, s, y, n);
}
void SubScaledF32(const float* p, const float* g, float lr, float* out, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SubScaled)(p, g, lr, out, n);
}

float SoftmaxRowF32(const float* x, float* y, int64_t n, int64_t valid, double* log_sum) {
  const float mx = valid > 0 ? MaxF32(x, valid) : 0.f;
  ExpShiftedF32(x, mx, y, valid);
  const double sum = SumF32(y, valid);
  ScaleF32(y, static_cast<float>(1.0 / sum), 0.f, y, valid);
  std::fill(y + valid, y + n, 0.f);
  if (log_sum) *log_sum = std::log(sum);
  return mx;
}

void WidenBf16ToF32(const uint16_t* src, float* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(WidenBf16)(src, dst, n);
}
void NarrowF32ToBf16(const float* src, uint16_t* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(NarrowBf16)(src, dst, n);
}

}  // namespace pw::ops::cpu
#endif  // HWY_ONCE
