// Embedding gather and its scatter-add grad. Ids come from the data, so every one is
// checked before it indexes W; a bad one is reported and its row left alone.

#include "ops/kernels/cuda/device_util.cuh"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

__global__ void EmbeddingKernel(const int64_t* ids, const float* w, float* out, int64_t tokens,
                                int64_t vocab, int64_t h, DeviceError* error, int site) {
  int64_t n = tokens * h;
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) {
    int64_t t = i / h, j = i % h;
    int64_t id = ids[t];
    if (id < 0 || id >= vocab) {
      if (j == 0) ReportError(error, kEmbeddingIdOutOfRange, site, t, id, vocab);
      continue;
    }
    out[i] = w[id * h + j];
  }
}

__global__ void CheckIdsKernel(const int64_t* ids, int64_t tokens, int64_t vocab, int code,
                               DeviceError* error, int site) {
  for (int64_t t = GlobalThread(); t < tokens; t += GlobalStride()) {
    int64_t id = ids[t];
    if (id < 0 || id >= vocab) ReportError(error, code, site, t, id, vocab);
  }
}

// One thread per column walks the tokens in order, so repeated ids add up in the CPU's
// order and no atomics are needed.
__global__ void EmbeddingGradKernel(const int64_t* ids, const float* g, float* dw, int64_t tokens,
                                    int64_t vocab, int64_t h) {
  for (int64_t j = GlobalThread(); j < h; j += GlobalStride()) {
    for (int64_t t = 0; t < tokens; ++t) {
      int64_t id = ids[t];
      if (id < 0 || id >= vocab) continue;
      dw[id * h + j] += g[t * h + j];
    }
  }
}

}  // namespace

void LaunchEmbedding(const int64_t* ids, const float* w, float* out, int64_t tokens, int64_t vocab,
                     int64_t h, DeviceError* error, int site, cudaStream_t stream) {
  if (tokens == 0) return;
  if (h == 0) {
    // Nothing to copy, but bad ids are still an error, as on the CPU.
    CheckIdsKernel<<<GridFor(tokens), kThreads, 0, stream>>>(ids, tokens, vocab,
                                                             kEmbeddingIdOutOfRange, error, site);
    return;
  }
  EmbeddingKernel<<<GridFor(tokens * h), kThreads, 0, stream>>>(ids, w, out, tokens, vocab, h,
                                                                error, site);
}

void LaunchEmbeddingGrad(const int64_t* ids, const float* g, float* dw, int64_t tokens,
                         int64_t vocab, int64_t h, DeviceError* error, int site,
                         cudaStream_t stream) {
  if (tokens == 0) return;
  CheckIdsKernel<<<GridFor(tokens), kThreads, 0, stream>>>(ids, tokens, vocab,
                                                           kEmbeddingGradIdOutOfRange, error, site);
  if (h == 0) return;
  EmbeddingGradKernel<<<GridFor(h), kThreads, 0, stream>>>(ids, g, dw, tokens, vocab, h);
}

}  // namespace pw::ops::cuda
