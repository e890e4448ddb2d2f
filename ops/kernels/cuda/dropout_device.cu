// Dropout on the device: each thread takes four consecutive elements, so where the local
// layout keeps global indices four-aligned (rows of a multiple of four) one Philox call
// serves all four, as on the CPU; otherwise it draws again when the group changes.

#include "ops/kernels/cuda/device_util.cuh"
#include "ops/kernels/cuda/dropout_launch.h"

namespace pw::ops::cuda {
namespace {

__global__ void DropoutKernel(const float* in, float* out, int64_t n, const int64_t* seed_ptr,
                              uint64_t salt, uint32_t threshold, float scale,
                              DropoutLayout layout) {
  const uint64_t seed = static_cast<uint64_t>(*seed_ptr);
  const int64_t quads = (n + 3) / 4;
  for (int64_t q = GlobalThread(); q < quads; q += GlobalStride()) {
    DropoutWords words{seed, salt};
    const int64_t end = q * 4 + 4 < n ? q * 4 + 4 : n;
    for (int64_t l = q * 4; l < end; ++l)
      out[l] =
          words.Of(static_cast<uint64_t>(layout.Global(l))) >= threshold ? in[l] * scale : 0.0f;
  }
}

}  // namespace

void LaunchDropout(const float* in, float* out, int64_t n, const int64_t* seed, uint64_t salt,
                   uint32_t threshold, float scale, DropoutLayout layout, cudaStream_t stream) {
  if (n == 0) return;
  DropoutKernel<<<GridFor((n + 3) / 4), kThreads, 0, stream>>>(in, out, n, seed, salt, threshold,
                                                               scale, layout);
}

}  // namespace pw::ops::cuda
