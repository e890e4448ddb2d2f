// sgd and adam: one thread per element, so the in-place update (output == input) is safe.
// `skip` (may be null) is loss scaling's flag: when it is > 0 every output keeps its input.

#include "ops/kernels/cuda/device_util.cuh"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

__device__ bool Skip(const float* skip) { return skip && skip[0] > 0; }

__global__ void SgdKernel(const float* p, const float* g, float* out, int64_t n, float lr,
                          const float* skip) {
  const bool keep = Skip(skip);
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride())
    out[i] = keep ? p[i] : p[i] - lr * g[i];
}

__device__ bool PowersOk(double b1pow, double b2pow) { return b1pow < 1 && b2pow < 1; }

// The bias correction as the CPU computes it: in double from the step counters, then
// rounded to float once.
__global__ void AdamKernel(const float* p, const float* g, const float* m1, const float* m2,
                           const float* beta1_pow, const float* beta2_pow, float* p_out,
                           float* m1_out, float* m2_out, int64_t n, AdamParams a,
                           DeviceError* error, int site, const float* skip) {
  if (Skip(skip)) {
    for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) {
      p_out[i] = p[i];
      m1_out[i] = m1[i];
      m2_out[i] = m2[i];
    }
    return;
  }
  double b1pow = beta1_pow[0], b2pow = beta2_pow[0];
  if (!PowersOk(b1pow, b2pow)) {
    if (GlobalThread() == 0)
      ReportError(error, kAdamBetaPowNotBelowOne, site, 0, 0, 0, 0, b1pow, b2pow);
    return;
  }
  float lr_t = static_cast<float>(a.lr * sqrt(1 - b2pow) / (1 - b1pow));
  float eps_t = static_cast<float>(a.epsilon * sqrt(1 - b2pow));
  float b1 = static_cast<float>(a.beta1), b2 = static_cast<float>(a.beta2);
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) {
    float gi = g[i];
    float m1i = b1 * m1[i] + (1 - b1) * gi;
    float m2i = b2 * m2[i] + (1 - b2) * gi * gi;
    m1_out[i] = m1i;
    m2_out[i] = m2i;
    p_out[i] = p[i] - lr_t * m1i / (sqrtf(m2i) + eps_t);
  }
}

// Runs after AdamKernel on the same stream, so every thread there has read the powers.
__global__ void AdamPowersKernel(const float* beta1_pow, const float* beta2_pow,
                                 float* beta1_pow_out, float* beta2_pow_out, AdamParams a,
                                 const float* skip) {
  double b1pow = beta1_pow[0], b2pow = beta2_pow[0];
  if (Skip(skip)) {
    beta1_pow_out[0] = beta1_pow[0];
    beta2_pow_out[0] = beta2_pow[0];
    return;
  }
  if (!PowersOk(b1pow, b2pow)) return;
  beta1_pow_out[0] = static_cast<float>(b1pow * a.beta1);
  beta2_pow_out[0] = static_cast<float>(b2pow * a.beta2);
}

}  // namespace

void LaunchSgd(const float* p, const float* g, float* out, int64_t n, float lr, const float* skip,
               cudaStream_t stream) {
  if (n == 0) return;
  SgdKernel<<<GridFor(n), kThreads, 0, stream>>>(p, g, out, n, lr, skip);
}

void LaunchAdam(const float* p, const float* g, const float* m1, const float* m2,
                const float* beta1_pow, const float* beta2_pow, float* p_out, float* m1_out,
                float* m2_out, int64_t n, AdamParams params, DeviceError* error, int site,
                const float* skip, cudaStream_t stream) {
  AdamKernel<<<GridFor(n), kThreads, 0, stream>>>(p, g, m1, m2, beta1_pow, beta2_pow, p_out, m1_out,
                                                  m2_out, n, params, error, site, skip);
}

void LaunchAdamPowers(const float* beta1_pow, const float* beta2_pow, float* beta1_pow_out,
                      float* beta2_pow_out, AdamParams params, const float* skip,
                      cudaStream_t stream) {
  AdamPowersKernel<<<1, 1, 0, stream>>>(beta1_pow, beta2_pow, beta1_pow_out, beta2_pow_out, params,
                                        skip);
}

}  // namespace pw::ops::cuda
