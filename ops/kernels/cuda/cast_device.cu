// Conversions between f32 and bf16 / f16 on the device: cuda_bf16.h's and cuda_fp16.h's
// round-to-nearest-even intrinsics, as the CPU conversions (ops/low_precision.h) round.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops/kernels/cuda/device_util.cuh"
#include "ops/kernels/cuda/launchers.h"

namespace pw::ops::cuda {
namespace {

__global__ void WidenBf16(const __nv_bfloat16* in, float* out, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) out[i] = __bfloat162float(in[i]);
}
__global__ void WidenF16(const __half* in, float* out, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) out[i] = __half2float(in[i]);
}
__global__ void NarrowBf16(const float* in, __nv_bfloat16* out, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) out[i] = __float2bfloat16_rn(in[i]);
}
__global__ void NarrowF16(const float* in, __half* out, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) out[i] = __float2half_rn(in[i]);
}
__global__ void FillU16(uint16_t* out, int64_t n, uint16_t bits) {
  for (int64_t i = GlobalThread(); i < n; i += GlobalStride()) out[i] = bits;
}

}  // namespace

void LaunchWidenToF32(bool bf16, const void* in, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  if (bf16) {
    WidenBf16<<<GridFor(n), kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(in), out, n);
  } else {
    WidenF16<<<GridFor(n), kThreads, 0, stream>>>(static_cast<const __half*>(in), out, n);
  }
}

void LaunchNarrowFromF32(bool bf16, const float* in, void* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  if (bf16) {
    NarrowBf16<<<GridFor(n), kThreads, 0, stream>>>(in, static_cast<__nv_bfloat16*>(out), n);
  } else {
    NarrowF16<<<GridFor(n), kThreads, 0, stream>>>(in, static_cast<__half*>(out), n);
  }
}

void LaunchFillU16(uint16_t* out, int64_t n, uint16_t bits, cudaStream_t stream) {
  if (n == 0) return;
  FillU16<<<GridFor(n), kThreads, 0, stream>>>(out, n, bits);
}

}  // namespace pw::ops::cuda
