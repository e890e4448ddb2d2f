#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "ops/kernels/cuda/device_util.cuh"
#include "ops/kernels/cuda/member_order_reduce.h"

namespace pw::ops::cuda {
namespace {

__device__ inline float Widen(float v) { return v; }
__device__ inline float Widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline float Widen(__half v) { return __half2float(v); }
template <typename T>
__device__ inline T Narrow(float v);
template <>
__device__ inline float Narrow<float>(float v) {
  return v;
}
template <>
__device__ inline __nv_bfloat16 Narrow<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ inline __half Narrow<__half>(float v) {
  return __float2half_rn(v);
}

// Compiled with --fmad=false like every kernel here: each addition rounds as the CPU's.
template <typename T>
__global__ void MemberOrderReduce(const T* slots, int n, int64_t count, T* out, bool max) {
  for (int64_t i = GlobalThread(); i < count; i += GlobalStride()) {
    float acc = Widen(slots[i]);
    for (int m = 1; m < n; ++m) {
      const float x = Widen(slots[m * count + i]);
      acc = max ? (x > acc ? x : acc) : acc + x;
    }
    out[i] = Narrow<T>(acc);
  }
}

}  // namespace

void LaunchMemberOrderReduce(const void* slots, int n, int64_t count, void* out, DataType dtype,
                             bool max, cudaStream_t stream) {
  if (count == 0) return;
  switch (dtype) {
    case DataType::kBFloat16:
      MemberOrderReduce<<<GridFor(count), kThreads, 0, stream>>>(
          static_cast<const __nv_bfloat16*>(slots), n, count, static_cast<__nv_bfloat16*>(out),
          max);
      break;
    case DataType::kFloat16:
      MemberOrderReduce<<<GridFor(count), kThreads, 0, stream>>>(
          static_cast<const __half*>(slots), n, count, static_cast<__half*>(out), max);
      break;
    default:
      MemberOrderReduce<<<GridFor(count), kThreads, 0, stream>>>(
          static_cast<const float*>(slots), n, count, static_cast<float*>(out), max);
      break;
  }
}

}  // namespace pw::ops::cuda
