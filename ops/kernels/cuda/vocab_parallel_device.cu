// Vocabulary-parallel embedding and cross-entropy on the device, following the CPU kernels
// (ops/kernels/cpu/vocab_parallel.cc): one block per row for the row reductions (sums in
// double), one thread per column for the scatter-add in token order.

#include "ops/kernels/cuda/device_util.cuh"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

__global__ void CheckVocabIds(const int64_t* ids, int64_t tokens, int64_t vocab, int code,
                              DeviceError* error, int site) {
  for (int64_t t = GlobalThread(); t < tokens; t += GlobalStride()) {
    int64_t id = ids[t];
    if (id < 0 || id >= vocab) ReportError(error, code, site, t, id, vocab);
  }
}

// Byte-wise rows, so every dtype gathers alike; rows of other ranks' ids are zero.
__global__ void CEmbeddingKernel(const int64_t* ids, const char* w, char* out, int64_t tokens,
                                 int64_t rows, int64_t start, int64_t row_bytes) {
  const int64_t n = tokens * row_bytes;
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) {
    const int64_t t = i / row_bytes, b = i % row_bytes;
    const int64_t local = ids[t] - start;
    out[i] = local >= 0 && local < rows ? w[local * row_bytes + b] : 0;
  }
}

__global__ void CEmbeddingGradKernel(const int64_t* ids, const float* g, float* dw, int64_t tokens,
                                     int64_t rows, int64_t start, int64_t h) {
  for (int64_t j = GlobalThread(); j < h; j += GlobalStride())
    for (int64_t t = 0; t < tokens; ++t) {
      const int64_t local = ids[t] - start;
      if (local >= 0 && local < rows) dw[local * h + j] += g[t * h + j];
    }
}

__global__ void ReduceMaxKernel(const float* x, float* out, int64_t rows, int64_t n) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, x[r * n + j]);
    mx = BlockMax(mx);
    if (threadIdx.x == 0) out[r] = mx;
  }
}

__global__ void SoftmaxStatsKernel(const float* logits, const float* max, const int64_t* labels,
                                   float* sum_exp, float* target, int64_t rows, int64_t cols,
                                   int64_t start, int64_t vocab, int64_t ignore, DeviceError* error,
                                   int site) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* x = logits + r * cols;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += expf(x[j] - max[r]);
    sum = BlockSum(sum);
    if (threadIdx.x != 0) continue;
    const int64_t label = labels[r];
    if (label != ignore && (label < 0 || label >= vocab))
      ReportError(error, kVocabLabelOutOfRange, site, r, label, vocab);
    sum_exp[r] = static_cast<float>(sum);
    const int64_t local = label - start;
    target[r] = local >= 0 && local < cols ? x[local] - max[r] : 0.f;
  }
}

__global__ void CSoftmaxCrossEntropyKernel(const float* logits, const float* max,
                                           const float* sum_exp, const float* target,
                                           const int64_t* labels, float* loss, float* probs,
                                           int64_t rows, int64_t cols, int64_t ignore) {
  const int64_t n = rows * cols;
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) {
    const int64_t r = i / cols;
    const float inv = static_cast<float>(1.0 / sum_exp[r]);
    probs[i] = expf(logits[i] - max[r]) * inv;
    if (i % cols == 0)
      loss[r] = labels[r] == ignore
                    ? 0.f
                    : static_cast<float>(log(static_cast<double>(sum_exp[r])) - target[r]);
  }
}

__global__ void CSoftmaxCrossEntropyGradKernel(const float* probs, const int64_t* labels,
                                               const float* dloss, float* dlogits, int64_t rows,
                                               int64_t cols, int64_t start, int64_t ignore) {
  const int64_t n = rows * cols;
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) {
    const int64_t r = i / cols, j = i % cols;
    if (labels[r] == ignore) {
      dlogits[i] = 0;
      continue;
    }
    const float d = probs[i] * dloss[r];
    dlogits[i] = j == labels[r] - start ? d - dloss[r] : d;
  }
}

}  // namespace

void LaunchCEmbedding(const int64_t* ids, const void* w, void* out, int64_t tokens, int64_t rows,
                      int64_t start, int64_t vocab, int64_t row_bytes, DeviceError* error, int site,
                      cudaStream_t stream) {
  if (tokens == 0) return;
  CheckVocabIds<<<GridFor(tokens), kThreads, 0, stream>>>(ids, tokens, vocab,
                                                          kCEmbeddingIdOutOfRange, error, site);
  if (row_bytes == 0) return;
  CEmbeddingKernel<<<GridFor(tokens * row_bytes), kThreads, 0, stream>>>(
      ids, static_cast<const char*>(w), static_cast<char*>(out), tokens, rows, start, row_bytes);
}

void LaunchCEmbeddingGrad(const int64_t* ids, const float* g, float* dw, int64_t tokens,
                          int64_t rows, int64_t start, int64_t vocab, int64_t h, DeviceError* error,
                          int site, cudaStream_t stream) {
  if (tokens == 0) return;
  CheckVocabIds<<<GridFor(tokens), kThreads, 0, stream>>>(ids, tokens, vocab,
                                                          kCEmbeddingGradIdOutOfRange, error, site);
  if (h == 0) return;
  CEmbeddingGradKernel<<<GridFor(h), kThreads, 0, stream>>>(ids, g, dw, tokens, rows, start, h);
}

void LaunchReduceMax(const float* x, float* out, int64_t rows, int64_t n, cudaStream_t stream) {
  if (rows == 0 || n == 0) return;
  ReduceMaxKernel<<<GridForRows(rows), kThreads, 0, stream>>>(x, out, rows, n);
}

void LaunchSoftmaxStats(const float* logits, const float* max, const int64_t* labels,
                        float* sum_exp, float* target, int64_t rows, int64_t cols, int64_t start,
                        int64_t vocab, int64_t ignore_index, DeviceError* error, int site,
                        cudaStream_t stream) {
  if (rows == 0) return;
  SoftmaxStatsKernel<<<GridForRows(rows), kThreads, 0, stream>>>(
      logits, max, labels, sum_exp, target, rows, cols, start, vocab, ignore_index, error, site);
}

void LaunchCSoftmaxCrossEntropy(const float* logits, const float* max, const float* sum_exp,
                                const float* target, const int64_t* labels, float* loss,
                                float* probs, int64_t rows, int64_t cols, int64_t ignore_index,
                                cudaStream_t stream) {
  if (rows * cols == 0) return;
  CSoftmaxCrossEntropyKernel<<<GridFor(rows * cols), kThreads, 0, stream>>>(
      logits, max, sum_exp, target, labels, loss, probs, rows, cols, ignore_index);
}

void LaunchCSoftmaxCrossEntropyGrad(const float* probs, const int64_t* labels, const float* dloss,
                                    float* dlogits, int64_t rows, int64_t cols, int64_t start,
                                    int64_t ignore_index, cudaStream_t stream) {
  if (rows * cols == 0) return;
  CSoftmaxCrossEntropyGradKernel<<<GridFor(rows * cols), kThreads, 0, stream>>>(
      probs, labels, dloss, dlogits, rows, cols, start, ignore_index);
}

}  // namespace pw::ops::cuda
