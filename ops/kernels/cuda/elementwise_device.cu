// Element-wise kernels: one thread per output element (or per column for the column sum),
// so outputs may alias inputs as on the CPU.

#include "ops/kernels/cuda/device_util.cuh"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

__global__ void BiasAddKernel(const float* x, const float* bias, float* out, int64_t n, int64_t d) {
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) out[i] = x[i] + bias[i % d];
}

// One thread per column, rows in their groups: the CPU's summation order exactly.
__global__ void ColumnSumKernel(const float* x, float* out, RowGroups groups, int64_t d) {
  for (int64_t j = GlobalThread(); j < d; j += GlobalStride()) {
    float acc = 0;
    for (int64_t g = 0; g < groups.count; ++g) {
      float part = 0;
      for (int64_t r = g * groups.rows; r < (g + 1) * groups.rows; ++r) part += x[r * d + j];
      if (groups.partial)
        out[g * d + j] = part;
      else
        acc += part;
    }
    if (!groups.partial) out[j] = acc;
  }
}

__global__ void AddKernel(const float* x, const float* y, float* out, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) out[i] = x[i] + y[i];
}

__global__ void GeluKernel(const float* x, float* out, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) out[i] = GeluValue(x[i]);
}

__global__ void GeluGradKernel(const float* x, const float* g, float* dx, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) dx[i] = g[i] * GeluSlope(x[i]);
}

__global__ void ScaleKernel(const float* x, float* out, int64_t n, float scale, float bias) {
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) out[i] = scale * x[i] + bias;
}

__global__ void SumKernel(const float* first, SumInputs xs, float* out, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) {
    float acc = first ? first[i] : xs.xs[0][i];
    for (int k = first ? 0 : 1; k < xs.count; ++k) acc += xs.xs[k][i];
    out[i] = acc;
  }
}

}  // namespace

void LaunchBiasAdd(const float* x, const float* bias, float* out, int64_t rows, int64_t d,
                   cudaStream_t stream) {
  int64_t n = rows * d;
  if (n == 0) return;
  BiasAddKernel<<<GridFor(n), kThreads, 0, stream>>>(x, bias, out, n, d);
}

void LaunchColumnSum(const float* x, float* out, RowGroups groups, int64_t d, cudaStream_t stream) {
  if (d == 0) return;
  ColumnSumKernel<<<GridFor(d), kThreads, 0, stream>>>(x, out, groups, d);
}

void LaunchAdd(const float* x, const float* y, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  AddKernel<<<GridFor(n), kThreads, 0, stream>>>(x, y, out, n);
}

void LaunchGelu(const float* x, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  GeluKernel<<<GridFor(n), kThreads, 0, stream>>>(x, out, n);
}

void LaunchGeluGrad(const float* x, const float* g, float* dx, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  GeluGradKernel<<<GridFor(n), kThreads, 0, stream>>>(x, g, dx, n);
}

void LaunchScale(const float* x, float* out, int64_t n, float scale, float bias,
                 cudaStream_t stream) {
  if (n == 0) return;
  ScaleKernel<<<GridFor(n), kThreads, 0, stream>>>(x, out, n, scale, bias);
}

void LaunchSum(const float* first, const SumInputs& xs, float* out, int64_t n,
               cudaStream_t stream) {
  if (n == 0 || (!first && xs.count == 0)) return;
  SumKernel<<<GridFor(n), kThreads, 0, stream>>>(first, xs, out, n);
}

}  // namespace pw::ops::cuda
