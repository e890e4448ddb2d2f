// layer_norm kernels. Row statistics accumulate in double as on the CPU: one block per
// row, so only the order of the double additions differs. Parameter gradients use one
// thread per column walking the rows in order: the CPU's float sums exactly.

#include "ops/kernels/cuda/device_util.cuh"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

__global__ void LayerNormKernel(const float* x, const float* scale, const float* bias, float* y,
                                float* mean, float* rstd, int64_t rows, int64_t d, double epsilon) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * d;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) sum += xr[j];
    double mu = BlockSum(sum) / d;
    double var = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) var += (xr[j] - mu) * (xr[j] - mu);
    var = BlockSum(var) / d;
    float m = static_cast<float>(mu);
    float rs = static_cast<float>(1.0 / sqrt(var + epsilon));
    if (threadIdx.x == 0) {
      mean[r] = m;
      rstd[r] = rs;
    }
    float* yr = y + r * d;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      yr[j] = (xr[j] - m) * rs * scale[j] + bias[j];
  }
}

// dx = rstd · (g - mean(g) - x̂ · mean(g · x̂)), g = dy · scale; x̂ and g are recomputed in
// the second pass instead of stored.
__global__ void LayerNormGradKernel(const float* x, const float* scale, const float* mean,
                                    const float* rstd, const float* dy, float* dx, int64_t rows,
                                    int64_t d) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * d;
    const float* dyr = dy + r * d;
    const float m = mean[r], rs = rstd[r];
    double sum_g = 0, sum_gx = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      float xhat = (xr[j] - m) * rs;
      float g = dyr[j] * scale[j];
      sum_g += g;
      sum_gx += g * xhat;
    }
    float mg = static_cast<float>(BlockSum(sum_g) / d);
    float mgx = static_cast<float>(BlockSum(sum_gx) / d);
    float* dxr = dx + r * d;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      float xhat = (xr[j] - m) * rs;
      float g = dyr[j] * scale[j];
      dxr[j] = rs * (g - mg - xhat * mgx);
    }
  }
}

__global__ void LayerNormParamGradKernel(const float* x, const float* mean, const float* rstd,
                                         const float* dy, float* dscale, float* dbias,
                                         RowGroups groups, int64_t d) {
  for (int64_t j = GlobalThread(); j < d; j += GlobalStride()) {
    float ds = 0, db = 0;
    for (int64_t k = 0; k < groups.count; ++k) {
      float part_s = 0, part_b = 0;
      for (int64_t r = k * groups.rows; r < (k + 1) * groups.rows; ++r) {
        float g = dy[r * d + j];
        part_s += g * (x[r * d + j] - mean[r]) * rstd[r];
        part_b += g;
      }
      if (groups.partial) {
        if (dscale) dscale[k * d + j] = part_s;
        if (dbias) dbias[k * d + j] = part_b;
      } else {
        ds += part_s;
        db += part_b;
      }
    }
    if (groups.partial) continue;
    if (dscale) dscale[j] = ds;
    if (dbias) dbias[j] = db;
  }
}

}  // namespace

void LaunchLayerNorm(const float* x, const float* scale, const float* bias, float* y, float* mean,
                     float* rstd, int64_t rows, int64_t d, double epsilon, cudaStream_t stream) {
  if (rows == 0 || d == 0) return;
  LayerNormKernel<<<GridForRows(rows), kThreads, 0, stream>>>(x, scale, bias, y, mean, rstd, rows,
                                                              d, epsilon);
}

void LaunchLayerNormGrad(const float* x, const float* scale, const float* mean, const float* rstd,
                         const float* dy, float* dx, int64_t rows, int64_t d, cudaStream_t stream) {
  if (rows == 0 || d == 0) return;
  LayerNormGradKernel<<<GridForRows(rows), kThreads, 0, stream>>>(x, scale, mean, rstd, dy, dx,
                                                                  rows, d);
}

void LaunchLayerNormParamGrad(const float* x, const float* mean, const float* rstd, const float* dy,
                              float* dscale, float* dbias, RowGroups groups, int64_t d,
                              cudaStream_t stream) {
  if (d == 0 || (!dscale && !dbias)) return;
  LayerNormParamGradKernel<<<GridFor(d), kThreads, 0, stream>>>(x, mean, rstd, dy, dscale, dbias,
                                                                groups, d);
}

}  // namespace pw::ops::cuda
