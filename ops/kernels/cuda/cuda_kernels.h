#pragma once
// Internal: the CUDA kernel table and helpers shared by the host side of the CUDA
// kernels (kernels/cuda/*.cc). A CUDA kernel has the CPU kernel's signature and contract;
// its tensors are device tensors and it queues work on CurrentLaunch().stream.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "ir/var.h"
#include "ops/kernel.h"
#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cuda/launch.h"

namespace pw::ops::cuda {

using KernelTable = std::map<std::string, CpuKernel, std::less<>>;

// The CPU checks (every input present, outputs of the inferred types), plus: every tensor
// is device memory and a launch context is set.
Status ValidateCudaKernelContext(const KernelContext& ctx);

// As on the CPU (ops/kernels/cpu/cpu_kernels.h): an f32 kernel on an op with bf16 or f16
// tensors runs on f32 device copies, and low-precision outputs are rounded back.
Status RunWidened(KernelContext& ctx, CpuKernel kernel);

// A bad launch configuration shows up here, not at the next synchronize.
Status LaunchError(const KernelContext& ctx);

template <CpuKernel kKernel>
Status Checked(KernelContext& ctx) {
  PW_RETURN_IF_ERROR(ValidateCudaKernelContext(ctx));
  PW_RETURN_IF_ERROR(cpu::HasLowPrecision(ctx) ? RunWidened(ctx, kKernel) : kKernel(ctx));
  return LaunchError(ctx);
}

// A kernel that handles every dtype itself (copies, casts, fills, GEMMs on tensor cores).
template <CpuKernel kKernel>
Status CheckedNative(KernelContext& ctx) {
  PW_RETURN_IF_ERROR(ValidateCudaKernelContext(ctx));
  PW_RETURN_IF_ERROR(kKernel(ctx));
  return LaunchError(ctx);
}

template <CpuKernel kKernel>
void Add(KernelTable& table, std::string type) {
  table.emplace(std::move(type), &Checked<kKernel>);
}
template <CpuKernel kKernel>
void AddNative(KernelTable& table, std::string type) {
  table.emplace(std::move(type), &CheckedNative<kKernel>);
}

// `what` failed with `e`, or ok.
Status CudaCheck(cudaError_t e, std::string_view what);
Status CublasCheck(cublasStatus_t s, std::string_view what);

// Device-to-device copy on the launch stream unless both share storage.
Status CopyIfDistinct(const Tensor& src, Tensor& dst);

// Row-major C[m, n] = alpha · op(A) · op(B) + beta · C on cuBLAS, with explicit leading
// dims; `batch` products whose operands are `stride_*` floats apart (0: shared). Zero
// sizes are handled; beta must be 0 or 1 when k is 0.
Status Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
            const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
            int64_t ldc, int64_t batch = 1, int64_t stride_a = 0, int64_t stride_b = 0,
            int64_t stride_c = 0);

// The cuBLAS type of a dtype (bf16, f16; anything else f32).
cudaDataType_t CudaType(DataType dtype);

// Row-major GEMM on bf16 or f16 operands with f32 accumulation (cublasGemmEx, tensor
// cores): C of dtype `c_dtype` (the operands' dtype or f32); strides and leading dims in
// elements, as Gemm takes them; alpha and beta are f32.
Status GemmEx(DataType ab_dtype, DataType c_dtype, bool trans_a, bool trans_b, int64_t m, int64_t n,
              int64_t k, float alpha, const void* a, int64_t lda, const void* b, int64_t ldb,
              float beta, void* c, int64_t ldc, int64_t batch = 1, int64_t stride_a = 0,
              int64_t stride_b = 0, int64_t stride_c = 0);

// Device memory for the duration of one kernel, freed in stream order on the launch
// stream (work queued before the free may still use it).
class Scratch {
 public:
  static StatusOr<Scratch> Make(int64_t bytes);
  Scratch(Scratch&& other) noexcept : ptr_(other.ptr_) { other.ptr_ = nullptr; }
  Scratch& operator=(Scratch&&) = delete;
  ~Scratch();
  void* get() const { return ptr_; }

 private:
  explicit Scratch(void* ptr) : ptr_(ptr) {}
  void* ptr_ = nullptr;
};

// Bias@GRAD = the rows of `g` ([rows..., bias_shape]) summed in bias_add_grad's row groups
// (ops/defs/row_groups.h), queued on the launch's stream.
void SumBiasGrad(const KernelContext& ctx, const float* g, const Shape& g_shape,
                 const Shape& bias_shape, Tensor& dbias);

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

}  // namespace pw::ops::cuda
