// vector_math.h's functions in the programs and libraries that link pipeweave: each calls
// its counterpart in the CPU math module (math_module.h), which holds the Highway code.

#include "ops/kernels/cpu/math_module.h"
#include "ops/kernels/cpu/vector_math.h"

namespace pw::ops::cpu {

void GeluF32(const float* x, float* y, int64_t n) { CpuMath().gelu(x, y, n); }
void GeluGradF32(const float* x, const float* g, float* dx, int64_t n) {
  CpuMath().gelu_grad(x, g, dx, n);
}
void ExpShiftedF32(const float* x, float shift, float* y, int64_t n) {
  CpuMath().exp_shifted(x, shift, y, n);
}
void AddF32(const float* a, const float* b, float* y, int64_t n) { CpuMath().add(a, b, y, n); }
void ScaleF32(const float* x, float scale, float bias, float* y, int64_t n) {
  CpuMath().scale(x, scale, bias, y, n);
}
void AdamF32(const AdamStepF32& step, const float* p, const float* g, const float* m1,
             const float* m2, float* p_out, float* m1_out, float* m2_out, int64_t n) {
  CpuMath().adam(step, p, g, m1, m2, p_out, m1_out, m2_out, n);
}
void LayerNormRowF32(const float* x, const float* scale, const float* bias, double epsilon,
                     float* y, float* mean, float* rstd, int64_t n) {
  CpuMath().layer_norm_row(x, scale, bias, epsilon, y, mean, rstd, n);
}
void LayerNormGradRowF32(const float* x, const float* dy, const float* scale, float mean,
                         float rstd, float* xhat, float* g, float* dx, int64_t n) {
  CpuMath().layer_norm_grad_row(x, dy, scale, mean, rstd, xhat, g, dx, n);
}
void AddScaledDeviationF32(const float* dy, const float* x, float mean, float rstd, float* acc,
                           int64_t n) {
  CpuMath().add_scaled_deviation(dy, x, mean, rstd, acc, n);
}
void RmsNormRowF32(const float* x, const float* scale, double epsilon, float* y, float* rstd,
                   int64_t n) {
  CpuMath().rms_norm_row(x, scale, epsilon, y, rstd, n);
}
void RmsNormGradRowF32(const float* x, const float* dy, const float* scale, float rstd, float* xhat,
                       float* g, float* dx, int64_t n) {
  CpuMath().rms_norm_grad_row(x, dy, scale, rstd, xhat, g, dx, n);
}
void SwigluF32(const float* gate, const float* up, float* out, int64_t n) {
  CpuMath().swiglu(gate, up, out, n);
}
void SwigluGradF32(const float* gate, const float* up, const float* dout, float* dgate, float* dup,
                   int64_t n) {
  CpuMath().swiglu_grad(gate, up, dout, dgate, dup, n);
}
void RotateHalvesF32(const float* x1, const float* x2, const float* c, const float* s, float* out1,
                     float* out2, int64_t n) {
  CpuMath().rotate_halves(x1, x2, c, s, out1, out2, n);
}
float MaxF32(const float* x, int64_t n) { return CpuMath().max(x, n); }
double SumF32(const float* x, int64_t n) { return CpuMath().sum(x, n); }
double DotF32(const float* a, const float* b, int64_t n) { return CpuMath().dot(a, b, n); }
void MulDifferenceF32(const float* y, const float* dy, float c, float* out, int64_t n) {
  CpuMath().mul_difference(y, dy, c, out, n);
}
void MulScalarF32(const float* x, float s, float* y, int64_t n) {
  CpuMath().mul_scalar(x, s, y, n);
}
void SubScaledF32(const float* p, const float* g, float lr, float* out, int64_t n) {
  CpuMath().sub_scaled(p, g, lr, out, n);
}
float SoftmaxRowF32(const float* x, float* y, int64_t n, int64_t valid, double* log_sum) {
  return CpuMath().softmax_row(x, y, n, valid, log_sum);
}
void WidenBf16ToF32(const uint16_t* src, float* dst, int64_t n) {
  CpuMath().widen_bf16(src, dst, n);
}
void NarrowF32ToBf16(const float* src, uint16_t* dst, int64_t n) {
  CpuMath().narrow_bf16(src, dst, n);
}
const char* VectorTargetName() { return CpuMath().target_name(); }

}  // namespace pw::ops::cpu
