// rotary_embedding: one thread per rotated pair. The angle's cosine and sine are computed
// in double and rounded to f32, as the CPU kernel's table holds them.

#include "ops/kernels/cuda/device_util.cuh"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

__global__ void RotaryKernel(const float* x, float* out, int64_t pairs, int64_t seq, int64_t width,
                             int64_t d, double theta, bool inverse) {
  const int64_t half = d / 2, heads = width / d;
  for (int64_t idx = GlobalThread(); idx < pairs; idx += GlobalStride()) {
    const int64_t i = idx % half, rest = idx / half;
    const int64_t head = rest % heads, row = rest / heads;
    const double angle = static_cast<double>(row % seq) *
                         pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
    const float c = static_cast<float>(cos(angle));
    const float s = static_cast<float>(inverse ? -sin(angle) : sin(angle));
    const int64_t at = row * width + head * d + i;
    const float a = x[at], b = x[at + half];
    out[at] = a * c - b * s;
    out[at + half] = b * c + a * s;
  }
}

}  // namespace

void LaunchRotary(const float* x, float* out, int64_t rows, int64_t seq, int64_t width, int64_t d,
                  double theta, bool inverse, cudaStream_t stream) {
  const int64_t pairs = d == 0 ? 0 : rows * (width / d) * (d / 2);
  if (pairs == 0) return;
  RotaryKernel<<<GridFor(pairs), kThreads, 0, stream>>>(x, out, pairs, seq, width, d, theta,
                                                        inverse);
}

}  // namespace pw::ops::cuda
