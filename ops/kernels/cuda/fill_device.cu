// fill_constant.

#include "ops/kernels/cuda/device_util.cuh"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

template <typename T>
__global__ void FillKernel(T* out, int64_t n, T value) {
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) out[i] = value;
}

}  // namespace

void LaunchFillF32(float* out, int64_t n, float value, cudaStream_t stream) {
  if (n == 0) return;
  FillKernel<<<GridFor(n), kThreads, 0, stream>>>(out, n, value);
}

void LaunchFillI64(int64_t* out, int64_t n, int64_t value, cudaStream_t stream) {
  if (n == 0) return;
  FillKernel<<<GridFor(n), kThreads, 0, stream>>>(out, n, value);
}

}  // namespace pw::ops::cuda
