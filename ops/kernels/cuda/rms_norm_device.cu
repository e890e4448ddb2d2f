// rms_norm kernels. A row's sum of squares accumulates in double as on the CPU: one block
// per row, so only the order of the double additions differs. The scale gradient uses one
// thread per column walking the rows in order: the CPU's float sums exactly.

#include "ops/kernels/cuda/device_util.cuh"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

__global__ void RmsNormKernel(const float* x, const float* scale, float* y, float* rstd,
                              int64_t rows, int64_t d, double epsilon) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * d;
    double squares = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      squares += static_cast<double>(xr[j]) * xr[j];
    const float rs = static_cast<float>(1.0 / sqrt(BlockSum(squares) / d + epsilon));
    if (threadIdx.x == 0) rstd[r] = rs;
    float* yr = y + r * d;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) yr[j] = xr[j] * rs * scale[j];
  }
}

// dx = rstd · (g - x̂ · mean(g · x̂)), g = dy · scale, x̂ = x · rstd; x̂ and g are recomputed
// in the second pass instead of stored.
__global__ void RmsNormGradKernel(const float* x, const float* scale, const float* rstd,
                                  const float* dy, float* dx, int64_t rows, int64_t d) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * d;
    const float* dyr = dy + r * d;
    const float rs = rstd[r];
    double sum_gx = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const float xhat = xr[j] * rs;
      const float g = dyr[j] * scale[j];
      sum_gx += g * xhat;
    }
    const float mgx = static_cast<float>(BlockSum(sum_gx) / d);
    float* dxr = dx + r * d;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const float xhat = xr[j] * rs;
      const float g = dyr[j] * scale[j];
      dxr[j] = rs * (g - xhat * mgx);
    }
  }
}

__global__ void RmsNormParamGradKernel(const float* x, const float* rstd, const float* dy,
                                       float* dscale, RowGroups groups, int64_t d) {
  for (int64_t j = GlobalThread(); j < d; j += GlobalStride()) {
    float ds = 0;
    for (int64_t k = 0; k < groups.count; ++k) {
      float part = 0;
      for (int64_t r = k * groups.rows; r < (k + 1) * groups.rows; ++r)
        part += dy[r * d + j] * x[r * d + j] * rstd[r];
      if (groups.partial)
        dscale[k * d + j] = part;
      else
        ds += part;
    }
    if (!groups.partial) dscale[j] = ds;
  }
}

}  // namespace

void LaunchRmsNorm(const float* x, const float* scale, float* y, float* rstd, int64_t rows,
                   int64_t d, double epsilon, cudaStream_t stream) {
  if (rows == 0 || d == 0) return;
  RmsNormKernel<<<GridForRows(rows), kThreads, 0, stream>>>(x, scale, y, rstd, rows, d, epsilon);
}

void LaunchRmsNormGrad(const float* x, const float* scale, const float* rstd, const float* dy,
                       float* dx, int64_t rows, int64_t d, cudaStream_t stream) {
  if (rows == 0 || d == 0) return;
  RmsNormGradKernel<<<GridForRows(rows), kThreads, 0, stream>>>(x, scale, rstd, dy, dx, rows, d);
}

void LaunchRmsNormParamGrad(const float* x, const float* rstd, const float* dy, float* dscale,
                            RowGroups groups, int64_t d, cudaStream_t stream) {
  if (d == 0) return;
  RmsNormParamGradKernel<<<GridFor(d), kThreads, 0, stream>>>(x, rstd, dy, dscale, groups, d);
}

}  // namespace pw::ops::cuda
