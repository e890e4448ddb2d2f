#pragma once
// Element-wise loops of the CPU kernels on SIMD vectors (Google Highway), compiled for
// several instruction sets and dispatched at run time to the best one the machine has
// (AVX-512, AVX2, SSE4, baseline). An element's result depends only on its inputs, never
// on where it lies in the array (a tail runs through the same instructions on a padded
// copy), so a tensor split across ranks gives the same bits as the whole one.
//
// Add, Scale, Adam and the maps below use exactly the scalar code's operations (no fused
// multiply-add): same bits as before. Exp is Highway's (at most 1 ulp from libm's expf); Gelu and
// GeluGrad compute the normal CDF through an erfc approximation (vector_math_test states
// its distance from libm's erff).

#include <cstdint>

namespace pw::ops::cpu {

// y = x * Phi(x)
void GeluF32(const float* x, float* y, int64_t n);
// dx = g * (Phi(x) + x * phi(x))
void GeluGradF32(const float* x, const float* g, float* dx, int64_t n);
// y = exp(x - shift)
void ExpShiftedF32(const float* x, float shift, float* y, int64_t n);
// y = a + b
void AddF32(const float* a, const float* b, float* y, int64_t n);
// y = scale * x + bias
void ScaleF32(const float* x, float scale, float bias, float* y, int64_t n);

struct AdamStepF32 {
  float beta1, beta2, lr_t, eps_t;  // lr_t and eps_t carry the bias corrections
};
// m1' = b1·m1 + (1-b1)·g; m2' = b2·m2 + (1-b2)·g·g; p' = p - lr_t·m1' / (sqrt(m2') + eps_t).
// Outputs may alias their inputs.
void AdamF32(const AdamStepF32& step, const float* p, const float* g, const float* m1,
             const float* m2, float* p_out, float* m1_out, float* m2_out, int64_t n);

// One layer-norm row of n elements: mean and variance summed in double, then
// y = (x - mean)·rstd·scale + bias in f32 (no fused multiply-add).
void LayerNormRowF32(const float* x, const float* scale, const float* bias, double epsilon,
                     float* y, float* mean, float* rstd, int64_t n);
// Its input gradient for one row: x̂ = (x - mean)·rstd and g = dy·scale into the scratch
// rows `xhat` and `g`, then dx = rstd·(g - mean(g) - x̂·mean(g·x̂)), the means summed in
// double.
void LayerNormGradRowF32(const float* x, const float* dy, const float* scale, float mean,
                         float rstd, float* xhat, float* g, float* dx, int64_t n);
// acc += dy·(x - mean)·rstd, element by element (the scale gradient's sum over rows).
void AddScaledDeviationF32(const float* dy, const float* x, float mean, float rstd, float* acc,
                           int64_t n);

// One rms-norm row of n elements: the sum of squares in double, then y = (x·rstd)·scale
// in f32.
void RmsNormRowF32(const float* x, const float* scale, double epsilon, float* y, float* rstd,
                   int64_t n);
// Its input gradient for one row: x̂ = x·rstd and g = dy·scale into the scratch rows `xhat`
// and `g`, then dx = rstd·(g - x̂·mean(g·x̂)), the mean summed in double. (The scale
// gradient's sum over rows is AddScaledDeviationF32 with mean 0.)
void RmsNormGradRowF32(const float* x, const float* dy, const float* scale, float rstd, float* xhat,
                       float* g, float* dx, int64_t n);

// out = silu(gate)·up, silu(x) = x·sigmoid(x); the sigmoid from exp(-|x|), which never
// overflows.
void SwigluF32(const float* gate, const float* up, float* out, int64_t n);
// dgate = dout·up·silu'(gate), silu' = s·(1 + x·(1 - s)); dup = dout·silu(gate).
void SwigluGradF32(const float* gate, const float* up, const float* dout, float* dgate, float* dup,
                   int64_t n);

// One run of rotary pairs: out1 = x1·c - x2·s, out2 = x2·c + x1·s (outputs may alias
// inputs).
void RotateHalvesF32(const float* x1, const float* x2, const float* c, const float* s, float* out1,
                     float* out2, int64_t n);

// Row reductions and maps of softmax, its gradients and the optimizers. Sums accumulate
// in double per lane (then the tail in order): the same bits for the same row every time.
float MaxF32(const float* x, int64_t n);                   // n >= 1
double SumF32(const float* x, int64_t n);                  // Σ x, in double
double DotF32(const float* a, const float* b, int64_t n);  // Σ (a·b rounded to f32), in double
// out = y · (dy - c)
void MulDifferenceF32(const float* y, const float* dy, float c, float* out, int64_t n);
// y = x · s
void MulScalarF32(const float* x, float s, float* y, int64_t n);
// out = p - lr · g
void SubScaledF32(const float* p, const float* g, float lr, float* out, int64_t n);

// y[0, valid) = softmax(x[0, valid)), y[valid, n) = 0; x and y may be the same row.
// Returns the max of x[0, valid); `log_sum` (optional) gets log Σ exp(x - max).
float SoftmaxRowF32(const float* x, float* y, int64_t n, int64_t valid, double* log_sum);

// bf16 <-> f32 with ops/low_precision.h's rounding (to nearest even; NaN stays NaN, quiet):
// the same bits as Bf16ToFloat / FloatToBf16 element by element.
void WidenBf16ToF32(const uint16_t* src, float* dst, int64_t n);
void NarrowF32ToBf16(const float* src, uint16_t* dst, int64_t n);

// The instruction set the dispatch chose, e.g. "AVX3" (AVX-512) or "AVX2".
const char* VectorTargetName();

}  // namespace pw::ops::cpu
