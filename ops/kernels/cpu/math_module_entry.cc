// The CPU math module's entry (built into libpipeweave_cpu_math.so only, beside
// vector_math.cc and ordered_gemm.cc): the table of math_module.h, and oneDNN's sgemm for
// one thread.
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ops/kernels/cpu/math_module.h"

namespace pw::ops::cpu {
namespace {

// oneDNN sizes its OpenMP team from the calling thread's own setting; every thread that
// calls it (a stream's, a pool worker) asks for one, once. Looked up at run time: the
// OpenMP runtime is oneDNN's dependency, not ours (none there, nothing to set).
void KeepOneDnnOnThisThread() {
  thread_local bool done = false;
  if (done) return;
  using SetThreads = void (*)(int);
  static const auto set_threads =
      reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (set_threads) set_threads(1);
  done = true;
}

void OneDnnSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc) {
  KeepOneDnnOnThisThread();
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha,
                                          a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success) {  // only a caller's bad sizes or leading dims get here
    std::fprintf(stderr, "pipeweave: oneDNN sgemm %ldx%ldx%ld failed (status %d)\n",
                 static_cast<long>(m), static_cast<long>(n), static_cast<long>(k),
                 static_cast<int>(status));
    std::abort();
  }
}

// oneDNN's sgemm computes each element of C by the same sum in the same order whatever
// cut of C it is given on the AVX-512 machines this project's tests have run on
// (tests/ops/parallel_kernels_test.cc, the row-split and collective-matmul equivalence
// tests). With AVX2 alone (seen on an AMD EPYC, oneDNN 2.6) it does not: it blocks K by a
// size it picks from m and n (K > 384 here) and computes edge rows by other kernels as n
// changes, so a cut changes bits. There the ordered GEMM runs. PW_CPU_GEMM=onednn or
// ordered chooses by hand (benchmarks compare the two).
bool UseOneDnn() {
  static const bool use = [] {
    const bool avx512 = __builtin_cpu_supports("avx512f") != 0;
    const char* choice = std::getenv("PW_CPU_GEMM");
    if (choice == nullptr || *choice == '\0') return avx512;
    if (std::strcmp(choice, "onednn") == 0) return true;
    if (std::strcmp(choice, "ordered") == 0) return false;
    std::fprintf(stderr, "pipeweave: PW_CPU_GEMM='%s' is neither onednn nor ordered; using %s\n",
                 choice, avx512 ? "onednn" : "ordered");
    return avx512;
  }();
  return use;
}

void ChosenSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc) {
  (UseOneDnn() ? OneDnnSgemm : OrderedSgemm)(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta,
                                             c, ldc);
}

const char* GemmName() { return UseOneDnn() ? "onednn" : "ordered"; }

constexpr CpuMathModule kModule = {
    .gelu = &GeluF32,
    .gelu_grad = &GeluGradF32,
    .exp_shifted = &ExpShiftedF32,
    .add = &AddF32,
    .scale = &ScaleF32,
    .adam = &AdamF32,
    .layer_norm_row = &LayerNormRowF32,
    .layer_norm_grad_row = &LayerNormGradRowF32,
    .add_scaled_deviation = &AddScaledDeviationF32,
    .rms_norm_row = &RmsNormRowF32,
    .rms_norm_grad_row = &RmsNormGradRowF32,
    .swiglu = &SwigluF32,
    .swiglu_grad = &SwigluGradF32,
    .rotate_halves = &RotateHalvesF32,
    .max = &MaxF32,
    .sum = &SumF32,
    .dot = &DotF32,
    .mul_difference = &MulDifferenceF32,
    .mul_scalar = &MulScalarF32,
    .sub_scaled = &SubScaledF32,
    .softmax_row = &SoftmaxRowF32,
    .widen_bf16 = &WidenBf16ToF32,
    .narrow_bf16 = &NarrowF32ToBf16,
    .target_name = &VectorTargetName,
    .sgemm = &ChosenSgemm,
    .ordered_sgemm = &OrderedSgemm,
    .gemm_name = &GemmName,
};

}  // namespace
}  // namespace pw::ops::cpu

extern "C" __attribute__((visibility("default"))) const pw::ops::cpu::CpuMathModule*
pw_cpu_math_module() {
  return &pw::ops::cpu::kModule;
}
