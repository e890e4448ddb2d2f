// embedding gather and its scatter-add grad (host side). Ids are checked on the device;
// a bad one fails the step when the stream is synchronized.

#include "ops/kernels/cuda/cuda_kernels.h"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

Status Embedding(KernelContext& ctx) {
  const Tensor& ids = *ctx.In("Ids");
  const Tensor& w = *ctx.In("W");
  const LaunchContext& launch = CurrentLaunch();
  LaunchEmbedding(ids.i64(), w.f32(), ctx.Out("Out")->f32(), ids.numel(), w.dim(0), w.dim(1),
                  launch.error, launch.site, launch.stream);
  return OkStatus();
}

Status EmbeddingGrad(KernelContext& ctx) {
  const Tensor& ids = *ctx.In("Ids");
  const Tensor& g = *ctx.In(GradVarName("Out"));
  Tensor& dw = *ctx.Out(GradVarName("W"));
  const LaunchContext& launch = CurrentLaunch();
  PW_RETURN_IF_ERROR(
      CudaCheck(cudaMemsetAsync(dw.raw(), 0, dw.nbytes(), launch.stream), "zero fill"));
  LaunchEmbeddingGrad(ids.i64(), g.f32(), dw.f32(), ids.numel(), dw.dim(0), dw.dim(1), launch.error,
                      launch.site, launch.stream);
  return OkStatus();
}

}  // namespace

void RegisterEmbeddingKernels(KernelTable& table) {
  Add<Embedding>(table, "embedding");
  Add<EmbeddingGrad>(table, "embedding_grad");
}

}  // namespace pw::ops::cuda
