// swiglu kernels: one thread per element, the CPU kernels' arithmetic (the sigmoid from
// exp(-|x|), no fused multiply-adds).

#include "ops/kernels/cuda/device_util.cuh"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

__device__ inline float Sigmoid(float x) {
  const float e = expf(-fabsf(x));
  const float inv = 1.0f / (1.0f + e);
  return x < 0 ? e * inv : inv;
}

__global__ void SwigluKernel(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) {
    const float g = gate[i];
    out[i] = g * Sigmoid(g) * up[i];
  }
}

__global__ void SwigluGradKernel(const float* gate, const float* up, const float* dout,
                                 float* dgate, float* dup, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) {
    const float g = gate[i], dy = dout[i];
    const float s = Sigmoid(g);
    if (dgate) dgate[i] = dy * up[i] * (s * (1.0f + g * (1.0f - s)));
    if (dup) dup[i] = dy * (g * s);
  }
}

}  // namespace

void LaunchSwiglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  SwigluKernel<<<GridFor(n), kThreads, 0, stream>>>(gate, up, out, n);
}

void LaunchSwigluGrad(const float* gate, const float* up, const float* dout, float* dgate,
                      float* dup, int64_t n, cudaStream_t stream) {
  if (n == 0 || (!dgate && !dup)) return;
  SwigluGradKernel<<<GridFor(n), kThreads, 0, stream>>>(gate, up, dout, dgate, dup, n);
}

}  // namespace pw::ops::cuda
