#pragma once
// The CPU kernels' arithmetic that needs Highway (vector_math.cc) or oneDNN (sgemm) lives in
// the module libpipeweave_cpu_math.so, opened on the first call: loading oneDNN and Highway
// (whose load-time timer calibration alone takes milliseconds) is paid by the commands that
// compute, not by `--help`, `opt` or `inspect`. vector_math.h's functions and Gemm call
// through this table.

#include <cstdint>

#include "ir/status.h"
#include "ops/kernels/cpu/ordered_gemm.h"
#include "ops/kernels/cpu/vector_math.h"

namespace pw::ops::cpu {

// One entry per function of vector_math.h, with the same signature, and the GEMMs.
struct CpuMathModule {
  decltype(&GeluF32) gelu;
  decltype(&GeluGradF32) gelu_grad;
  decltype(&ExpShiftedF32) exp_shifted;
  decltype(&AddF32) add;
  decltype(&ScaleF32) scale;
  decltype(&AdamF32) adam;
  decltype(&LayerNormRowF32) layer_norm_row;
  decltype(&LayerNormGradRowF32) layer_norm_grad_row;
  decltype(&AddScaledDeviationF32) add_scaled_deviation;
  decltype(&RmsNormRowF32) rms_norm_row;
  decltype(&RmsNormGradRowF32) rms_norm_grad_row;
  decltype(&SwigluF32) swiglu;
  decltype(&SwigluGradF32) swiglu_grad;
  decltype(&RotateHalvesF32) rotate_halves;
  decltype(&MaxF32) max;
  decltype(&SumF32) sum;
  decltype(&DotF32) dot;
  decltype(&MulDifferenceF32) mul_difference;
  decltype(&MulScalarF32) mul_scalar;
  decltype(&SubScaledF32) sub_scaled;
  decltype(&SoftmaxRowF32) softmax_row;
  decltype(&WidenBf16ToF32) widen_bf16;
  decltype(&NarrowF32ToBf16) narrow_bf16;
  decltype(&VectorTargetName) target_name;
  // C = alpha·op(A)·op(B) + beta·C on the calling thread alone, row-major: the GEMM the
  // kernels run (oneDNN's sgemm or the ordered one, as gemm_name says) and the ordered one
  // (ordered_gemm.h) whatever the choice.
  decltype(&OrderedSgemm) sgemm;
  decltype(&OrderedSgemm) ordered_sgemm;
  const char* (*gemm_name)();
};

// Opens the module once (later calls return the same result) or says why it cannot.
// Backends call it before running a kernel, so a missing module is an error, not a crash.
Status LoadCpuMathModule();

// The table; opens the module on first use. A kernel that runs although the module cannot
// be loaded ends the process with that one line (LoadCpuMathModule reports it earlier).
const CpuMathModule& CpuMath();

}  // namespace pw::ops::cpu

// The one symbol the module exports.
extern "C" const pw::ops::cpu::CpuMathModule* pw_cpu_math_module();
