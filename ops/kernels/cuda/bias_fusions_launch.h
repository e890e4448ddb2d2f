#pragma once
// The device side of bias_gelu, bias_dropout_add and their grads (kernels/cuda/bias_fusions.cc
// is the host side). `n` elements in rows of a bias of `d`; X + Bias is formed in a register
// and never stored.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/dropout_mask.h"

namespace pw::ops::cuda {

// out = gelu(x + bias).
void LaunchBiasGelu(const float* x, const float* bias, float* out, int64_t n, int64_t d,
                    cudaStream_t stream);
// dx = g · gelu'(x + bias).
void LaunchBiasGeluGrad(const float* x, const float* bias, const float* g, float* dx, int64_t n,
                        int64_t d, cudaStream_t stream);

// The mask of a dropout site, as dropout's kernel draws it; `seed` null: no dropout (p 0).
struct DeviceMask {
  const int64_t* seed = nullptr;  // the fed i64, read on the device
  uint64_t salt = 0;
  uint32_t threshold = 0;
  float scale = 1.0f;
  DropoutLayout layout;
};
// out = residual + dropout(x + bias).
void LaunchBiasDropoutAdd(const float* x, const float* bias, const float* residual, float* out,
                          int64_t n, int64_t d, const DeviceMask& mask, cudaStream_t stream);

}  // namespace pw::ops::cuda
