// Loss scaling on the device: the unscale over a list of gradients with an inf/NaN flag,
// the scale's update by one thread, and copy_unless's copies.

#include "ops/kernels/cuda/device_util.cuh"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

__global__ void ClearFlag(float* found) { found[0] = 0; }

// blockIdx.y picks the tensor; any thread that sees a non-finite value sets the flag (the
// same value from every writer, so no atomics are needed).
__global__ void UnscaleKernel(UnscaleList list, const float* scale, float* found) {
  const int k = blockIdx.y;
  const float inv = 1.0f / scale[0];
  const float* x = list.xs[k];
  float* out = list.outs[k];
  for (int64_t i = GlobalThread(); i < list.sizes[k]; i += GlobalStride()) {
    if (!isfinite(x[i])) found[0] = 1;
    out[i] = x[i] * inv;
  }
}

__global__ void UpdateKernel(const float* found, const float* scale, const float* good,
                             const float* skipped, float* scale_out, float* good_out,
                             float* skipped_out, int64_t interval, float growth, float backoff) {
  float s = scale[0], g = good[0], k = skipped[0];
  if (found[0] > 0) {
    s *= backoff;
    g = 0;
    k += 1;
  } else if (++g >= static_cast<float>(interval)) {
    s *= growth;
    g = 0;
  }
  scale_out[0] = s;
  good_out[0] = g;
  skipped_out[0] = k;
}

__global__ void MaxInto(float* into, const float* from) { into[0] = fmaxf(into[0], from[0]); }

// Words of 4 bytes when both ends and the size allow, else bytes.
template <typename Word>
__global__ void CopyUnlessKernel(const Word* from, Word* to, int64_t words, const float* skip) {
  if (skip[0] > 0) return;
  for (int64_t i = GlobalThread(); i < words; i += GlobalStride()) to[i] = from[i];
}

}  // namespace

void LaunchMaxInto(float* into, const float* from, cudaStream_t stream) {
  MaxInto<<<1, 1, 0, stream>>>(into, from);
}

void LaunchCopyUnless(const void* from, void* to, int64_t bytes, const float* skip,
                      cudaStream_t stream) {
  const bool words = bytes % 4 == 0 && reinterpret_cast<uintptr_t>(from) % 4 == 0 &&
                     reinterpret_cast<uintptr_t>(to) % 4 == 0;
  if (words) {
    CopyUnlessKernel<<<GridFor(bytes / 4), kThreads, 0, stream>>>(
        static_cast<const uint32_t*>(from), static_cast<uint32_t*>(to), bytes / 4, skip);
  } else {
    CopyUnlessKernel<<<GridFor(bytes), kThreads, 0, stream>>>(
        static_cast<const unsigned char*>(from), static_cast<unsigned char*>(to), bytes, skip);
  }
}

void LaunchCheckFiniteAndUnscale(const UnscaleList& list, const float* scale, float* found,
                                 cudaStream_t stream) {
  ClearFlag<<<1, 1, 0, stream>>>(found);
  if (list.count == 0) return;
  int64_t largest = 1;
  for (int k = 0; k < list.count; ++k) largest = list.sizes[k] > largest ? list.sizes[k] : largest;
  dim3 grid(GridFor(largest), static_cast<unsigned>(list.count));
  UnscaleKernel<<<grid, kThreads, 0, stream>>>(list, scale, found);
}

void LaunchUpdateLossScaling(const float* found, const float* scale, const float* good,
                             const float* skipped, float* scale_out, float* good_out,
                             float* skipped_out, int64_t growth_interval, float growth_factor,
                             float backoff_factor, cudaStream_t stream) {
  UpdateKernel<<<1, 1, 0, stream>>>(found, scale, good, skipped, scale_out, good_out, skipped_out,
                                    growth_interval, growth_factor, backoff_factor);
}

}  // namespace pw::ops::cuda
