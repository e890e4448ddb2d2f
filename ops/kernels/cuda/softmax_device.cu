// Row softmax, its grad and the fused softmax + cross-entropy. One block per row; the max
// is a float, the sums double, as on the CPU.

#include "ops/kernels/cuda/device_util.cuh"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

// softmax(x[0, valid)) into y, zeros past `valid`; y may alias x (each thread reads an
// element before it writes it, and the reductions are barriers). Returns, to every thread,
// the max and log(sum(exp(x - max))).
__device__ void SoftmaxRow(const float* x, float* y, int64_t n, int64_t valid, float* max_out,
                           double* log_sum) {
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) mx = fmaxf(mx, x[j]);
  mx = valid > 0 ? BlockMax(mx) : 0.f;
  double sum = 0;
  for (int64_t j = threadIdx.x; j < valid; j += blockDim.x) {
    float e = expf(x[j] - mx);
    y[j] = e;
    sum += e;
  }
  sum = BlockSum(sum);
  float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) y[j] = j < valid ? y[j] * inv : 0.f;
  *max_out = mx;
  *log_sum = log(sum);
}

__global__ void SoftmaxKernel(const float* x, float* y, int64_t rows, int64_t n, int64_t period) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t causal_valid = r % (period > 0 ? period : 1) + 1;
    int64_t valid = period > 0 && causal_valid < n ? causal_valid : n;
    float mx;
    double log_sum;
    SoftmaxRow(x + r * n, y + r * n, n, valid, &mx, &log_sum);
  }
}

__global__ void SoftmaxGradKernel(const float* y, const float* dy, float* dx, int64_t rows,
                                  int64_t n) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* yr = y + r * n;
    const float* dyr = dy + r * n;
    double dot = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dot += dyr[j] * yr[j];
    float fdot = static_cast<float>(BlockSum(dot));
    float* dxr = dx + r * n;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dxr[j] = yr[j] * (dyr[j] - fdot);
  }
}

__device__ bool LabelOk(int64_t label, int64_t classes, int64_t ignore) {
  return label == ignore || (label >= 0 && label < classes);
}

__global__ void SoftmaxCrossEntropyKernel(const float* logits, const int64_t* labels, float* loss,
                                          float* probs, int64_t rows, int64_t v, int64_t ignore,
                                          DeviceError* error, int site) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = logits + r * v;
    float mx;
    double log_sum;
    SoftmaxRow(x, probs + r * v, v, v, &mx, &log_sum);
    if (threadIdx.x != 0) continue;
    int64_t label = labels[r];
    if (!LabelOk(label, v, ignore)) {
      ReportError(error, kLabelOutOfRange, site, r, label, v, ignore);
      loss[r] = 0;
    } else {
      loss[r] = label == ignore ? 0.f : static_cast<float>(log_sum - (x[label] - mx));
    }
  }
}

__global__ void SoftmaxCrossEntropyGradKernel(const float* probs, const int64_t* labels,
                                              const float* dloss, float* dlogits, int64_t rows,
                                              int64_t v, int64_t ignore, DeviceError* error,
                                              int site) {
  int64_t n = rows * v;
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) {
    int64_t r = i / v, j = i % v;
    int64_t label = labels[r];
    if (!LabelOk(label, v, ignore)) {
      if (j == 0) ReportError(error, kLabelGradOutOfRange, site, r, label, v, ignore);
      dlogits[i] = 0;
    } else if (label == ignore) {
      dlogits[i] = 0;
    } else {
      float d = probs[i] * dloss[r];
      dlogits[i] = j == label ? d - dloss[r] : d;
    }
  }
}

}  // namespace

void LaunchSoftmax(const float* x, float* y, int64_t rows, int64_t n, int64_t period,
                   cudaStream_t stream) {
  if (rows == 0 || n == 0) return;
  SoftmaxKernel<<<GridForRows(rows), kThreads, 0, stream>>>(x, y, rows, n, period);
}

void LaunchSoftmaxGrad(const float* y, const float* dy, float* dx, int64_t rows, int64_t n,
                       cudaStream_t stream) {
  if (rows == 0 || n == 0) return;
  SoftmaxGradKernel<<<GridForRows(rows), kThreads, 0, stream>>>(y, dy, dx, rows, n);
}

void LaunchSoftmaxCrossEntropy(const float* logits, const int64_t* labels, float* loss,
                               float* probs, int64_t rows, int64_t v, int64_t ignore_index,
                               DeviceError* error, int site, cudaStream_t stream) {
  if (rows == 0) return;
  SoftmaxCrossEntropyKernel<<<GridForRows(rows), kThreads, 0, stream>>>(
      logits, labels, loss, probs, rows, v, ignore_index, error, site);
}

void LaunchSoftmaxCrossEntropyGrad(const float* probs, const int64_t* labels, const float* dloss,
                                   float* dlogits, int64_t rows, int64_t v, int64_t ignore_index,
                                   DeviceError* error, int site, cudaStream_t stream) {
  if (rows * v == 0) return;
  SoftmaxCrossEntropyGradKernel<<<GridFor(rows * v), kThreads, 0, stream>>>(
      probs, labels, dloss, dlogits, rows, v, ignore_index, error, site);
}

}  // namespace pw::ops::cuda
