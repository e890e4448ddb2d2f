#pragma once
// Internal: the CPU kernel table and helpers shared by the kernel files.

#include <functional>
#include <map>
#include <string>

#include "ir/var.h"
#include "ops/kernel.h"

namespace pw::ops::cpu {

using KernelTable = std::map<std::string, CpuKernel, std::less<>>;

// Checks a context against the op's definition before a kernel runs: every input is
// present, and every output is allocated with the type shape inference gives for the
// inputs. Kernels can then index without bounds checks and never crash on a bad plan.
Status ValidateKernelContext(const KernelContext& ctx);

// Runs an f32 kernel on an op whose tensors include bf16 or f16 ones: each such tensor is
// widened into an f32 copy (an output that is also an input shares its copy), the kernel
// computes in f32, and low-precision outputs are rounded back to nearest even. That is
// "storage low, arithmetic f32" for every kernel written for f32.
Status RunWidened(KernelContext& ctx, CpuKernel kernel);
bool HasLowPrecision(const KernelContext& ctx);

// What every backend's RunWidened does, whatever memory its f32 copies live in: runs
// `kernel` on a view of `ctx` where each distinct bf16/f16 tensor is the f32 tensor
// `f32_of(tensor, input)` gives (filled with the widened values for an input, to be
// written for an output), then `narrow(f32, output)` rounds each low-precision output
// back from its copy.
Status RunOnF32View(KernelContext& ctx, CpuKernel kernel,
                    const std::function<StatusOr<Tensor*>(const Tensor& t, bool input)>& f32_of,
                    const std::function<void(const Tensor& f32, Tensor& out)>& narrow);

template <CpuKernel kKernel>
Status Checked(KernelContext& ctx) {
  PW_RETURN_IF_ERROR(ValidateKernelContext(ctx));
  return HasLowPrecision(ctx) ? RunWidened(ctx, kKernel) : kKernel(ctx);
}

// A kernel that handles every dtype itself (copies, casts, fills).
template <CpuKernel kKernel>
Status CheckedNative(KernelContext& ctx) {
  PW_RETURN_IF_ERROR(ValidateKernelContext(ctx));
  return kKernel(ctx);
}

// Registers `kKernel` for `type`, behind the validation; AddNative for kernels that handle
// low-precision tensors themselves.
template <CpuKernel kKernel>
void Add(KernelTable& table, std::string type) {
  table.emplace(std::move(type), &Checked<kKernel>);
}
template <CpuKernel kKernel>
void AddNative(KernelTable& table, std::string type) {
  table.emplace(std::move(type), &CheckedNative<kKernel>);
}

// Row-major C[m, n] = alpha · op(A)[m, k] · op(B)[k, n] + beta · C with explicit leading
// dims (so that strided per-head views of QKV need no copies). Zero sizes are handled.
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// One row of the softmax cross-entropy gradient: dx = dloss · p, minus dloss at `target`
// when it falls in [0, n) (a vocab-parallel rank holds a slice of the row); zeros for an
// ignored label.
void CrossEntropyGradRow(const float* p, int64_t n, bool ignored, float dloss, int64_t target,
                         float* dx);

// Bias@GRAD = the rows of `g` ([rows..., bias_shape]) summed in bias_add_grad's row groups
// (ops/defs/row_groups.h; the op's partial_groups attribute asks for partial sums).
void SumBiasGrad(const KernelContext& ctx, const float* g, const Shape& g_shape,
                 const Shape& bias_shape, Tensor& dbias);

// Copies src into dst unless they share storage (an in-place op).
void CopyIfDistinct(const Tensor& src, Tensor& dst);

void RegisterMatmulKernels(KernelTable& table);
void RegisterEmbeddingKernels(KernelTable& table);
void RegisterElementwiseKernels(KernelTable& table);
void RegisterNormKernels(KernelTable& table);
void RegisterRmsNormKernels(KernelTable& table);
void RegisterSwigluKernels(KernelTable& table);
void RegisterBiasFusionKernels(KernelTable& table);
void RegisterRotaryKernels(KernelTable& table);
void RegisterAttentionKernels(KernelTable& table);
void RegisterGqaAttentionKernels(KernelTable& table);
void RegisterSoftmaxKernels(KernelTable& table);
void RegisterMeanKernels(KernelTable& table);
void RegisterFillKernels(KernelTable& table);
void RegisterLayoutKernels(KernelTable& table);
void RegisterCollectiveKernels(KernelTable& table);
void RegisterOptimizerKernels(KernelTable& table);
void RegisterCastKernels(KernelTable& table);
void RegisterVocabParallelKernels(KernelTable& table);
void RegisterLossScalingKernels(KernelTable& table);
void RegisterDropoutKernels(KernelTable& table);

}  // namespace pw::ops::cpu
