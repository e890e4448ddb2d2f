// bias_gelu, bias_dropout_add and bias_gelu's grad on the device: one pass over memory
// each, with the unfused kernels' arithmetic on X + Bias (held in a register). The dropout
// takes four consecutive elements per thread, as dropout's kernel does, so one Philox call
// serves all four where the layout keeps them in one group.

#include "ops/kernels/cuda/bias_fusions_launch.h"
#include "ops/kernels/cuda/device_util.cuh"

namespace pw::ops::cuda {
namespace {

__global__ void BiasGeluKernel(const float* x, const float* bias, float* out, int64_t n,
                               int64_t d) {
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride())
    out[i] = GeluValue(x[i] + bias[i % d]);
}

__global__ void BiasGeluGradKernel(const float* x, const float* bias, const float* g, float* dx,
                                   int64_t n, int64_t d) {
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride())
    dx[i] = g[i] * GeluSlope(x[i] + bias[i % d]);
}

__global__ void BiasDropoutAddKernel(const float* x, const float* bias, const float* residual,
                                     float* out, int64_t n, int64_t d, DeviceMask mask) {
  const bool drop = mask.seed != nullptr;
  const uint64_t seed = drop ? static_cast<uint64_t>(*mask.seed) : 0;
  const int64_t quads = (n + 3) / 4;
  for (int64_t q = GlobalThread(); q < quads; q += GlobalStride()) {
    DropoutWords words{seed, mask.salt};
    const int64_t end = q * 4 + 4 < n ? q * 4 + 4 : n;
    for (int64_t l = q * 4; l < end; ++l) {
      float t = x[l] + bias[l % d];
      if (drop)
        t = words.Of(static_cast<uint64_t>(mask.layout.Global(l))) >= mask.threshold
                ? t * mask.scale
                : 0.0f;
      out[l] = residual[l] + t;
    }
  }
}

}  // namespace

void LaunchBiasGelu(const float* x, const float* bias, float* out, int64_t n, int64_t d,
                    cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  BiasGeluKernel<<<GridFor(n), kThreads, 0, stream>>>(x, bias, out, n, d);
}

void LaunchBiasGeluGrad(const float* x, const float* bias, const float* g, float* dx, int64_t n,
                        int64_t d, cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  BiasGeluGradKernel<<<GridFor(n), kThreads, 0, stream>>>(x, bias, g, dx, n, d);
}

void LaunchBiasDropoutAdd(const float* x, const float* bias, const float* residual, float* out,
                          int64_t n, int64_t d, const DeviceMask& mask, cudaStream_t stream) {
  if (n == 0 || d == 0) return;
  BiasDropoutAddKernel<<<GridFor((n + 3) / 4), kThreads, 0, stream>>>(x, bias, residual, out, n, d,
                                                                      mask);
}

}  // namespace pw::ops::cuda
