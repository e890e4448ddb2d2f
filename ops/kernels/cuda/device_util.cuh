#pragma once
// Device helpers shared by the .cu files: launch sizes, block reductions, error reports.

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "ops/kernels/cuda/device_error.h"

namespace pw::ops::cuda {

inline constexpr int kThreads = 256;  // per block; a multiple of the warp size
inline constexpr int kMaxBlocks = 65535;

// Blocks for a grid-stride loop over n items.
inline unsigned GridFor(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? (blocks < 1 ? 1 : blocks) : kMaxBlocks);
}

// Blocks for one block per row, rows walked with a stride when there are more.
inline unsigned GridForRows(int64_t rows) {
  return static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks);
}

// gelu(x) = x·Φ(x) (erf form) and its slope Φ(x) + x·φ(x): gelu, bias_gelu and their grads.
__device__ inline float GeluValue(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}
__device__ inline float GeluSlope(float x) {
  const float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
  const float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
  return cdf + x * pdf;
}

__device__ inline int64_t GlobalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t GlobalStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

template <typename T>
__device__ inline T WarpSum(T v) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

__device__ inline float WarpMax(float v) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the block, returned to every thread. Starts and ends with a barrier, so it
// may be called repeatedly and all reads before it finish before writes after it.
__device__ inline double BlockSum(double v) {
  __shared__ double partial[32];
  __shared__ double total;
  __syncthreads();
  v = WarpSum(v);
  int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int warps = (blockDim.x + warpSize - 1) / warpSize;
    double w = lane < warps ? partial[lane] : 0.0;
    w = WarpSum(w);
    if (lane == 0) total = w;
  }
  __syncthreads();
  return total;
}

__device__ inline float BlockMax(float v) {
  __shared__ float partial[32];
  __shared__ float total;
  __syncthreads();
  v = WarpMax(v);
  int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int warps = (blockDim.x + warpSize - 1) / warpSize;
    float w = lane < warps ? partial[lane] : -INFINITY;
    w = WarpMax(w);
    if (lane == 0) total = w;
  }
  __syncthreads();
  return total;
}

// Keeps the first report of a step; later ones (from any thread or launch) are dropped.
__device__ inline void ReportError(DeviceError* e, int code, int site, long long index,
                                   long long value, long long bound, long long extra = 0,
                                   double x = 0, double y = 0) {
  if (!e || atomicCAS(&e->code, 0, code) != 0) return;
  e->site = site;
  e->index = index;
  e->value = value;
  e->bound = bound;
  e->extra = extra;
  e->x = x;
  e->y = y;
}

}  // namespace pw::ops::cuda
