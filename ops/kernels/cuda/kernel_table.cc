// The CUDA kernel table and the checks every CUDA kernel runs first.

#include <deque>
#include <vector>

#include "ops/kernels/cpu/cpu_kernels.h"
#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/find_kernel.h"
#include "ops/kernels/cuda/launchers.h"

namespace pw {

CpuKernel FindCudaKernel(std::string_view type) {
  static const ops::cuda::KernelTable* table = [] {
    auto* t = new ops::cuda::KernelTable;
    ops::cuda::RegisterMatmulKernels(*t);
    ops::cuda::RegisterEmbeddingKernels(*t);
    ops::cuda::RegisterElementwiseKernels(*t);
    ops::cuda::RegisterNormKernels(*t);
    ops::cuda::RegisterRmsNormKernels(*t);
    ops::cuda::RegisterSwigluKernels(*t);
    ops::cuda::RegisterBiasFusionKernels(*t);
    ops::cuda::RegisterRotaryKernels(*t);
    ops::cuda::RegisterAttentionKernels(*t);
    ops::cuda::RegisterGqaAttentionKernels(*t);
    ops::cuda::RegisterSoftmaxKernels(*t);
    ops::cuda::RegisterMeanKernels(*t);
    ops::cuda::RegisterFillKernels(*t);
    ops::cuda::RegisterLayoutKernels(*t);
    ops::cuda::RegisterCollectiveKernels(*t);
    ops::cuda::RegisterOptimizerKernels(*t);
    ops::cuda::RegisterCastKernels(*t);
    ops::cuda::RegisterVocabParallelKernels(*t);
    ops::cuda::RegisterLossScalingKernels(*t);
    ops::cuda::RegisterDropoutKernels(*t);
    return t;
  }();
  auto it = table->find(type);
  return it == table->end() ? nullptr : it->second;
}

namespace ops::cuda {

Status ValidateCudaKernelContext(const KernelContext& ctx) {
  PW_RETURN_IF_ERROR(cpu::ValidateKernelContext(ctx));
  const LaunchContext& launch = CurrentLaunch();
  if (!launch.stream || !launch.blas || !launch.error)
    return FailedPrecondition(ctx.op.type, ": CUDA kernel called without a launch context");
  // A host pointer handed to a kernel would fault on the device: refuse it here instead.
  auto on_device = [&](const Tensor* t, const std::string& slot) -> Status {
    if (t && t->defined() && t->device() != Device::kCuda)
      return InvalidArgument(ctx.op.type, ": ", slot,
                             " is host memory; CUDA kernels take device tensors");
    return OkStatus();
  };
  for (size_t i = 0; i < ctx.inputs.size(); ++i)
    for (const Tensor* t : ctx.inputs[i]) PW_RETURN_IF_ERROR(on_device(t, ctx.op.inputs[i].name));
  for (size_t i = 0; i < ctx.outputs.size(); ++i)
    for (const Tensor* t : ctx.outputs[i]) PW_RETURN_IF_ERROR(on_device(t, ctx.op.outputs[i].name));
  return OkStatus();
}

Status LaunchError(const KernelContext& ctx) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return Internal(ctx.op.type, ": CUDA launch failed: ", cudaGetErrorString(e));
  return OkStatus();
}

Status RunWidened(KernelContext& ctx, CpuKernel kernel) {
  // f32 copies in stream-ordered scratch, wrapped as device tensors for the kernel; the
  // scratch is freed (in stream order) after the rounding back is queued.
  std::vector<Scratch> scratch;
  std::deque<Tensor> copies;  // pointers into it stay valid
  const cudaStream_t stream = CurrentLaunch().stream;
  auto f32_of = [&](const Tensor& t, bool input) -> StatusOr<Tensor*> {
    PW_ASSIGN_OR_RETURN(Scratch s, Scratch::Make(t.numel() * int64_t{sizeof(float)}));
    auto* p = static_cast<std::byte*>(s.get());
    scratch.push_back(std::move(s));
    Tensor& copy =
        copies.emplace_back(DataType::kFloat32, t.shape(),
                            std::shared_ptr<std::byte>(p, [](std::byte*) {}), Device::kCuda);
    if (input) {
      LaunchWidenToF32(t.dtype() == DataType::kBFloat16, t.raw(), copy.f32(), t.numel(), stream);
    } else {
      PW_RETURN_IF_ERROR(
          CudaCheck(cudaMemsetAsync(copy.raw(), 0, copy.nbytes(), stream), "zero fill"));
    }
    return &copy;
  };
  return cpu::RunOnF32View(ctx, kernel, f32_of, [&](const Tensor& f32, Tensor& out) {
    LaunchNarrowFromF32(out.dtype() == DataType::kBFloat16, f32.f32(), out.raw(), out.numel(),
                        stream);
  });
}

Status CudaCheck(cudaError_t e, std::string_view what) {
  if (e == cudaSuccess) return OkStatus();
  return Internal(what, ": ", cudaGetErrorString(e));
}

Status CublasCheck(cublasStatus_t s, std::string_view what) {
  if (s == CUBLAS_STATUS_SUCCESS) return OkStatus();
  return Internal(what, ": cuBLAS error ", cublasGetStatusString(s));
}

Status CopyIfDistinct(const Tensor& src, Tensor& dst) {
  if (src.SharesStorage(dst) || src.nbytes() == 0) return OkStatus();
  return CudaCheck(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToDevice,
                                   CurrentLaunch().stream),
                   "device copy");
}

StatusOr<Scratch> Scratch::Make(int64_t bytes) {
  const LaunchContext& launch = CurrentLaunch();
  void* p = nullptr;
  size_t size = static_cast<size_t>(bytes > 0 ? bytes : 1);
  cudaError_t e = launch.pool ? cudaMallocFromPoolAsync(&p, size, launch.pool, launch.stream)
                              : cudaMallocAsync(&p, size, launch.stream);
  if (e != cudaSuccess)
    return FailedPrecondition("cannot allocate ", bytes,
                              " bytes of device scratch: ", cudaGetErrorString(e));
  return Scratch(p);
}

Scratch::~Scratch() {
  if (ptr_) (void)cudaFreeAsync(ptr_, CurrentLaunch().stream);
}

}  // namespace ops::cuda
}  // namespace pw
