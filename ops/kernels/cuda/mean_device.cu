// mean and mean_grad. The sum runs in double, as on the CPU (in another order, so the
// float result can differ in its last bit).

#include "ops/kernels/cuda/device_util.cuh"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

// One block: the input of a loss mean is small, and one block needs no second pass.
__global__ void MeanKernel(const float* x, int64_t n, float* out) {
  double sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += x[i];
  sum = BlockSum(sum);
  if (threadIdx.x == 0) out[0] = static_cast<float>(sum / n);
}

__global__ void MeanGradKernel(const float* g, float* dx, int64_t n) {
  float value = g[0] / static_cast<float>(n);
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) dx[i] = value;
}

}  // namespace

void LaunchMean(const float* x, int64_t n, float* out, cudaStream_t stream) {
  MeanKernel<<<1, kThreads, 0, stream>>>(x, n, out);
}

void LaunchMeanGrad(const float* g, float* dx, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  MeanGradKernel<<<GridFor(n), kThreads, 0, stream>>>(g, dx, n);
}

}  // namespace pw::ops::cuda
