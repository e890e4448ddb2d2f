#pragma once
// The device side of the CUDA kernels: launchers over plain pointers, the only code nvcc
// compiles. The host side (kernels/cuda/*.cc) reads the KernelContext, checks it and calls
// these. Every launcher queues its work on `stream` and returns at once; a zero size
// launches nothing. Results follow the CPU kernels' arithmetic (same accumulation types,
// same order where one thread owns an output), so they agree to rounding.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/defs/row_groups.h"
#include "ops/kernels/cuda/device_error.h"

namespace pw::ops::cuda {

// Element-wise.
void LaunchBiasAdd(const float* x, const float* bias, float* out, int64_t rows, int64_t d,
                   cudaStream_t stream);
// out[j] = the sum over rows of x[r, j] in `groups` (ops/defs/row_groups.h: each group from
// zero in row order, then the groups' sums; with groups.partial, out is each group's sum,
// [count, d]) (bias_add_grad, sum_row_partials).
void LaunchColumnSum(const float* x, float* out, RowGroups groups, int64_t d, cudaStream_t stream);
void LaunchAdd(const float* x, const float* y, float* out, int64_t n, cudaStream_t stream);
void LaunchGelu(const float* x, float* out, int64_t n, cudaStream_t stream);
void LaunchGeluGrad(const float* x, const float* g, float* dx, int64_t n, cudaStream_t stream);
void LaunchScale(const float* x, float* out, int64_t n, float scale, float bias,
                 cudaStream_t stream);
// out = first + xs[0] + xs[1] + ... per element, in list order; without `first`,
// out = xs[0] + xs[1] + .... The addresses travel as a kernel argument.
inline constexpr int kMaxSumInputs = 32;
struct SumInputs {
  int count;
  const float* xs[kMaxSumInputs];
};
void LaunchSum(const float* first, const SumInputs& xs, float* out, int64_t n, cudaStream_t stream);

// Embedding: ids are checked on the device; a bad one is reported and its row skipped.
void LaunchEmbedding(const int64_t* ids, const float* w, float* out, int64_t tokens, int64_t vocab,
                     int64_t h, DeviceError* error, int site, cudaStream_t stream);
// dw must be zero; rows are added in token order.
void LaunchEmbeddingGrad(const int64_t* ids, const float* g, float* dw, int64_t tokens,
                         int64_t vocab, int64_t h, DeviceError* error, int site,
                         cudaStream_t stream);

void LaunchFillF32(float* out, int64_t n, float value, cudaStream_t stream);
// bf16 or f16 storage: every element set to the same 16 bits.
void LaunchFillU16(uint16_t* out, int64_t n, uint16_t bits, cudaStream_t stream);

// f32 <-> bf16 (bf16 = true) or f16, rounding to nearest even when narrowing.
void LaunchWidenToF32(bool bf16, const void* in, float* out, int64_t n, cudaStream_t stream);
void LaunchNarrowFromF32(bool bf16, const float* in, void* out, int64_t n, cudaStream_t stream);
void LaunchFillI64(int64_t* out, int64_t n, int64_t value, cudaStream_t stream);

// mean: one float from a double sum; mean_grad: dx[i] = g[0] / n.
void LaunchMean(const float* x, int64_t n, float* out, cudaStream_t stream);
void LaunchMeanGrad(const float* g, float* dx, int64_t n, cudaStream_t stream);

// layer_norm over the last dim d of `rows` rows.
void LaunchLayerNorm(const float* x, const float* scale, const float* bias, float* y, float* mean,
                     float* rstd, int64_t rows, int64_t d, double epsilon, cudaStream_t stream);
void LaunchLayerNormGrad(const float* x, const float* scale, const float* mean, const float* rstd,
                         const float* dy, float* dx, int64_t rows, int64_t d, cudaStream_t stream);
// Either output may be null.
void LaunchLayerNormParamGrad(const float* x, const float* mean, const float* rstd, const float* dy,
                              float* dscale, float* dbias, RowGroups groups, int64_t d,
                              cudaStream_t stream);

// rms_norm over the last dim d of `rows` rows.
void LaunchRmsNorm(const float* x, const float* scale, float* y, float* rstd, int64_t rows,
                   int64_t d, double epsilon, cudaStream_t stream);
void LaunchRmsNormGrad(const float* x, const float* scale, const float* rstd, const float* dy,
                       float* dx, int64_t rows, int64_t d, cudaStream_t stream);
void LaunchRmsNormParamGrad(const float* x, const float* rstd, const float* dy, float* dscale,
                            RowGroups groups, int64_t d, cudaStream_t stream);

// swiglu: out = silu(gate)·up; its grad (either output may be null).
void LaunchSwiglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream);
void LaunchSwigluGrad(const float* gate, const float* up, const float* dout, float* dgate,
                      float* dup, int64_t n, cudaStream_t stream);

// rotary_embedding over `rows` rows of `width` = heads · d columns, row r at position
// r % seq; out may alias x.
void LaunchRotary(const float* x, float* out, int64_t rows, int64_t seq, int64_t width, int64_t d,
                  double theta, bool inverse, cudaStream_t stream);

// Row softmax; y may alias x. period > 0: causal, row r keeps columns j <= r % period.
void LaunchSoftmax(const float* x, float* y, int64_t rows, int64_t n, int64_t period,
                   cudaStream_t stream);
// dx = y ⊙ (dy - rowsum(dy ⊙ y)); dx may alias dy.
void LaunchSoftmaxGrad(const float* y, const float* dy, float* dx, int64_t rows, int64_t n,
                       cudaStream_t stream);
void LaunchSoftmaxCrossEntropy(const float* logits, const int64_t* labels, float* loss,
                               float* probs, int64_t rows, int64_t v, int64_t ignore_index,
                               DeviceError* error, int site, cudaStream_t stream);
void LaunchSoftmaxCrossEntropyGrad(const float* probs, const int64_t* labels, const float* dloss,
                                   float* dlogits, int64_t rows, int64_t v, int64_t ignore_index,
                                   DeviceError* error, int site, cudaStream_t stream);

// Transpose of a dense tensor of rank <= kMaxTransposeRank: out[i] = in[sum idx_k ·
// src_stride[k]], idx the multi-index of i in out_dims. elem_size is 2, 4 or 8.
inline constexpr int kMaxTransposeRank = 8;
struct TransposeDims {
  int rank;
  int64_t out_dims[kMaxTransposeRank];
  int64_t src_stride[kMaxTransposeRank];
};
void LaunchTranspose(const void* in, void* out, int64_t numel, const TransposeDims& dims,
                     int elem_size, cudaStream_t stream);

// Vocabulary-parallel embedding and cross-entropy: this rank holds rows (columns) [start,
// start + rows) of a `vocab`-row table; ids and labels are checked against `vocab`.
void LaunchCEmbedding(const int64_t* ids, const void* w, void* out, int64_t tokens, int64_t rows,
                      int64_t start, int64_t vocab, int64_t row_bytes, DeviceError* error, int site,
                      cudaStream_t stream);
// dw must be zero; rows are added in token order.
void LaunchCEmbeddingGrad(const int64_t* ids, const float* g, float* dw, int64_t tokens,
                          int64_t rows, int64_t start, int64_t vocab, int64_t h, DeviceError* error,
                          int site, cudaStream_t stream);
void LaunchReduceMax(const float* x, float* out, int64_t rows, int64_t n, cudaStream_t stream);
void LaunchSoftmaxStats(const float* logits, const float* max, const int64_t* labels,
                        float* sum_exp, float* target, int64_t rows, int64_t cols, int64_t start,
                        int64_t vocab, int64_t ignore_index, DeviceError* error, int site,
                        cudaStream_t stream);
void LaunchCSoftmaxCrossEntropy(const float* logits, const float* max, const float* sum_exp,
                                const float* target, const int64_t* labels, float* loss,
                                float* probs, int64_t rows, int64_t cols, int64_t ignore_index,
                                cudaStream_t stream);
void LaunchCSoftmaxCrossEntropyGrad(const float* probs, const int64_t* labels, const float* dloss,
                                    float* dlogits, int64_t rows, int64_t cols, int64_t start,
                                    int64_t ignore_index, cudaStream_t stream);

// sgd, and adam in two launches: the update, then the beta powers (in place, so they are
// written only after every thread has read them). A bad beta power is reported and both
// launches then change nothing. `skip` (may be null): loss scaling's flag, > 0 keeps
// every output at its input.
void LaunchSgd(const float* p, const float* g, float* out, int64_t n, float lr, const float* skip,
               cudaStream_t stream);
struct AdamParams {
  double lr, beta1, beta2, epsilon;
};
void LaunchAdam(const float* p, const float* g, const float* m1, const float* m2,
                const float* beta1_pow, const float* beta2_pow, float* p_out, float* m1_out,
                float* m2_out, int64_t n, AdamParams params, DeviceError* error, int site,
                const float* skip, cudaStream_t stream);
void LaunchAdamPowers(const float* beta1_pow, const float* beta2_pow, float* beta1_pow_out,
                      float* beta2_pow_out, AdamParams params, const float* skip,
                      cudaStream_t stream);

// Loss scaling: Out[k] = X[k] · (1 / scale[0]) for every listed tensor, and found[0] = 1 when
// any of them holds an inf or NaN (else 0); then the scale's update (one thread).
inline constexpr int kMaxUnscaleInputs = 64;
struct UnscaleList {
  int count;
  const float* xs[kMaxUnscaleInputs];
  float* outs[kMaxUnscaleInputs];
  int64_t sizes[kMaxUnscaleInputs];
};
void LaunchCheckFiniteAndUnscale(const UnscaleList& list, const float* scale, float* found,
                                 cudaStream_t stream);
// into[0] = max(into[0], from[0]).
void LaunchMaxInto(float* into, const float* from, cudaStream_t stream);
// Copies `bytes` from `from` to `to` unless skip[0] > 0 (read on the device).
void LaunchCopyUnless(const void* from, void* to, int64_t bytes, const float* skip,
                      cudaStream_t stream);
void LaunchUpdateLossScaling(const float* found, const float* scale, const float* good,
                             const float* skipped, float* scale_out, float* good_out,
                             float* skipped_out, int64_t growth_interval, float growth_factor,
                             float backoff_factor, cudaStream_t stream);

}  // namespace pw::ops::cuda
