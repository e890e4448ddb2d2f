#pragma once
// The device side of dropout and dropout_grad (kernels/cuda/dropout.cc is the host side).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/dropout_mask.h"

namespace pw::ops::cuda {

// out = in · scale where kept, 0 where dropped, over n elements laid out as `layout` says;
// the seed is read on the device (the fed i64), so the launch never waits for it.
void LaunchDropout(const float* in, float* out, int64_t n, const int64_t* seed, uint64_t salt,
                   uint32_t threshold, float scale, DropoutLayout layout, cudaStream_t stream);

}  // namespace pw::ops::cuda
